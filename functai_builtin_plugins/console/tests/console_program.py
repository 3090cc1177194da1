"""A program that makes a waiting turn, then resumes it itself once a person has answered — as a
real service would — and prints what the model was finally told. The browser tests run it, and
tell it on stdin when to start looking for the answer."""

import sys
import time

import console_shop as shop

import functai
from functai.testing import tool_call

store, log, conversation, order, amount = sys.argv[1:6]


def reply(request):
    results = [m for m in request.messages if m.get("role") == "tool"]
    if not results:
        return tool_call("refund", {"order": order, "amount": int(amount)})
    return f"model saw: {results[-1].get('content')}"


functai.configure(client=functai.testing.ScriptedLM(reply=reply), log_calls=log)
chat = shop.support.conversation(conversation, store=store, approve="changes")
try:
    chat(f"Refund order {order}")
    sys.exit("the turn did not wait")
except functai.Waiting as waiting:
    turn = waiting.turn
print("waiting", turn.id, flush=True)
sys.stdin.readline()  # the test says when to look: the console answers first, as a program polling slower would see
deadline = time.time() + 120
while time.time() < deadline:
    turn = chat.turn(turn.id)
    if all(approval["key"] in turn.answers for approval in turn.approvals):
        break
    time.sleep(0.1)
print("answer:", turn.resume(), flush=True)
