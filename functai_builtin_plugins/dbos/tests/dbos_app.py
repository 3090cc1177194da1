"""The program the DBOS tests send turns of: a desk whose refunds need a person's approval."""

import functai
from functai import ai, tool


@tool(effects="changes")
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@ai(tools=[refund])
def desk(request: str) -> str:
    """Help the customer."""
