"""functai-plugin-example: a house style for every call, and no deleting files.

Installed, it is the plugin ``example`` (the entry-point name) and runs on
every AI function call in the environment, in the outermost layer:

- ``before_call`` adds a section naming the house style, once per call;
- ``tool_call`` blocks any tool named ``delete_file``, telling the model why.

Listed by hand (``functai.configure(plugins=[functai_plugin_example])``) it
has the same name, thanks to ``plugin_name``, so it still runs only once.
"""

from __future__ import annotations

from typing import Any

import functai

#: The plugin's name wherever it is used; the entry point has the same name.
plugin_name = "example"

#: Appended to the instruction of every call.
HOUSE_STYLE = "House style: plain words, short sentences, and say so when you are not sure."

#: Tools that may never run here, and why (what the model is told).
BLOCKED_TOOLS: dict[str, str] = {
    "delete_file": "deleting files is not allowed here; say which file should go and a person will delete it",
}


@functai.hookimpl
def before_call(call: Any) -> functai.Change | None:
    """Add the house style, unless an inner layer already did."""
    if HOUSE_STYLE in call.sections:
        return None
    return functai.Change(sections=[HOUSE_STYLE])


@functai.hookimpl
def tool_call(tool: Any) -> None:
    """Refuse the tools this host never lets a model run."""
    reason = BLOCKED_TOOLS.get(tool.name)
    if reason is not None:
        raise functai.FunctAIError(reason, code="tool-not-allowed")
