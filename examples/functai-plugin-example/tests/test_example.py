"""The example plugin, tested the way a plugin author would: only functai's
pytest fixtures (scripted_lm, installed_plugins, call_records) and its public API.

Run after ``pip install -e examples/functai-plugin-example``: the first tests
load the plugin through its real entry point, as functai does in production.
"""

from importlib.metadata import PackageNotFoundError, version

import pytest

import functai
from functai import Change, Plugin, ai, tool
from functai.testing import tool_call

import functai_plugin_example
from functai_plugin_example import HOUSE_STYLE

removed: list[str] = []


@tool(effects="changes")
def delete_file(path: str) -> str:
    """Delete a file."""
    removed.append(path)
    return f"deleted {path}"


@tool(effects="reads")
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@ai(tools=[delete_file, read_file])
def tidy(request: str) -> str:
    """Tidy the project as the request says."""


@ai
def summary(text: str) -> str:
    """Summarize the text in one sentence."""


def instruction(request: functai.Request) -> str:
    return request.messages[0]["content"]


def test_its_entry_point_loads_as_the_plugin_example(installed_plugins):
    found = installed_plugins("example")  # the entry point pip installed, loaded as functai loads it
    [plugin] = found.found
    assert (plugin.name, plugin.state, plugin.distribution) == ("example", "loaded", "functai-plugin-example")
    assert plugin.version == version("functai-plugin-example")  # the distribution's: the module declares none
    assert plugin.plugin.hooks == ("before_call", "tool_call")


def test_installed_it_adds_the_house_style_to_every_call(scripted_lm, installed_plugins, call_records):
    lm = scripted_lm(["A short summary."])
    installed_plugins("example")
    assert summary("A long text.") == "A short summary."
    assert instruction(lm.requests[0]) == "Summarize the text in one sentence.\n\n" + HOUSE_STYLE
    assert call_records.last().changes == [{
        "plugin": "example", "version": version("functai-plugin-example"), "hook": "before_call",
        "change": {"sections": [HOUSE_STYLE]},
    }]


def test_it_blocks_delete_file_and_tells_the_model_why(scripted_lm, installed_plugins, call_records):
    lm = scripted_lm([tool_call("delete_file", {"path": "notes.txt"}), "I could not delete notes.txt."])
    installed_plugins("example")
    assert tidy("Delete notes.txt") == "I could not delete notes.txt."
    assert removed == []  # the tool never ran
    told = [m for m in lm.requests[1].messages if m["role"] == "tool"]
    assert "deleting files is not allowed here" in told[0]["content"]
    [call] = call_records.last().tool_calls
    assert (call["name"], call["blocked"]) == ("delete_file", "example")
    assert call["block_reason"] == functai_plugin_example.BLOCKED_TOOLS["delete_file"]


def test_other_tools_still_run(scripted_lm, installed_plugins, call_records):
    lm = scripted_lm([tool_call("read_file", {"path": "notes.txt"}), "It says hello."])
    installed_plugins("example")
    assert tidy("What is in notes.txt?") == "It says hello."
    told = [m for m in lm.requests[1].messages if m["role"] == "tool"]
    assert told[0]["content"] == "contents of notes.txt"
    assert "blocked" not in call_records.last().tool_calls[0]


def test_listed_by_hand_too_it_still_runs_once(scripted_lm, installed_plugins, call_records):
    # The module names itself "example" (plugin_name), so the same plugin set in two
    # layers runs once, in its outermost one: the installed layer.
    lm = scripted_lm(["ok"])
    installed_plugins("example")
    functai.configure(plugins=[functai_plugin_example])
    summary("text")
    assert instruction(lm.requests[0]).count(HOUSE_STYLE) == 1
    assert [c["plugin"] for c in call_records.last().changes] == ["example"]


def test_it_does_not_repeat_a_house_style_an_inner_layer_gave(scripted_lm, installed_plugins, call_records):
    lm = scripted_lm(["ok"])
    installed_plugins("example")
    own = Plugin("own-style", before_call=lambda call: Change(sections=[HOUSE_STYLE]))
    with functai.settings(plugins=[own]):
        summary("text")
    assert instruction(lm.requests[0]).count(HOUSE_STYLE) == 1
    assert [c["plugin"] for c in call_records.last().changes] == ["own-style"]


def test_a_host_can_turn_it_off(scripted_lm, installed_plugins):
    lm = scripted_lm(["ok", "ok"])
    installed_plugins("example")
    with functai.settings(disable_plugins=["example"]):
        summary("text")
    with functai.settings(load_plugins=[]):
        summary("text")
    assert all(HOUSE_STYLE not in instruction(request) for request in lm.requests)


def test_without_installing_it_nothing_changes(scripted_lm, call_records):
    # functai's fixtures hide every pip-installed plugin unless the test installs it.
    lm = scripted_lm(["ok"])
    summary("text")
    assert instruction(lm.requests[0]) == "Summarize the text in one sentence."
    assert call_records.last().changes == []


def test_as_a_module_object_without_the_entry_point(scripted_lm, installed_plugins):
    # Useful before the package is installed: the module itself, named as its entry point.
    lm = scripted_lm(["ok"])
    found = installed_plugins(example=functai_plugin_example)
    # a module declaring no version takes its distribution's, once the package is installed
    try:
        expected = version("functai-plugin-example")
    except PackageNotFoundError:
        expected = "0.0.0"
    assert found.found[0].version == expected
    summary("text")
    assert instruction(lm.requests[0]).endswith(HOUSE_STYLE)


@pytest.fixture(autouse=True)
def _nothing_removed():
    removed.clear()
