"""What a runner needs to spread an evaluation over workers (``functai evaluate --runner NAME``):
the rows to ask, one row asked in a worker, and the evaluation of their results."""

from ._evaluation.evaluate import Evaluation, Row, RowResult, ask, rows_for

__all__ = ["Evaluation", "Row", "RowResult", "ask", "rows_for"]
