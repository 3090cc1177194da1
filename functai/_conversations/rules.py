"""What earlier turns a turn is shown: the conversation's rule (``context=``)."""

from __future__ import annotations

__all__ = ["all_turns", "last_turns"]


class all_turns:
    """Show a turn every done turn of its branch."""

    limit: int | None = None

    def __repr__(self) -> str:
        return "all_turns()"


class last_turns(all_turns):
    """Show a turn the last ``n`` done turns of its branch."""

    def __init__(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"last_turns(n) needs a whole number n >= 0, not {n!r}")
        self.limit = n

    def __repr__(self) -> str:
        return f"last_turns({self.limit})"
