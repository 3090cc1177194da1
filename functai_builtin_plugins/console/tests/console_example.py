"""Example data for the console's tests and screenshots: a branched conversation with entries, a
waiting refund, a nested call, a failed call and a call recorded without content."""

import console_shop as shop

import functai
from functai.testing import ScriptedLM, tool_call


def build(store: str, log: str) -> dict:
    """Write the example into ``store`` and ``log``; the ids the tests look for."""
    made = {}
    functai.configure(log_calls=log, client=ScriptedLM([
        "Your order A7 ships today.", "It arrives on Friday.", "Yes, A7 can go to your office instead.",
    ]))
    chat = shop.support.conversation("alex", store=store)
    chat("Where is my order A7?")
    first = chat.head
    chat("When will it arrive?")
    chat.remember("notes", "mood", "calm", turn=chat.head)
    chat.remember("notes", "customer", "alex@example.com")
    chat.continue_from(first)("Can it go to my office?")  # a second branch from the first turn
    made["branch_from"] = first.id

    functai.configure(client=ScriptedLM([
        tool_call("order_status", {"order": "B2"}), "B2 is in the warehouse.", "B2 leaves the warehouse today."]))
    made["nested"] = (nested := shop.support.run("Where is B2?")[1]).id
    made["day"] = nested.started[:10]

    functai.configure(client=ScriptedLM([functai.ModelError("the model refused", code="model-refused")]))
    try:
        shop.support("Say something rude")
    except functai.FunctAIError:
        pass

    functai.configure(client=ScriptedLM(["Noted."]), log_content=False)
    made["private"] = shop.support.run("My card number is 4111 1111 1111 1111")[1].id
    functai.configure(log_content=True)

    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1", "amount": 400})]))
    ticket = shop.support.conversation("ticket-42", store=store, approve="changes")
    try:
        ticket("Refund order A1, it arrived broken")
    except functai.Waiting as waiting:
        made["waiting"] = waiting.turn.id
    functai.configure(client=None, log_calls=None)
    return made
