"""What ``import functai`` and a first call leave undone.

No timing here: each test checks the work itself — no regular expression is compiled, no
module is loaded that a plain import or a first call does not use — so a change that brings
the cost back fails, on any machine.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import pytest


def _probe(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (no installed plugin loaded) and read the JSON it prints last."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUNCTAI_")}
    env["FUNCTAI_LOAD_PLUGINS"] = ""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_import_compiles_no_pattern():
    found = _probe(
        "import json, re, sys\n"
        "import attrs, pluggy\n"
        "patterns = []\n"
        "real_re = re._compile\n"
        "re._compile = lambda pattern, flags: (patterns.append(str(pattern)), real_re(pattern, flags))[1]\n"
        "import functai\n"
        "functai.Template, functai.ToolCall  # built when first used\n"
        "print(json.dumps({'patterns': patterns}))\n"
    )
    assert found["patterns"] == []


def test_a_plain_import_leaves_out_what_only_some_programs_use():
    found = _probe(
        "import json, sys\n"
        "import attrs, pluggy\n"
        "before = set(sys.modules)\n"
        "import functai\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    for module in ("functai.builtins", "functai._conversations", "functai._evaluation", "functai.cli",
                   "functai.stores", "functai._calls.tools", "functai._calls.template", "functai._models.toolcall",
                   "dataclasses", "importlib.util"):
        assert module not in found, module


@functools.cache
def _first_call() -> dict:
    """A fresh interpreter's import, one ``@ai`` function and its first call: its value, version and modules."""
    return _probe(
        "import json, sys\n"
        "import functai\n"
        "from functai.testing import ScriptedLM\n"
        "@functai.ai\n"
        "def answer(question: str) -> str:\n"
        "    '''Answer.'''\n"
        "functai.configure(client=ScriptedLM(reply=lambda request: 'ok'))\n"
        "value = answer('q')\n"
        "print(json.dumps({'value': value, 'version': answer.version, 'modules': sorted(sys.modules)}))\n"
    )


def test_a_first_call_without_tools_or_template_loads_neither():
    first = _first_call()
    assert first["value"] == "ok" and len(first["version"]) == 16
    found = first["modules"]
    for module in ("functai._calls.tools", "functai._calls.template", "functai._models.toolcall"):
        assert module not in found, module


def test_the_lazy_names_resolve_to_the_same_objects():
    import functai
    import functai._builtins
    import functai._calls.layout
    import functai._calls.template
    import functai._calls.tools
    import functai._models.request
    import functai._models.toolcall

    assert functai.compaction is functai._builtins.compaction
    assert functai.delegate is functai._builtins.delegate
    assert functai.Template is functai._calls.template.Template
    assert functai.ToolCall is functai._models.toolcall.ToolCall
    assert functai.tool is functai._calls.tools.tool and functai.Tool is functai._calls.tools.Tool
    assert functai.ApprovalError is functai._calls.tools.ApprovalError
    with pytest.raises(AttributeError):
        functai._models.request.NoSuchName  # noqa: B018
