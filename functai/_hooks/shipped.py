"""This repository's own distributions, and the command that installs one: they are not on the
package index (anyone could register their names there), so a hint names their folder here."""

from __future__ import annotations

import os
import shlex

#: This repository's distributions, each in ``functai_builtin_plugins/<folder>``: distribution → folder.
BUILTIN_FOLDERS = {"functai-approval": "approval", "functai-compaction": "compaction",
                   "functai-delegate": "delegate", "functai-otel": "otel", "functai-cache": "cache",
                   "functai-fallback": "fallback", "functai-budget": "budget", "functai-dbos": "dbos"}


def install_command(distribution: str) -> str:
    """The command that installs one of this repository's distributions: its folder's full path
    when this functai runs from a checkout, else the path the README writes."""
    folder = BUILTIN_FOLDERS[distribution]
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    here = os.path.join(top, "functai_builtin_plugins", folder)
    if os.path.isfile(os.path.join(here, "pyproject.toml")):
        return f"functai install {shlex.quote(here)}"
    return f"functai install ./functai_builtin_plugins/{folder} (in a checkout of the functai repository)"
