"""What a type checker is told about names made at run time.

``functai`` imports some names on first use (``_LAZY``) and ``Plugin`` gets one
decorator per hook from ``HOOKS``: both are declared under ``TYPE_CHECKING`` so a
type checker sees their real types. These tests keep those declarations true.
"""

from __future__ import annotations

import ast
import importlib
import inspect

import functai
from functai._hooks import plugin as plugin_module
from functai._hooks.specs import HOOKS


def _type_checking_block(tree: ast.AST) -> ast.If:
    found = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    ]
    assert len(found) == 1, "expected one `if TYPE_CHECKING:` block"
    return found[0]


def test_every_lazy_name_is_imported_for_the_type_checker_from_where_it_is_at_run_time():
    block = _type_checking_block(ast.parse(inspect.getsource(functai)))
    declared: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1, ast.unparse(node)
        for alias in node.names:
            declared[alias.asname or alias.name] = f"functai.{node.module}"
    assert set(declared) == set(functai._LAZY)
    for name, module in declared.items():
        assert getattr(importlib.import_module(module), name) is getattr(functai, name), name


def test_plugin_declares_one_decorator_per_hook_for_the_type_checker():
    source = inspect.getsource(plugin_module.Plugin)
    block = _type_checking_block(ast.parse(source))
    declared = [node.name for node in block.body if isinstance(node, ast.FunctionDef)]
    assert declared == list(HOOKS)
    for hook in HOOKS:
        assert callable(getattr(plugin_module.Plugin, hook))
