"""The import-layers contract: functai's modules import each other in one direction.

From the top down: the command line and the package's front door, evaluation,
conversations, calls, the settings layers, hooks, models, stores, then the
core (errors, codec, files, log, appendlog, logfiles). A module may import its own layer and the
layers below it; conversations use stores through the `Store` protocol, and
stores import only the core. Every import counts, at the top of a module or
inside a function, and ``importlib.import_module`` of a literal name. An import
that goes up is allowed only when it is named in `EXCEPTIONS` with the reason
it is there. No module imports the package itself (``functai``), and no
two modules import each other, directly or through others (`CYCLES` is empty).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "functai"

#: Layers from the top (0) down; a module's layer is the first prefix of its name found here.
LAYERS: list[tuple[str, ...]] = [
    ("functai", "functai.__main__", "functai.cli", "functai.events", "functai._cli", "functai.stores", "functai._demo", "functai.pytest_plugin", "functai.testing",
     "functai._builtins"),
    ("functai._evaluation",),
    ("functai._conversations",),
    ("functai._calls",),
    ("functai._layers",),  # the process, block and function settings: plugins and model settings in layers
    ("functai._hooks",),
    ("functai._models",),
    ("functai._stores",),
    ("functai._errors", "functai._codec", "functai._files", "functai._log", "functai._appendlog", "functai._logfiles",
     "functai._version"),
]

#: (importing module, imported module) → why this import goes up a layer.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("functai._calls.function", "functai._conversations.conversation"):
        "AIFunction.conversation(...) is the front door to a Conversation of that function",
    ("functai._hooks.change", "functai._calls.outputs"):
        "a Change's values are made JSON-able by the one to_jsonable outputs use",
    ("functai._hooks.explain", "functai._calls.function"):
        "explain() takes an AIFunction (for its type only)",
    ("functai._hooks.explain", "functai._layers"):
        "explain() shows the plugins of every settings layer a call would run",
    ("functai._hooks.fold", "functai._calls.steps"):
        "handlers are folded as steps, driven sync or async by the call's own driver",
    ("functai._hooks.hear", "functai._calls.steps"):
        "listeners are heard as steps, driven sync or async by the call's own driver",
    ("functai._models.providers", "functai.testing"):
        'lm="test" names the offline TestModel',
    ("functai._codec", "functai._calls.outputs.jsonable"):
        "non-finite numbers are found, and written as text, in one place: beside to_jsonable",
    ("functai._files", "functai._stores.urls"):
        "an error about a path that is a URL repeats it with its password redacted",
    ("functai._stores.calllog", "functai._models.keys"):
        "a call-log URL may be a SecretURL, revealed only to connect",
    ("functai._stores.copy", "functai._calls.records"):
        "copying a call log reads and writes call records, whatever store holds them",
    ("functai._stores.folder_index", "functai._conversations.rows"):
        "read_rows decodes lines straight into the fold's rows (the 10,000-turn open budget)",
    ("functai._stores.protocol", "functai._conversations.rows"):
        "read_rows decodes lines straight into the fold's rows (the 10,000-turn open budget)",
    ("functai._stores.postgres", "functai._models.keys"):
        "a PostgreSQL URL's password is revealed only to connect and hidden in messages",
    ("functai._stores.schema", "functai._conversations.checks"):
        "a SQL row that cannot be read comes back as the record the fold marks unusable",
    ("functai._stores.schema", "functai._conversations.turndata"):
        "SQL columns hold the turn record's fields of the conversation format version",
    ("functai._stores.opening", "functai._hooks.installed"):
        "a URL scheme not built in is looked up among installed functai.stores entry points",
}


def layer(module: str) -> int:
    """The layer of ``module``: the longest prefix of its dotted name that `LAYERS` names."""
    best, length = -1, -1
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > length:
                best, length = index, len(name)
    assert best >= 0, f"{module} is in no layer: add it to LAYERS"
    return best


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, source: str | None = None) -> set[str]:
    """The functai modules ``path`` (or ``source``, as that module) imports, anywhere in it
    (``from x import name`` counts a submodule ``x.name`` when there is one)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8") if source is None else source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
                and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            named = node.args[0].value
            if named.startswith("."):  # import_module(".x", package): relative to this module's package
                named = f"{package}{named}"
            if named.split(".")[0] == "functai":
                found.add(named)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "functai")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "functai":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if _exists(sub) else target)
    found.discard(name)
    return found


def _exists(module: str) -> bool:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def upward_imports() -> dict[tuple[str, str], int]:
    """Every import from a module to a module in a higher layer, with how many layers it climbs."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        for target in imports(path):
            climb = layer(name) - layer(target)
            if climb > 0:
                found[(name, target)] = climb
    return found


def test_imports_go_down_the_layers() -> None:
    unexplained = sorted(set(upward_imports()) - set(EXCEPTIONS))
    assert not unexplained, "imports up a layer (reverse them, or name them in EXCEPTIONS with why):\n" + "\n".join(
        f"  {a} -> {b}" for a, b in unexplained)


def test_every_exception_is_still_needed() -> None:
    stale = sorted(set(EXCEPTIONS) - set(upward_imports()))
    assert not stale, "EXCEPTIONS names imports that no longer go up; drop them:\n" + "\n".join(
        f"  {a} -> {b}" for a, b in stale)


#: What conversations may use of `functai.stores`: the protocol, the opener and the memory store.
CONVERSATIONS_USE = {"functai._stores.protocol", "functai._stores.opening", "functai._stores.memory"}


def test_conversations_use_stores_through_the_protocol() -> None:
    """No conversation module reaches into a store's backend (folder, SQL): a store is any `Store`."""
    reached = sorted(
        (module_name(path), target)
        for path in PACKAGE.joinpath("_conversations").rglob("*.py")
        for target in imports(path)
        if target.startswith("functai._stores") and target not in CONVERSATIONS_USE
    )
    assert not reached


def test_a_module_in_no_layer_is_refused() -> None:
    try:
        layer("elsewhere.module")
    except AssertionError as error:
        assert "in no layer" in str(error)
    else:
        raise AssertionError("a module outside every layer was given one")


#: The import cycles left (each a set of modules that import each other, functions' imports counted):
#: none. A cycle that appears fails `test_no_new_import_cycle_and_none_grows`; break it (a name moved
#: down, a Protocol declared in the lower module) rather than naming it here.
CYCLES: list[frozenset[str]] = []


def import_graph() -> dict[str, set[str]]:
    return {module_name(path): imports(path) for path in sorted(PACKAGE.rglob("*.py"))}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root] & graph.keys())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target] & graph.keys()))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def test_no_module_imports_the_package_itself() -> None:
    reaching = sorted(name for name, targets in import_graph().items() if "functai" in targets and name != "functai")
    # The doctor's child is a program of its own: it times a plugin's import after `import functai`,
    # as a user's program has it.
    assert reaching == ["functai._cli.doctor_child"]


def test_no_new_import_cycle_and_none_grows() -> None:
    found = cycles(import_graph())
    grown = [sorted(c) for c in found if not any(c <= known for known in CYCLES)]
    assert not grown, "a new or grown import cycle (break it):\n" + "\n".join(f"  {c}" for c in grown)


def test_the_cycle_finder_finds_cycles_inside_one_package_and_through_import_module() -> None:
    graph = {"functai.a.x": {"functai.a.y"}, "functai.a.y": {"functai.a.x"}, "functai.b": {"functai.c"},
             "functai.c": set()}
    assert cycles(graph) == [frozenset({"functai.a.x", "functai.a.y"})]
    source = "import importlib\nimportlib.import_module('functai._stores.folder')\nimport_module('.run', 'x')\n"
    assert imports(PACKAGE / "_calls" / "probe.py", source) == {"functai._stores.folder", "functai._calls.run"}
