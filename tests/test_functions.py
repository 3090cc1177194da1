"""AI functions: inputs, typed outputs, re-asks, versions, nesting, layouts, records."""

import dataclasses
import enum
import json
import logging
import os
import stat
from typing import Literal, Optional

import attrs
import pytest
from loopback import LoopbackServer, Scripted, completion, error_body

import functai
from functai import Change, FunctAIError, OutputError, Plugin, PluginError, Template, ai, baked
from functai.testing import ScriptedLM, log_events


def scripted(*replies):
    script = ScriptedLM(list(replies))
    functai.configure(client=script)
    return script


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


def test_docstring_is_the_instruction_and_inputs_are_bound_by_name():
    lm = scripted("Paris")
    assert capital("France") == "Paris"
    request = lm.requests[0]
    assert request.messages == (
        {"role": "system", "content": "The capital city of the country."},
        {"role": "user", "content": "country: France"},
    )
    assert request.output_schema is None
    assert capital.__name__ == "capital" and capital.__doc__.startswith("The capital")


def test_inputs_bind_like_python_with_defaults():
    lm = scripted("ok")

    @ai
    def answer(question: str, notes: list[str] = []) -> str:  # noqa: B006
        """Answer from the notes."""

    answer(question="why?")
    assert lm.requests[0].messages[1]["content"] == "question: why?\nnotes: []"
    with pytest.raises(TypeError, match="answer"):
        answer("a", "b", "c")


@dataclasses.dataclass
class Citation:
    file: str
    line: int


@attrs.frozen
class Answer:
    text: str
    citations: list[Citation]
    confidence: Optional[float] = None


class Mood(enum.Enum):
    GOOD = "good"
    BAD = "bad"


@pytest.mark.parametrize(
    "output, reply, expected",
    [
        (int, "42", 42),
        (float, "2.5", 2.5),
        (bool, "true", True),
        (list[int], "[1, 2]", [1, 2]),
        (dict[str, int], '{"a": 1}', {"a": 1}),
        (Literal["yes", "no"], '"no"', "no"),
        (Mood, '"bad"', Mood.BAD),
        (Optional[int], "null", None),
        (Answer, '{"text": "t", "citations": [{"file": "a.py", "line": 3}]}',
         Answer("t", [Citation("a.py", 3)])),
    ],
)
def test_typed_outputs_are_read_as_json(output, reply, expected):
    lm = scripted(reply)

    def f(q: str):
        """Answer."""

    f.__annotations__["return"] = output
    fn = ai(f)
    assert fn("x") == expected
    assert lm.requests[0].output_schema == fn.output_schema is not None


def test_unreadable_reply_is_asked_again_with_the_reason():
    lm = scripted("three", "3")

    @ai
    def count(text: str) -> int:
        """Count the words."""

    value, record = count.run("a b c")
    assert value == 3 and record.attempts == 2
    again = lm.requests[1].messages
    assert again[-2] == {"role": "assistant", "content": "three"}
    assert again[-1]["role"] == "user"
    assert "could not be read as int" in again[-1]["content"]


def test_unreadable_after_retries_fails_carrying_the_reply():
    lm = scripted("three", "still three", "never")

    @ai(retries=1)
    def count(text: str) -> int:
        """Count the words."""

    with pytest.raises(OutputError) as info:
        count("a b c")
    assert info.value.code == "output-invalid"
    assert info.value.reply == "still three"
    assert "after 2 attempts" in info.value.message
    assert len(lm.requests) == 2
    assert info.value.record.error["code"] == "output-invalid"

    scripted("three")
    with pytest.raises(OutputError):
        ai(retries=0)(count.fn)("x")


def test_version_is_stable_and_changes_with_the_definition_not_plugins():
    def make(doc, **settings):
        def summarize(text: str) -> str:
            pass

        summarize.__doc__ = doc
        return ai(**settings)(summarize)

    a = make("Summarize.")
    assert a.version == make("Summarize.").version
    assert a.version == make("Summarize.", plugins=[Plugin("p")], temperature=0).version
    assert a.version != make("Summarize briefly.").version
    assert len(a.version) == 16


def test_needs_a_docstring():
    with pytest.raises(TypeError, match="docstring"):
        @ai
        def nothing(x: str) -> str:
            pass


def test_unsupported_output_type_is_refused_at_decoration():
    class Plain:
        pass

    with pytest.raises(TypeError):
        @ai
        def f(x: str) -> Plain:
            """F."""


def test_no_model_configured_is_a_clear_error_and_never_a_scripted_default():
    with pytest.raises(FunctAIError) as info:
        capital("France")
    assert info.value.code == "no-model"
    assert "lm=" in info.value.message


def test_nested_calls_record_parent_and_path():
    lm = ScriptedLM(reply=lambda r: "inner" if "Inner" in r.messages[0]["content"] else "outer")
    functai.configure(client=lm)
    records = []

    @ai
    def inner(q: str) -> str:
        """Inner."""

    def run_inner(call):
        if call.function == "support":
            records.append(inner.run("x").record)
        return None

    @ai(plugins=[Plugin("nest", before_call=run_inner)])
    def support(q: str) -> str:
        """Support."""

    value, outer = support.run("q")
    assert records[0].parent == outer.id
    assert records[0].path == "support/inner"
    assert outer.parent is None and outer.path == "support"


# layouts ---------------------------------------------------------------------


def test_template_writes_the_messages():
    lm = scripted("ok")

    @ai(layout=Template(system="{instruction}", user="Country: {country}\nAnswer with a city."))
    def city(country: str) -> str:
        """The capital."""

    city("Peru")
    assert lm.requests[0].messages == (
        {"role": "system", "content": "The capital."},
        {"role": "user", "content": "Country: Peru\nAnswer with a city."},
    )


def test_template_with_an_unknown_slot_is_refused_at_decoration():
    with pytest.raises(TypeError, match="contry"):
        @ai(layout=Template(user="{contry}"))
        def city(country: str) -> str:
            """The capital."""


def test_template_without_instruction_refuses_a_changed_instruction_before_sending():
    lm = scripted("ok", "ok")
    sections = Plugin("modes", version="1.0.0", before_call=lambda c: Change(sections=["Be careful."]))

    @ai(layout=Template(user="Country: {country}"))
    def city(country: str) -> str:
        """The capital."""

    city("Peru")  # no plugin: nothing to drop
    with functai.settings(plugins=[sections]):
        with pytest.raises(PluginError) as info:
            city("Peru")
    error = info.value
    assert (error.code, error.plugin, error.hook) == ("plugin-change", "modes", "before_call")
    assert "{instruction}" in error.message
    assert len(lm.requests) == 1


def test_baked_student_reads_only_the_inputs_message_and_refuses_changes():
    lm = scripted("Lima", "x")

    @ai(lm=baked("student-7"))
    def city(country: str) -> str:
        """The capital."""

    value, record = city.run("Peru")
    assert lm.requests[0].messages == ({"role": "user", "content": "country: Peru"},)
    assert lm.requests[0].model == "student-7" and record.model == "student-7"
    with functai.settings(plugins=[Plugin("rewrite", before_call=lambda c: Change(instruction="Other."))]):
        with pytest.raises(PluginError) as info:
            city("Peru")
    assert (info.value.code, info.value.plugin) == ("plugin-change", "rewrite")
    assert "baked" in info.value.message
    assert len(lm.requests) == 1


# records and the call log -------------------------------------------------------


def test_record_fields():
    scripted("42")

    @ai(temperature=0)
    def count(text: str) -> int:
        """Count."""

    value, record = count.run("a")
    data = record.to_dict()
    assert data["function"] == "count" and data["version"] == count.version
    assert data["inputs"] == {"text": "a"} and data["output"] == 42
    assert data["instruction"] == "Count." and data["model"] == "scripted"
    assert data["settings"] == {"temperature": 0}
    assert data["error"] is None and data["parent"] is None
    assert data["tool_calls"] == [] and data["changes"] == [] and data["sections"] == []
    assert data["seconds"] >= 0 and data["started"].endswith("+00:00")


def test_log_calls_appends_json_lines_and_read_calls_reads_them_back(tmp_path):
    scripted("Lima", "Paris")
    folder = tmp_path / "calls"
    functai.configure(log_calls=str(folder))
    with functai.settings(plugins=[Plugin("modes", before_call=lambda c: Change(sections=["s"]))]):
        first = capital.run("Peru").record
    second = capital.run("France").record
    back = list(functai.read_calls(folder))
    assert [r.id for r in back] == [first.id, second.id]
    assert back[0].to_dict() == first.to_dict()
    assert back[0].changes[0]["change"] == {"sections": ["s"]}
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(folder / "calls.jsonl").st_mode) == 0o600


def test_read_calls_skips_a_torn_last_line_and_unknown_keys(tmp_path):
    scripted("Lima")
    functai.configure(log_calls=str(tmp_path))
    capital("Peru")
    path = tmp_path / "calls.jsonl"
    line = json.loads(path.read_text())
    line["id"] = "newer"
    line["some_future_key"] = 1
    with open(path, "a") as handle:
        handle.write(json.dumps(line) + "\n")
        handle.write('{"id": "torn", "funct')
    assert [r.id for r in functai.read_calls(tmp_path)][1:] == ["newer"]


def test_failed_calls_are_logged_with_their_error(tmp_path):
    scripted()
    functai.configure(log_calls=str(tmp_path))
    with pytest.raises(FunctAIError):
        capital("Peru")
    (record,) = functai.read_calls(tmp_path)
    assert record.error["code"] == "scripted-exhausted" and record.output is None


def test_log_content_false_keeps_sizes_and_changes_without_content(tmp_path):
    scripted("Lima")
    functai.configure(log_calls=str(tmp_path), log_content=False)
    with functai.settings(plugins=[Plugin("modes", version="1.0", before_call=lambda c: Change(sections=["secret"]))]):
        capital("Peru")
    text = (tmp_path / "calls.jsonl").read_text()
    assert "Peru" not in text and "Lima" not in text and "secret" not in text
    (record,) = functai.read_calls(tmp_path)
    assert record.inputs == {"country": {"chars": 4}}
    assert record.output == {"chars": 4}
    assert record.changes == [{"plugin": "modes", "version": "1.0", "hook": "before_call"}]


# a real OpenAI-compatible server on loopback -------------------------------------


def test_an_ai_function_over_http_and_the_key_goes_nowhere(tmp_path, caplog, capsys):
    key = "sk-test-SECRET-1234567890"
    with LoopbackServer() as server:
        server.script(
            Scripted(body=completion("Lima", usage={"prompt_tokens": 9, "completion_tokens": 1})),
            Scripted(status=401, body=error_body(f"bad key {key}")),
        )
        functai.configure(lm="openai/gpt-test", base_url=server.url, api_key=key, log_calls=str(tmp_path))
        caplog.set_level(logging.DEBUG)
        value, record = capital.run("Peru")
        assert value == "Lima"
        assert record.model == "openai/gpt-test" and record.usage == {"input_tokens": 9, "output_tokens": 1}
        sent = server.requests[0]
        assert sent.body["model"] == "gpt-test"
        assert sent.headers["authorization"] == f"Bearer {key}"
        with pytest.raises(FunctAIError) as info:
            capital("France")
    assert info.value.code == "model-http"
    out = capsys.readouterr()
    everything = "".join([
        (tmp_path / "calls.jsonl").read_text(), str(info.value), repr(info.value), caplog.text, out.out, out.err,
        json.dumps(record.to_dict()),
    ])
    assert "Lima" in everything
    assert key not in everything


def test_functai_lm_environment_names_the_model(monkeypatch):
    with LoopbackServer() as server:
        server.reply("Lima")
        monkeypatch.setenv("FUNCTAI_LM", "openai/env-model")
        functai.configure(base_url=server.url)
        assert capital("Peru") == "Lima"
        assert server.requests[0].body["model"] == "env-model"


def test_unknown_provider_is_a_clear_error():
    functai.configure(lm="nowhere/model")
    with pytest.raises(FunctAIError) as info:
        capital("Peru")
    assert info.value.code == "model-provider"
    assert "nowhere" in info.value.message


def test_binding_matches_python():
    lm = scripted(*["ok"] * 6)

    @ai
    def f(a: str, b: int = 2, *, c: str = "c", d: str) -> str:
        """F."""

    def sent():
        return lm.requests[-1].messages[1]["content"]

    f("x", d="dd")
    assert sent() == "a: x\nb: 2\nc: c\nd: dd"
    f(d="dd", c="cc", a="x", b=5)
    assert sent() == "a: x\nb: 5\nc: cc\nd: dd"
    f("x", 3, d="dd")
    assert sent() == "a: x\nb: 3\nc: c\nd: dd"
    for args, kwargs in [(("x",), {}), (("x", 1, "c"), {"d": "d"}), (("x",), {"a": "y", "d": "d"}), ((), {"d": "d", "zz": 1})]:
        with pytest.raises(TypeError, match=r"^f\("):
            f(*args, **kwargs)


def test_version_is_the_same_in_every_process():
    import subprocess
    import sys

    code = (
        "import functai\n"
        "@functai.ai\n"
        "def f(a: str, b: frozenset = frozenset({'x', 'y', 'z', 'w'}), c: object = object()) -> list[str]:\n"
        "    '''F.'''\n"
        "print(f.version)\n"
    )
    seen = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={"PYTHONHASHSEED": str(seed), "PYTHONPATH": os.getcwd()}).stdout
        for seed in (1, 2, 3)
    }
    assert len(seen) == 1


def test_log_content_false_keeps_no_reply_text_in_errors(tmp_path):
    scripted('"patient Bob"', '"patient Bob"')
    functai.configure(log_calls=str(tmp_path), log_content=False)

    @ai
    def triage(note: str) -> Literal["yes", "no"]:
        """Triage."""

    with pytest.raises(OutputError):
        triage("Bob")
    text = (tmp_path / "calls.jsonl").read_text()
    assert "Bob" not in text
    (record,) = functai.read_calls(tmp_path)
    assert record.error["code"] == "output-invalid" and record.error["chars"] > 0


def test_log_content_false_keeps_no_input_in_a_tools_error(tmp_path):
    """A tool's error message may quote its input (and what it read): kept as its code and size."""
    from functai.testing import tool_call

    @functai.tool
    def lookup(order: str) -> str:
        """Look an order up."""
        raise ValueError(f"customer CONTENT-{order} not found")

    @functai.tool
    def count(n: int) -> str:
        """Count."""
        return "x"

    @ai(tools=[lookup, count])
    def support(question: str) -> str:
        """Answer."""

    functai.configure(log_calls=str(tmp_path), log_content=False, client=ScriptedLM(
        [tool_call("lookup", {"order": "A1"}), tool_call("count", {"n": "CONTENT-NOT-INT"}), "ok"]))
    assert support("q") == "ok"
    assert "CONTENT" not in (tmp_path / "calls.jsonl").read_text()
    (record,) = functai.read_calls(tmp_path)
    assert [call["error"] for call in record.tool_calls] == [
        {"code": "ValueError", "chars": len("ValueError: customer CONTENT-A1 not found")},
        {"code": "input-invalid", "chars": record.tool_calls[1]["error"]["chars"]}]


def test_an_interrupted_call_is_not_logged_as_a_success(tmp_path):
    scripted(KeyboardInterrupt())
    functai.configure(log_calls=str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        capital("Peru")
    (record,) = functai.read_calls(tmp_path)
    assert record.error == {"code": "interrupted", "message": "KeyboardInterrupt"}


def test_the_call_log_survives_its_file_being_removed(tmp_path):
    import shutil

    scripted("a", "b", "c")
    folder = tmp_path / "log"
    functai.configure(log_calls=str(folder))
    capital("x")
    shutil.rmtree(folder)
    capital("y")
    capital("z")
    assert [r.inputs["country"] for r in functai.read_calls(folder)] == ["y", "z"]


@pytest.mark.parametrize("look_every", [0.0, 0.05])
def test_the_call_log_rotated_by_a_rename_goes_on_in_a_new_file(tmp_path, monkeypatch, look_every):
    """As logrotate does by default: the file is renamed, and a call made once the writer looks again
    (every LOOK_EVERY seconds) starts a new one."""
    import time

    from functai import _appendlog

    monkeypatch.setattr(_appendlog, "LOOK_EVERY", look_every)
    scripted("a", "b", "c", "d")
    folder = tmp_path / "log"
    functai.configure(log_calls=str(folder))  # an absolute path: its file is found by the folder's name
    capital("x")
    capital("y")
    os.rename(folder / "calls.jsonl", folder / "calls.jsonl.1")
    time.sleep(2 * look_every)  # the writer looks again at its next line
    capital("z")
    (rated,) = [r for r in functai.read_calls(folder) if r.inputs["country"] == "z"]
    functai.rate(rated, good=True, log=str(folder))
    os.rename(folder / "ratings.jsonl", folder / "ratings.jsonl.1")
    time.sleep(2 * look_every)
    capital("w")
    assert [r.inputs["country"] for r in functai.read_calls(folder)] == ["z", "w"]
    assert [json.loads(line)["inputs"]["country"] for line in (folder / "calls.jsonl.1").read_text().splitlines()] \
        == ["x", "y"]
    functai.rate(rated, good=False, log=str(folder))
    assert [r.rating["good"] for r in functai.read_calls(folder, rated=True)] == [False]
    assert len((folder / "ratings.jsonl.1").read_text().splitlines()) == 1


def test_read_calls_skips_lines_that_are_not_records(tmp_path):
    (tmp_path / "calls.jsonl").write_text('{"id": "x"}\n[1, 2]\n"text"\n')
    with log_events() as caught:
        assert list(functai.read_calls(tmp_path)) == []
    assert [m.split(" reason=")[1] for m in caught.messages] == [
        "not a call record: it has no 'function', 'inputs', 'started', 'version'",
        "a JSON list, not an object",
        "a JSON str, not an object",
    ]


def test_template_needs_its_user_message():
    with pytest.raises(TypeError):
        Template(system="{instruction}")


def test_ai_arguments_suggest_the_closest_name():
    with pytest.raises(TypeError, match="did you mean 'tools'"):
        ai(tool=[])(capital.fn)


def test_two_processes_logging_at_once_never_interleave_lines(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys, functai\n"
        "from functai.testing import ScriptedLM\n"
        "@functai.ai\n"
        "def echo(text: str) -> str:\n"
        "    '''Echo.'''\n"
        f"functai.configure(client=ScriptedLM(reply=lambda r: 'x' * 3000), log_calls={str(tmp_path)!r})\n"
        "for i in range(200):\n"
        "    echo(sys.argv[1] + str(i))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, tag], env={**os.environ, "PYTHONPATH": os.getcwd()})
             for tag in "pq"]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    lines = (tmp_path / "calls.jsonl").read_text().splitlines()
    assert len(lines) == 400 and all(json.loads(line)["output"] == "x" * 3000 for line in lines)
