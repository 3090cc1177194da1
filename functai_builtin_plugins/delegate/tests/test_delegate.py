"""delegate: another AI function as a tool, remembering per branch."""

import dataclasses

import pytest
import functai
from functai import ai
from functai.testing import ScriptedLM, tool_call
from functai_delegate import delegate

pytestmark = pytest.mark.usefixtures("functai_isolated")  # functai's pytest plugin


@ai
def research(query: str) -> str:
    """Look things up in the notes."""


researcher = delegate(research, description="Look things up in the notes.")


@ai(tools=[researcher])
def assistant(request: str) -> str:
    """Help with the request."""


def model():
    """The assistant delegates each request; the researcher answers R1, R2, …"""
    answers = {"n": 0}

    def reply(request):
        system = request.messages[0]["content"]
        if system.startswith("Look things up"):
            answers["n"] += 1
            return f"R{answers['n']}"
        if request.messages[-1]["role"] == "tool":
            return "done: " + request.messages[-1]["content"]
        asked = request.messages[-1]["content"].removeprefix("request: ")
        return tool_call("research", {"query": asked})

    return ScriptedLM(reply=reply)


def research_history(request):
    return [(m["role"], m["content"]) for m in request.messages[1:]]


def test_a_delegate_remembers_on_its_branch_only(tmp_path):
    lm = model()
    store = str(tmp_path / "store")
    with functai.settings(client=lm, log_calls=str(tmp_path / "calls")):
        chat = assistant.conversation("alex", store=store)
        assert chat("first") == "done: R1"
        assert chat("second") == "done: R2"
        second_research = [r for r in lm.requests if r.messages[0]["content"].startswith("Look")][-1]
        assert research_history(second_research) == [
            ("user", "query: first"), ("assistant", "R1"), ("user", "query: second"),
        ]
        branch = chat.continue_from(chat.turns[0])
        assert branch("other") == "done: R3"
        third_research = [r for r in lm.requests if r.messages[0]["content"].startswith("Look")][-1]
        assert research_history(third_research) == [
            ("user", "query: first"), ("assistant", "R1"), ("user", "query: other"),
        ]
    sub = research.conversation("alex.research", store=store)
    assert len(sub.all_turns()) == 3
    records = {r.id: r for r in functai.read_calls(tmp_path / "calls")}
    delegated = [r for r in records.values() if r.function == "research"]
    assert all(records[r.parent].function == "assistant" for r in delegated)  # under the asking call
    assert {r.conversation["id"] for r in delegated} == {"alex.research"}


def test_outside_a_conversation_it_is_a_plain_call():
    lm = model()
    with functai.settings(client=lm):
        assert assistant("hello") == "done: R1"
    assert researcher.name == "research" and researcher.description == "Look things up in the notes."
    assert researcher.parameters["properties"] == {"query": {"type": "string"}}


def test_the_builtin_factory_resolves_to_this_distribution():
    assert functai.delegate(research).__class__.__name__ == "Delegate"


refunds = []


@functai.tool(effects="changes")
def refund(order: str) -> str:
    """Refund an order."""
    refunds.append(order)
    return f"refunded {order}"


@ai(tools=[refund])
def clerk(request: str) -> str:
    """Clerk: refund orders."""


desk = delegate(clerk)


@ai(tools=[desk])
def front(request: str) -> str:
    """Front desk: pass refunds to the clerk."""


def reply(request):
    """The front desk asks the clerk, who asks for the refund; each says what the tool said."""
    system = request.messages[0]["content"]
    last = request.messages[-1]
    if system.startswith("Clerk"):
        return "clerk done: " + last["content"] if last["role"] == "tool" else tool_call("refund", {"order": "A1"})
    if last["role"] == "tool":
        return "front done: " + last["content"]
    return tool_call("clerk", {"request": "refund A1"})


@pytest.fixture
def install_approval(installed_plugins):
    installed_plugins("approval")  # the installed functai-approval, loaded as functai loads it


def test_an_approval_inside_a_delegate_makes_the_asking_turn_wait_and_resume(install_approval):
    refunds.clear()
    with functai.settings(client=ScriptedLM(reply=reply)):
        chat = front.conversation("desk", store=functai.MemoryStore(), approve=["refund"])
        with pytest.raises(functai.Waiting) as info:
            chat("Refund A1")
        (approval,) = info.value.approvals
        assert approval["name"] == "refund" and approval["key"].startswith("desk.clerk/")
        assert refunds == []
        info.value.turn.approve()
        assert info.value.turn.resume() == "front done: clerk done: refunded A1"
    assert refunds == ["A1"]
    sub = clerk.conversation("desk.clerk", store=chat.store)
    assert [t.state for t in sub.all_turns()] == ["done"]


def test_a_long_conversation_id_gets_a_hashed_sub_conversation(tmp_path):
    from functai_delegate import sub_conversation_id

    store = str(tmp_path / "store")
    long_a, long_b = "a" * 190 + "-one", "a" * 190 + "-two"  # 194 characters: "<id>.research" would be 203
    with functai.settings(client=model()):
        chat = assistant.conversation(long_a, store=store)
        assert chat("first") == "done: R1"
        assert chat("second") == "done: R2"  # the same sub-conversation: it remembers the first
        other = assistant.conversation(long_b, store=store)
        assert other("third") == "done: R3"
    sub_a, sub_b = sub_conversation_id(long_a, "research"), sub_conversation_id(long_b, "research")
    assert sub_a != sub_b and len(sub_a) == len(sub_b) == 200
    assert sub_a.startswith("a" * 150) and ".research-" in sub_a
    assert sub_conversation_id(long_a, "research") == sub_a  # stable
    assert len(research.conversation(sub_a, store=store).all_turns()) == 2
    assert len(research.conversation(sub_b, store=store).all_turns()) == 1
    assert sub_conversation_id("alex", "research") == "alex.research"  # short ids stay readable


def test_delegate_effects_derived_from_the_program_or_declared():
    assert researcher.effects == "reads"  # research holds no tools
    assert desk.effects == "changes"  # clerk holds refund
    assert delegate(clerk, effects="reads").effects == "reads"


def test_a_persons_edit_and_name_reach_the_delegated_approval(install_approval):
    """Approving the asking turn with changed inputs approves the delegate's call as edited, by the
    same person: the refund runs with the edit, never with what the model asked."""
    refunds.clear()
    with functai.settings(client=ScriptedLM(reply=reply)):
        chat = front.conversation("edits", store=functai.MemoryStore(), approve=["refund"])
        with pytest.raises(functai.Waiting) as info:
            chat("Refund A1")
        turn = info.value.turn
        turn.approve(info.value.approvals[0], inputs={"order": "B2"}, by="ana")
        assert turn.resume() == "front done: clerk done: refunded B2"
    assert refunds == ["B2"]
    sub = clerk.conversation("edits.clerk", store=chat.store)
    (answer,) = sub.all_turns()[0].answers.values()
    assert answer["inputs"] == {"order": "B2"} and answer["by"] == "ana"


@dataclasses.dataclass
class Span:
    start: int
    end: int


def test_the_models_inputs_are_read_by_the_programs_types_and_refused_naming_them():
    """A delegate is typed as its program: a wrong input is refused before it runs, naming the type,
    and a dataclass input arrives as the dataclass."""
    got = []

    @ai(client=ScriptedLM(reply=lambda request: got.append(request.messages[-1]["content"]) or "ok"))
    def measure(span: Span, unit: str) -> str:
        """Measure the span."""

    lm = ScriptedLM([tool_call("measure", {"span": {"start": 1, "end": "two"}}),
                     tool_call("measure", {"span": {"start": 1, "end": 2}, "unit": "cm"}), "done"])

    @ai(client=lm, tools=[delegate(measure)])
    def ask(question: str) -> str:
        """Ask."""

    _, record = ask.run("q")
    refused, ran = record.tool_calls
    assert "input 'span' must be Span" in refused["output"] and "input 'unit' (str) is missing" in refused["output"]
    assert "Any" not in refused["output"] and "output" in ran and got == ['span: {"start": 1, "end": 2}\nunit: cm']


def test_a_turn_that_failed_off_an_earlier_turn_is_not_the_branchs_memory(tmp_path):
    lm = model()
    failing = {"on": False}
    plain = lm._reply

    def reply(request):
        if failing["on"] and request.messages[-1]["role"] == "tool":
            raise functai.ModelError("the server is down", code="model-unavailable")
        return plain(request)

    lm._reply = reply
    with functai.settings(client=lm):
        chat = assistant.conversation("alex", store=str(tmp_path / "store"))
        chat("first")
        chat("second")
        failing["on"] = True
        with pytest.raises(functai.FunctAIError, match="model-unavailable"):
            chat.continue_from(chat.turns[0])("elsewhere")  # delegated, then failed: a dead end off the first
        failing["on"] = False
        chat("third")
    asked = [r for r in lm.requests if r.messages[0]["content"].startswith("Look")][-1]
    assert research_history(asked) == [("user", "query: first"), ("assistant", "R1"), ("user", "query: second"),
                                       ("assistant", "R2"), ("user", "query: third")]


def test_a_second_delegation_in_a_resumed_turn_asks_anew(install_approval):
    refunds.clear()

    def two(request):
        system, last = request.messages[0]["content"], request.messages[-1]
        if system.startswith("Clerk"):
            order = last["content"].split()[-1]
            return "clerk done: " + last["content"] if last["role"] == "tool" else tool_call("refund", {"order": order})
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        if len(results) < 2:
            return tool_call("clerk", {"request": f"refund {['A1', 'B2'][len(results)]}"})
        return "front done: " + " | ".join(results)

    with functai.settings(client=ScriptedLM(reply=two)):
        chat = front.conversation("desk", store=functai.MemoryStore(), approve=["refund"])
        with pytest.raises(functai.Waiting) as first:
            chat("Refund A1 and B2")
        first.value.turn.approve()
        with pytest.raises(functai.Waiting) as second:  # the second delegation asks for its own refund
            first.value.turn.resume()
        assert [a["input"] for a in second.value.approvals] == [{"order": "B2"}]
        second.value.turn.approve()
        assert second.value.turn.resume() == "front done: clerk done: refunded A1 | clerk done: refunded B2"
    assert refunds == ["A1", "B2"]


@pytest.mark.parametrize("damage", ["data", "turn", "sub-conversation"])
def test_a_damaged_memory_starts_the_delegate_afresh_with_a_warning(tmp_path, damage, caplog):
    import json

    lm = model()
    store = tmp_path / "store"
    with functai.settings(client=lm):
        chat = assistant.conversation("alex", store=str(store))
        chat("first")
        path = store / "alex.jsonl"
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        for line in lines:
            if line.get("kind") == "entry" and line.get("plugin") == "delegate":
                if damage == "data":
                    line["data"] = "garbage"
                elif damage == "turn":
                    line["data"]["turn"] = "nope"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        if damage == "sub-conversation":
            (store / "alex.research.jsonl").unlink()
        assert assistant.conversation("alex", store=str(store))("second") == "done: R2"
    asked = [r for r in lm.requests if r.messages[0]["content"].startswith("Look")][-1]
    assert research_history(asked) == [("user", "query: second")]  # nothing it can continue from
    if damage != "data":  # a damaged entry is skipped by itself; a lost sub-turn is said
        said = [r.getMessage() for r in caplog.records if r.name == "functai.delegate"]
        assert len(said) == 1 and "delegate 'research' of conversation 'alex' starts afresh" in said[0], said
