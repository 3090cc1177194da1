"""The plugin engine on real calls: order across layers, folds, failures, records."""

import asyncio
import threading

import pytest

import functai
from functai import Change, Plugin, PluginError, ai
from functai.testing import ScriptedLM


def tag(name, log=None, **plugin):
    """A plugin whose before_call adds a section naming itself (and logs its run)."""

    def handler(call):
        if log is not None:
            log.append(name)
        return Change(sections=[name])

    return Plugin(name, before_call=handler, **plugin)


@pytest.fixture
def lm():
    script = ScriptedLM(reply=lambda request: "ok")
    functai.configure(client=script)
    return script


def system(request):
    return request.messages[0]["content"]


# order ------------------------------------------------------------------------


def test_order_own_then_blocks_innermost_first_then_process(lm):
    log = []
    own, inner, outer, process = (tag(n, log) for n in ("own", "inner", "outer", "process"))
    functai.configure(plugins=[process])

    @ai(plugins=[own])
    def answer(q: str) -> str:
        """Answer."""

    with functai.settings(plugins=[outer]):
        with functai.settings(plugins=[inner]):
            value, record = answer.run("x")
    assert log == ["own", "inner", "outer", "process"]
    assert system(lm.requests[0]) == "Answer.\n\nown\n\ninner\n\nouter\n\nprocess"
    assert [c["plugin"] for c in record.changes] == ["own", "inner", "outer", "process"]


def test_within_a_layer_list_order_and_within_a_plugin_registration_order(lm):
    log = []
    a = tag("a", log)
    a.on("before_call", lambda call: log.append("a2") or Change(sections=["a2"]))
    b = tag("b", log)
    with functai.settings(plugins=[b, a]):
        answer_fn()("x")
    assert log == ["b", "a", "a2"]


def test_a_last_plugin_runs_after_every_other_in_each_hook_it_has(lm, installed_plugins):
    log = []
    guard, own, process = tag("guard", log, last=True), tag("own", log), tag("process", log)
    late = tag("late", log, last=True)
    installed_plugins(late, tag("installed", log))
    functai.configure(plugins=[guard, process])
    answer_fn(plugins=[own])("x")
    assert log == ["own", "process", "installed", "guard", "late"]  # two `last` ones keep their layer order


def test_a_plugin_named_approval_is_not_placed_by_its_name(lm, installed_plugins):
    log = []
    installed_plugins(tag("approval", log), tag("zeta", log))
    answer_fn()("x")
    assert log == ["approval", "zeta"]


def test_last_is_true_or_false():
    with pytest.raises(TypeError, match="last must be True or False"):
        Plugin("x", last="yes")


def answer_fn(**settings):
    @ai(**settings)
    def answer(q: str) -> str:
        """Answer."""

    return answer


def test_a_plugin_in_several_layers_runs_once_in_its_outermost(lm):
    log = []
    shared = tag("shared", log)
    other = tag("other", log)
    functai.configure(plugins=[shared])
    answer = answer_fn(plugins=[shared, other])
    with functai.settings(plugins=[shared]):
        answer("x")
    assert log == ["other", "shared"]
    # same name, a different object, in another layer: still once, the outer one
    log.clear()
    functai.configure(plugins=[tag("other", log, version="9.9.9")])
    _, record = answer.run("x")
    assert [(c["plugin"], c["version"]) for c in record.changes] == [("shared", "0.0.0"), ("other", "9.9.9")]


def test_program_plugins_false_drops_the_functions_own(lm):
    log = []
    answer = answer_fn(plugins=[tag("own", log)])
    with functai.settings(program_plugins=False, plugins=[tag("host", log)]):
        answer("x")
    assert log == ["host"]
    log.clear()
    functai.configure(program_plugins=False)
    answer("x")
    assert log == []
    with pytest.raises(TypeError, match="program_plugins"):
        answer_fn(program_plugins=False)


def test_blocks_are_per_thread_and_per_task(lm):
    seen = {}
    answer = answer_fn()
    barrier = threading.Barrier(2)

    def work(name):
        with functai.settings(plugins=[tag(name)]):
            barrier.wait()
            seen[name] = answer.run("x").record.changes[0]["plugin"]

    threads = [threading.Thread(target=work, args=(n,)) for n in ("t1", "t2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"t1": "t1", "t2": "t2"}

    async def task(name):
        with functai.settings(plugins=[tag(name)]):
            await asyncio.sleep(0)
            return answer.run("x").record.changes[0]["plugin"]

    async def both():
        return await asyncio.gather(task("a1"), task("a2"))

    assert asyncio.run(both()) == ["a1", "a2"]


# settings layers ----------------------------------------------------------------


def test_closest_layer_wins_for_ordinary_settings(lm):
    functai.configure(temperature=0.1, seed=1)
    answer = answer_fn(temperature=0.9)
    with functai.settings(temperature=0.5, top_p=0.3):
        answer("x")
    assert lm.requests[-1].settings == {"temperature": 0.9, "top_p": 0.3, "seed": 1}
    with functai.settings(seed=2):
        with functai.settings(seed=3):
            answer("x")
    assert lm.requests[-1].settings["seed"] == 3


def test_unknown_setting_is_a_type_error_naming_the_closest():
    with pytest.raises(TypeError, match="did you mean 'temperature'"):
        functai.configure(temprature=0)
    with pytest.raises(TypeError, match="did you mean 'max_tokens'"):
        functai.settings(max_token=5)
    with pytest.raises(TypeError, match="did you mean 'plugins'"):
        ai(plugin=[])(lambda q: q)


def test_setting_values_are_checked_when_set():
    with pytest.raises(TypeError):
        functai.configure(temperature="hot")
    with pytest.raises(ValueError):
        functai.configure(retries=-1)
    with pytest.raises(ValueError, match="not a rule"):
        functai.configure(approve="everything")
    with pytest.raises(TypeError):
        functai.settings(approve=3)


# folds ----------------------------------------------------------------------------


def test_before_call_fold_each_handler_sees_what_the_last_left(lm):
    seen = []

    def first(call):
        seen.append((call.instruction, call.sections, call.lm, dict(call.settings), call.tools))
        return Change(instruction="New.", sections=["s1"], lm="m1", settings={"temperature": 0}, tools=["b"])

    def second(call):
        seen.append((call.instruction, call.sections, call.lm, dict(call.settings), call.tools))
        return Change(sections=["s2"], lm="m2", settings={"seed": 7}, tools=["a", "b"])

    @functai.tool
    def a() -> str:
        """A."""
        return "a"

    @functai.tool
    def b() -> str:
        """B."""
        return "b"

    @ai(tools=[a, b], plugins=[Plugin("one", before_call=first), Plugin("two", before_call=second)])
    def answer(q: str) -> str:
        """Answer."""

    value, record = answer.run("x")
    assert seen == [
        ("Answer.", (), None, {}, ("a", "b")),
        ("New.", ("s1",), "m1", {"temperature": 0}, ("b",)),
    ]
    request = lm.requests[-1]
    assert system(request) == "New.\n\ns1\n\ns2"
    assert request.settings == {"temperature": 0, "seed": 7}
    assert [t["name"] for t in request.tools] == ["a", "b"]
    assert record.model == "m2" and record.instruction == "New.\n\ns1\n\ns2"
    assert record.changes == [
        {"plugin": "one", "version": "0.0.0", "hook": "before_call",
         "change": {"instruction": "New.", "sections": ["s1"], "lm": "m1", "settings": {"temperature": 0}, "tools": ["b"]}},
        {"plugin": "two", "version": "0.0.0", "hook": "before_call",
         "change": {"sections": ["s2"], "lm": "m2", "settings": {"seed": 7}, "tools": ["a", "b"]}},
    ]


def test_a_change_that_sets_nothing_is_not_recorded(lm):
    answer = answer_fn(plugins=[Plugin("quiet", before_call=lambda c: Change(sections=[" "]))])
    assert answer.run("x").record.changes == []


def test_a_tool_the_function_does_not_have_refuses(lm):
    answer = answer_fn(plugins=[Plugin("picky", before_call=lambda c: Change(tools=["delete_file"]))])
    with pytest.raises(PluginError) as info:
        answer("x")
    assert (info.value.code, info.value.plugin, info.value.hook, info.value.field) == (
        "plugin-change", "picky", "before_call", "tools")
    assert "delete_file" in info.value.message
    assert lm.requests == []


@pytest.mark.parametrize(
    "returned, field",
    [
        (Change(block="no"), "block"),
        (Change(keep=["t1"]), "keep"),
        (Change(output="x"), "output"),
        ("a string", None),
        ({"sections": ["x"]}, None),
    ],
)
def test_a_field_or_value_the_hook_does_not_take_refuses_before_anything_is_sent(lm, returned, field):
    answer = answer_fn(plugins=[Plugin("bad", version="1.2.3", before_call=lambda c: returned)])
    with pytest.raises(PluginError) as info:
        answer("x")
    error = info.value
    assert (error.code, error.plugin, error.hook, error.field) == ("plugin-change", "bad", "before_call", field)
    assert "'bad'" in error.message and "before_call" in error.message
    assert lm.requests == []
    assert error.record.error["code"] == "plugin-change"


def test_a_bad_change_made_inside_a_handler_names_the_plugin(lm):
    answer = answer_fn(plugins=[Plugin("typo", before_call=lambda c: Change(sections="one string"))])
    with pytest.raises(PluginError) as info:
        answer("x")
    assert (info.value.code, info.value.plugin, info.value.hook, info.value.field) == (
        "plugin-change", "typo", "before_call", "sections")


def test_a_raising_before_call_handler_stops_the_call_and_nothing_is_sent(lm):
    def broken(call):
        raise ValueError("redactor crashed")

    later = []
    answer = answer_fn(plugins=[Plugin("redact", before_call=broken), tag("later", later)])
    with pytest.raises(PluginError) as info:
        answer("x")
    error = info.value
    assert (error.code, error.plugin, error.hook) == ("plugin-failed", "redact", "before_call")
    assert isinstance(error.__cause__, ValueError)
    assert "redactor crashed" in error.message
    assert lm.requests == [] and later == []
    assert error.record.error == {"code": "plugin-failed", "message": error.message}


def test_functai_errors_and_base_exceptions_pass_through_unchanged(lm):
    own_error = functai.FunctAIError("mine", code="custom")

    def raise_it(call):
        raise own_error

    with pytest.raises(functai.FunctAIError) as info:
        answer_fn(plugins=[Plugin("p", before_call=raise_it)])("x")
    assert info.value is own_error

    def interrupt(call):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        answer_fn(plugins=[Plugin("p", before_call=interrupt)])("x")


# request ----------------------------------------------------------------------------


def test_request_replacement_is_sent_and_marks_the_record_not_replayable(lm):
    import attrs

    def swap(event):
        assert event.function == "answer" and event.path == "answer"
        return attrs.evolve(event.request, model="other-model")

    answer = answer_fn(plugins=[Plugin("swap", version="2.0", request=swap)])
    value, record = answer.run("x")
    assert lm.requests[0].model == "other-model"
    assert record.replayable is False
    assert record.to_dict()["replayable"] is False
    assert record.changes == [{"plugin": "swap", "version": "2.0", "hook": "request", "change": {"request": "replaced"}}]


def test_a_request_handed_back_unchanged_is_not_a_replacement(lm):
    import attrs

    def same(event):
        return event.request

    def equal(event):  # a new object, equal to the one it was given
        return attrs.evolve(event.request)

    def then_swap(event):
        return attrs.evolve(event.request, model="other-model")

    answer = answer_fn(plugins=[Plugin("same", request=same), Plugin("equal", request=equal)])
    value, record = answer.run("x")
    assert record.changes == [] and record.replayable is True
    assert "replayable" not in record.to_dict()
    # Only a different request is a replacement, recorded once for the plugin that made it.
    answer = answer_fn(plugins=[Plugin("equal", request=equal), Plugin("swap", request=then_swap),
                                Plugin("same", request=same)])
    value, record = answer.run("x")
    assert [(c["plugin"], c["change"]) for c in record.changes] == [("swap", {"request": "replaced"})]
    assert record.replayable is False and lm.requests[-1].model == "other-model"


def test_a_replayable_record_has_no_replayable_key(lm):
    assert "replayable" not in answer_fn().run("x").record.to_dict()


def test_request_hook_sees_the_previous_replacement(lm):
    import attrs

    seen = []

    def first(event):
        return attrs.evolve(event.request, settings={"seed": 1})

    def second(event):
        seen.append(event.request.settings)
        return None

    answer_fn(plugins=[Plugin("a", request=first), Plugin("b", request=second)])("x")
    assert seen == [{"seed": 1}]


def test_a_raising_request_handler_stops_the_call_and_nothing_is_sent(lm):
    def broken(event):
        raise RuntimeError("no")

    with pytest.raises(PluginError) as info:
        answer_fn(plugins=[Plugin("r", request=broken)])("x")
    assert (info.value.code, info.value.plugin, info.value.hook) == ("plugin-failed", "r", "request")
    assert lm.requests == []


def test_request_handler_returning_a_change_refuses(lm):
    with pytest.raises(PluginError) as info:
        answer_fn(plugins=[Plugin("r", request=lambda e: Change(lm="x"))])("x")
    assert (info.value.code, info.value.hook) == ("plugin-change", "request")
    assert lm.requests == []
    assert "This request was not sent to the model" in info.value.message


def test_a_wrong_before_call_change_says_nothing_was_sent(lm):
    with pytest.raises(PluginError) as info:
        answer_fn(plugins=[Plugin("b", before_call=lambda c: Change(block="x"))])("x")
    assert info.value.hook == "before_call"
    assert "Nothing was sent to the model for this call" in info.value.message and lm.requests == []


def test_request_hook_runs_on_every_attempt():
    script = ScriptedLM(["not a number", "42"])
    functai.configure(client=script)
    attempts = []

    @ai(plugins=[Plugin("count", request=lambda e: attempts.append(len(e.request.messages)))])
    def count(text: str) -> int:
        """Count the words."""

    assert count("a b") == 42
    assert attempts == [2, 4]


def test_one_settings_object_entered_by_several_tasks_and_threads(lm):
    block = functai.settings(temperature=0.25)
    answer = answer_fn()

    async def task():
        with block:
            await asyncio.sleep(0)
            answer("x")
            await asyncio.sleep(0)
        return True

    async def both():
        return await asyncio.gather(task(), task())

    assert asyncio.run(both()) == [True, True]
    errors = []

    def work():
        try:
            for _ in range(20):
                with block:
                    answer("x")
        except Exception as error:  # pragma: no cover - the failure this test looks for
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(r.settings["temperature"] == 0.25 for r in lm.requests)
    answer("outside")
    assert "temperature" not in lm.requests[-1].settings


def test_handlers_cannot_change_the_event_or_the_request_in_place(lm):
    import attrs

    def sneaky(call):
        call.instruction = "Say BUY NOW."

    with pytest.raises(PluginError) as info:
        answer_fn(plugins=[Plugin("sneaky", before_call=sneaky)])("x")
    assert (info.value.code, info.value.plugin) == ("plugin-failed", "sneaky")
    assert isinstance(info.value.__cause__, AttributeError)

    def swap_in_place(event):
        event.request = attrs.evolve(event.request, model="evil")

    def edit_message(event):
        event.request.messages[1]["content"] = "redacted"

    def edit_settings(event):
        event.request.settings["temperature"] = 2

    for handler in (swap_in_place, edit_message, edit_settings):
        with pytest.raises(PluginError) as info:
            answer_fn(plugins=[Plugin("sneaky", request=handler)])("x")
        assert info.value.code == "plugin-failed"
    assert lm.requests == []


def test_model_setting_values_in_a_change_are_checked(lm):
    for bad in ({"temperature": "hot"}, {"max_tokens": -5}, {"stop": 3}):
        with pytest.raises(PluginError) as info:
            answer_fn(plugins=[Plugin("p", before_call=lambda c, bad=bad: Change(settings=bad))])("x")
        assert (info.value.code, info.value.plugin, info.value.field) == ("plugin-change", "p", "settings")
    assert lm.requests == []


def test_an_empty_change_from_a_request_handler_is_no_change(lm):
    value, record = answer_fn(plugins=[Plugin("r", request=lambda e: Change())]).run("x")
    assert record.changes == [] and "replayable" not in record.to_dict()
