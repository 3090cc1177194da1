"""functai-dbos's tests: the distribution's package from its folder, DBOS over a SQLite system database."""

from __future__ import annotations

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
for folder in (HERE.parent, HERE.parents[2] / "tests"):
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
