"""The program the DBOS tests send turns of: a desk whose refunds need a person's approval."""

import dataclasses

import functai
from functai import ai, tool


@tool(effects="changes")
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@ai(tools=[refund])
def desk(request: str) -> str:
    """Help the customer."""


@dataclasses.dataclass
class Verdict:
    refund: bool
    reason: str


@ai
def judge(request: str) -> Verdict:
    """Decide whether the request is refunded."""
