"""The approve rules, against the tool calls of spec's example."""

from types import SimpleNamespace

import pytest

from functai_approval import matches, plugin, selects

pytestmark = pytest.mark.usefixtures("functai_isolated")  # functai's pytest plugin

REFUND = SimpleNamespace(name="refund", effects="changes", path="support/answer/refund")
STATUS = SimpleNamespace(name="order_status", effects="reads", path="support/answer/order_status")
EMAIL = SimpleNamespace(name="send_email", effects=None, path="support/send_email")


@pytest.mark.parametrize(
    "rule, asked",
    [
        (None, []),
        (lambda tool: True, ["refund", "send_email"]),
        ("changes", ["refund", "send_email"]),
        ("all", ["refund", "order_status", "send_email"]),
        (["refund"], ["refund"]),
        (["answer/refund"], ["refund"]),
        (["support/send_email"], ["send_email"]),
        (["email"], []),
    ],
)
def test_the_eight_rules(rule, asked):
    assert [t.name for t in (REFUND, STATUS, EMAIL) if selects(rule, t)] == asked


def test_path_matching_is_by_whole_segments():
    assert matches(["answer/refund"], "refund", "support/answer/refund")
    assert not matches(["swer/refund"], "refund", "support/answer/refund")
    assert matches(["support/answer/refund"], "refund", "support/answer/refund")
    assert not matches(["email"], "send_email", "support/send_email")


def test_the_plugin_is_named_approval_and_hooks_tool_call():
    assert repr(plugin) == 'Plugin("approval", 0.1.0: tool_call)'
