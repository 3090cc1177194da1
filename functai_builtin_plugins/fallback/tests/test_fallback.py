"""fallback(models): a failing model replaced by the next, in every driver, recorded as the plugin's change."""

import asyncio
import pathlib
import subprocess
import sys

import pytest

import functai
from functai import ModelError, NonAnswerError, ai, tool
from functai.testing import ScriptedLM, tool_call
from functai_fallback import fallback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "tests"))
from loopback import LoopbackServer, Scripted, completion, error_body  # noqa: E402

pytestmark = pytest.mark.usefixtures("functai_isolated")  # functai's pytest plugin

DRIVERS = ["call", "run", "acall", "arun", "stream", "astream"]


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


@tool(effects="reads")
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


@ai(tools=[lookup])
def support(question: str) -> str:
    """Answer the customer, looking orders up."""


def models_that_fail(down, *, code="model-http", answer=lambda request: f"{request.model} says Paris"):
    """A client that raises for the models in ``down`` and answers for the others."""

    def reply(request):
        if request.model in down:
            return ModelError(f"{request.model} is down", code=code, status=503 if code == "model-http" else None)
        return answer(request)

    return ScriptedLM(reply=reply)


def call(driver, fn, *args, folder):
    """``(value, record)`` of one call made through ``driver``; a failure raises, as the driver does."""
    if driver in ("call", "acall"):  # the value only: the record is read back from the call log
        with functai.settings(log_calls=str(folder)):
            value = fn(*args) if driver == "call" else asyncio.run(fn.acall(*args))
        [record] = [r for r in functai.read_calls(folder) if r.function == fn.__name__]
        return value, record
    if driver == "run":
        return fn.run(*args)
    if driver == "arun":
        return asyncio.run(fn.arun(*args))
    if driver == "stream":
        with fn.stream(*args) as stream:
            events = list(stream)
    else:
        async def consume():
            async with fn.astream(*args) as stream:
                return stream, [event async for event in stream]

        stream, events = asyncio.run(consume())
    assert "".join(e.text for e in events if e.kind == "text") == stream.value  # only the answering model's text
    return stream.value, stream.record


def models_asked(lm):
    return [request.model for request in lm.requests]


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_failing_model_is_replaced_by_the_next_and_the_switch_is_recorded(driver, tmp_path):
    lm = models_that_fail({"a"})
    with functai.settings(client=lm, lm="a", plugins=[fallback(["a", "b", "c"])]):
        value, record = call(driver, capital, "France", folder=tmp_path)
    assert value == "b says Paris"
    assert models_asked(lm) == ["a", "b"]
    assert record.model == "b" and record.attempts == 2  # the failed attempt is counted too
    assert record.changes == [{
        "plugin": "fallback", "version": "0.1.0", "hook": "model_error",
        "change": {"lm": "b", "error": "model-http"}, "note": "a failed (model-http); asked b, 2 of 3",
    }]
    assert record.error is None


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_model_not_in_the_list_falls_back_to_the_first_then_each_in_order(driver, tmp_path):
    lm = models_that_fail({"x", "b"})
    with functai.settings(client=lm, lm="x", plugins=[fallback(["b", "c", "d"])]):
        value, record = call(driver, capital, "France", folder=tmp_path)
    assert value == "c says Paris"
    assert models_asked(lm) == ["x", "b", "c"]
    assert record.model == "c" and record.attempts == 3
    assert [(c["hook"], c["change"], c["note"]) for c in record.changes] == [
        ("model_error", {"lm": "b", "error": "model-http"}, "x failed (model-http); asked b, 1 of 3"),
        ("model_error", {"lm": "c", "error": "model-http"}, "b failed (model-http); asked c, 2 of 3"),
    ]


@pytest.mark.parametrize("driver", DRIVERS)
def test_when_every_model_fails_the_last_error_ends_the_call(driver, tmp_path):
    lm = models_that_fail({"a", "b", "c"})
    with functai.settings(client=lm, lm="a", plugins=[fallback(["b", "c"])]):
        with pytest.raises(ModelError) as failed:
            call(driver, capital, "France", folder=tmp_path)
    assert failed.value.code == "model-http" and "c is down" in str(failed.value)
    assert models_asked(lm) == ["a", "b", "c"]
    record = failed.value.record
    assert [c["change"] for c in record.changes] == [
        {"lm": "b", "error": "model-http"}, {"lm": "c", "error": "model-http"},
    ]
    assert record.error["code"] == "model-http" and record.attempts == 3


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_code_not_in_on_is_not_handled(driver, tmp_path):
    lm = models_that_fail({"a"}, code="model-unreachable")
    with functai.settings(client=lm, lm="a", plugins=[fallback(["b"], on=("model-http",))]):
        with pytest.raises(ModelError) as failed:
            call(driver, capital, "France", folder=tmp_path)
    assert failed.value.code == "model-unreachable"
    assert models_asked(lm) == ["a"]
    assert failed.value.record.changes == []


def test_the_default_codes_are_unreachable_and_http_and_a_refusal_is_not_one(tmp_path):
    unreachable = models_that_fail({"a"}, code="model-unreachable")
    with functai.settings(client=unreachable, lm="a", plugins=[fallback(["b"])]):
        assert capital("France") == "b says Paris"

    def refuse(request):
        return NonAnswerError("the model declined", code="model-refused") if request.model == "a" else "Paris"

    refusing = ScriptedLM(reply=refuse)
    with functai.settings(client=refusing, lm="a", plugins=[fallback(["b"])]):
        with pytest.raises(NonAnswerError):
            capital("France")
    assert models_asked(refusing) == ["a"]  # the same request would be refused again: not a model outage


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_model_chosen_answers_the_rest_of_the_call(driver, tmp_path):
    def answer(request):
        return "Order A7 has shipped." if request.messages[-1]["role"] == "tool" else tool_call("lookup", {"order": "A7"})

    lm = models_that_fail({"a"}, answer=answer)
    with functai.settings(client=lm, lm="a", plugins=[fallback(["b"])]):
        value, record = call(driver, support, "Where is A7?", folder=tmp_path)
    assert value == "Order A7 has shipped."
    assert models_asked(lm) == ["a", "b", "b"]  # the tool step asks b, not a again
    assert [c["hook"] for c in record.changes] == ["model_error"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_every_attempt_counts_against_max_requests(driver, tmp_path):
    lm = models_that_fail({"a", "b", "c"})
    with functai.settings(client=lm, lm="a", max_requests=2, plugins=[fallback(["b", "c"])]):
        with pytest.raises(functai.FunctAIError) as failed:
            call(driver, capital, "France", folder=tmp_path)
    assert failed.value.code == "max-requests"
    assert models_asked(lm) == ["a", "b"]  # c would be the third request
    assert failed.value.record.model == "b"  # the last model asked: c never was


def test_over_http_a_server_error_for_one_model_falls_back_to_another():
    def serve(received):
        if received.body["model"] == "model-a":
            return Scripted(status=500, body=error_body("model-a is overloaded", "server_error"))
        return Scripted(body=completion(f"{received.body['model']}: Paris"))

    with LoopbackServer(default=serve) as server:
        functai.configure(lm="openai/model-a", base_url=server.url, api_key="sk-loopback-KEY-0123456789",
                          http_retries=0, plugins=[fallback(["openai/model-b"])])
        value, record = capital.run("France")
    assert value == "model-b: Paris"
    assert [r.body["model"] for r in server.requests] == ["model-a", "model-b"]
    assert record.model == "openai/model-b"
    [change] = record.changes
    assert change["change"] == {"lm": "openai/model-b", "error": "model-http"}
    assert change["note"] == "openai/model-a failed (model-http); asked openai/model-b, 1 of 1"


def test_a_long_note_is_cut_to_200_characters(tmp_path):
    long_a, long_b = "a" * 150, "b" * 150
    lm = models_that_fail({long_a})
    with functai.settings(client=lm, lm=long_a, plugins=[fallback([long_b])]):
        _, record = capital.run("France")
    note = record.changes[0]["note"]
    assert len(note) == 200 and note.startswith(f"{long_a} failed (model-http)") and note.endswith("…")


@pytest.mark.parametrize("models", ["openai/gpt-4.1", None, {"a": 1}, ["a", 3]])
def test_models_must_be_a_list_of_names(models):
    with pytest.raises(TypeError, match=r"fallback\(models"):
        fallback(models)


@pytest.mark.parametrize("models, says", [([], "empty"), (["a", " "], "blank"), (["a", "b", "a"], "'a' named twice")])
def test_models_must_name_each_model_once(models, says):
    with pytest.raises(functai.FunctAIError, match=says) as refused:
        fallback(models)
    assert refused.value.code == "fallback-models"


@pytest.mark.parametrize("on", ["model-http", None, ["model-http", 500]])
def test_on_must_be_a_list_of_codes(on):
    with pytest.raises(TypeError, match=r"fallback\(on="):
        fallback(["b"], on=on)


@pytest.mark.parametrize("on", [(), ("model_http",), ["Model-HTTP"]])
def test_on_must_name_codes(on):
    with pytest.raises(functai.FunctAIError) as refused:
        fallback(["b"], on=on)
    assert refused.value.code == "fallback-on"


def test_the_builtin_factory_resolves_to_this_distribution():
    plugin = functai.fallback(["b"], name="spare-models")
    assert repr(plugin) == 'Plugin("spare-models", 0.1.0: model_error)'


def test_functai_plugins_lists_it_as_a_builtin_factory():
    listed = subprocess.run([sys.executable, "-m", "functai", "plugins"], capture_output=True, text=True, check=True)
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert ["fallback", "functai-fallback", "0.1.0", "functai_fallback:fallback"] in rows


def test_another_providers_model_is_asked_without_the_first_ones_key_and_address(monkeypatch):
    """``api_key``, ``base_url`` and ``headers`` belong to the provider they were set for: a model of
    another provider is asked where its own variables say, never with the first one's key."""
    key = "sk-OPENAI-SECRET-123456"
    with LoopbackServer(Scripted(status=503, body=error_body("down"))) as first, \
            LoopbackServer(Scripted(body=completion("Paris"))) as second:
        monkeypatch.setenv("VLLM_BASE_URL", second.url)
        monkeypatch.delenv("VLLM_API_KEY", raising=False)

        @ai
        def capital(country: str) -> str:
            """The capital."""

        with functai.settings(lm="openai/gpt-4.1", api_key=key, base_url=first.url, http_retries=0,
                              headers={"X-Team": "a"}, plugins=[fallback(["vllm/local-model"])]):
            value, record = capital.run("France")
    assert value == "Paris" and record.model == "vllm/local-model"
    assert [request.headers.get("authorization") for request in first.requests] == [f"Bearer {key}"]
    [asked] = second.requests
    assert asked.headers.get("authorization") is None and asked.headers.get("x-team") is None


@pytest.mark.parametrize("first, then", [("baked", "plain"), ("plain", "baked")])
def test_a_switch_to_or_from_a_baked_student_lays_the_messages_out_for_the_model_asked(first, then):
    """A baked student reads only its inputs message; a model switched to reads what its own layout
    gives, the tool steps after it kept: a general model is given the instruction, a student not."""
    named = {"baked": functai.baked("student"), "plain": "teacher"}

    def answer(request):
        if request.model == str(named[first]):
            raise ModelError("down", code="model-http", status=503)
        if request.messages[-1]["role"] != "tool":
            return tool_call("lookup", {"order": "A1"})
        return "shipped"

    lm = ScriptedLM(reply=answer)
    with functai.settings(client=lm, lm=named[first], plugins=[fallback([named[then]])]):
        assert support("where is A1?") == "shipped"
    roles = [[m["role"] for m in request.messages] for request in lm.requests]
    system = ["system"] if then == "plain" else []
    assert roles == [["system", "user"] if first == "plain" else ["user"],
                     [*system, "user"], [*system, "user", "assistant", "tool"]]
    assert all(request.model == str(named[then]) for request in lm.requests[1:])
