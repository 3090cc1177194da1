"""Issue 15: the faster fold records exactly what the engine recorded before it.

``tests/data/records_10_plugins.json`` was written by ``tests/record_scenario.py``
run against the engine as it was before the rework (see that file's docstring).
"""

import json
from pathlib import Path

import pytest

import record_scenario

GOLDEN = Path(__file__).parent / "data" / "records_10_plugins.json"


def change_lists(value, found):
    """Every ``changes`` list in the data, in order (their key order matters too)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "changes":
                found.append(item)
            change_lists(item, found)
    elif isinstance(value, list):
        for item in value:
            change_lists(item, found)
    return found


# The scenario was written before a refusal was raised: its Change(block=...) is the old spelling,
# and the records it makes must read as they did.
@pytest.mark.filterwarnings("ignore:plugin 'p9' in tool_call:DeprecationWarning")
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_records_of_ten_plugins_over_every_hook_read_as_before(tmp_path, mode):
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    now = record_scenario.run(tmp_path, mode)
    for part in golden:
        assert now[part] == golden[part], part
    old, new = change_lists(golden, []), change_lists(now, [])
    assert len(new) == len(old) > 20
    for before, after in zip(old, new):
        # same entries, same keys in the same order (what a JSON reader or a diff of two logs sees)
        assert json.dumps(after, ensure_ascii=False) == json.dumps(before, ensure_ascii=False)


def test_the_scenario_covers_every_hook_and_every_change_field():
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    entries = [entry for changes in change_lists(golden, []) for entry in changes]
    hooks = {entry["hook"] for entry in entries}
    assert hooks == {"turn_start", "context", "before_call", "request", "tool_call", "tool_result"}
    fields = {field for entry in entries for field in entry.get("change", {})}
    assert fields == {"inputs", "sections", "keep", "without", "instruction", "lm", "settings", "tools",
                      "request", "block", "output"}
    assert any("change" not in entry for entry in entries)  # log_content=False keeps plugin, version, hook
    assert any("µs" in entry for entry in entries)  # record_timing=True
    heard = {item[0] for item in golden["heard"]}
    assert heard == {"reply", "call_end", "turn_end"}
