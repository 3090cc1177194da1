"""Ratings, evaluation, and an instruction optimizer that ask rated calls again as they were shown."""

from .evaluate import Evaluation, Row, RowResult, evaluate
from .optimize import Candidate, Optimization, optimize
from .ratings import Rating, rate, read_ratings

__all__ = ["Candidate", "Evaluation", "Optimization", "Rating", "Row", "RowResult", "evaluate", "optimize", "rate",
           "read_ratings"]
