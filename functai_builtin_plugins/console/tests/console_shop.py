"""The example program the console's tests and screenshots use: a support function whose refund
tool needs a person's approval, kept in a store and a call log given by environment variables."""

import os

import functai
from functai import Change, Plugin, ai, tool

brief = Plugin("brief", version="1.2.0")


@brief.before_call
def be_brief(call):
    return Change(sections=["Answer in one sentence."], note="house style")


@tool(effects="changes")
def refund(order: str, amount: int) -> str:
    """Refund an amount on an order."""
    ledger = os.environ.get("SHOP_LEDGER")
    if ledger:
        with open(ledger, "a") as file:
            file.write(f"{order} {amount}\n")
    return f"refunded {amount} on {order}"


@ai
def order_status(order: str) -> str:
    """Where the order is now (a function used as a tool: its calls nest in the asking call's)."""


@ai(tools=[refund, order_status], plugins=[brief])
def support(request: str) -> str:
    """Handle the customer's request."""
