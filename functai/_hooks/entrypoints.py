"""Entry points read straight from the ``*.dist-info`` / ``*.egg-info`` folders on ``sys.path``.

Why not ``importlib.metadata``: it builds a distribution object for every installed package
to find a handful of entry points. The answer is importlib_metadata's, rule for rule; what
folders cannot show (a zip or ``.egg``, a path entry that is not a string, another finder
offering ``find_distributions``) is handed whole to ``importlib.metadata``. Standard library
only, so the equivalence test can load it in any venv.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from functools import cached_property
from importlib.machinery import PathFinder, all_suffixes
from typing import Any, Iterator

_SUFFIXES = (".dist-info", ".egg-info")
#: importlib.metadata's reading of an entry point's value; compiled only for a value that is not plain
#: ``module`` / ``module:attr`` (compiling costs more than the rest of a scan).
_VALUE = r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$"


class _Unsure(Exception):
    """What only importlib.metadata reads the same way."""


def _metadata() -> Any:
    """The importlib.metadata functai falls back to: the backport where installed (Python < 3.12)."""
    try:
        import importlib_metadata as metadata
    except ImportError:  # pragma: no cover - depends on the environment
        import importlib.metadata as metadata  # type: ignore[no-redef]
    return metadata


def normalize(name: str) -> str:
    """A distribution's name as importlib.metadata compares it (``Foo.Bar--baz`` → ``foo_bar_baz``)."""
    name = name.lower().replace("-", "_").replace(".", "_")
    while "__" in name:
        name = name.replace("__", "_")
    return name


class Distribution:
    """One ``*.dist-info`` / ``*.egg-info`` folder: the few facts functai asks, read on first use."""

    def __init__(self, path: str, key: str | None = None) -> None:
        self.path = path
        if key is None:  # importlib_metadata's rule: the folder's name, else the metadata's Name
            stem, ext = os.path.splitext(os.path.basename(path))
            key = stem.partition("-")[0] if ext in _SUFFIXES else ""
            key = normalize(key or self.name or "")
        #: The normalised name distributions are told apart by.
        self.key = key

    def read_text(self, filename: str) -> str | None:
        """A metadata file's text, or None where it is missing or unreadable (as importlib.metadata)."""
        try:
            with open(os.path.join(self.path, filename) if filename else self.path, encoding="utf-8") as file:
                return file.read()
        except (OSError, UnicodeDecodeError):
            return None

    @cached_property
    def _headers(self) -> dict[str, list[str]]:
        for name in ("METADATA", "PKG-INFO", ""):  # "": an old egg-info that is a file, not a folder
            text = self.read_text(name)
            if text:
                break
        return _read_headers(text or "")

    @cached_property
    def valid(self) -> bool:
        """Whether it has metadata at all: importlib_metadata prefers such a one over a stale empty folder."""
        path = self.path
        return (os.path.exists(os.path.join(path, "METADATA"))
                or os.path.exists(os.path.join(path, "PKG-INFO")) or os.path.isfile(path))

    @property
    def name(self) -> str | None:
        return next(iter(self._headers.get("name", ())), None)

    @property
    def version(self) -> str | None:
        return next(iter(self._headers.get("version", ())), None)

    @property
    def requires(self) -> list[str] | None:
        """``Requires-Dist``, else an egg-info's ``requires.txt`` written as requirement strings."""
        found = self._headers.get("requires-dist")
        if found:
            return list(found)
        text = self.read_text("requires.txt")
        return None if text is None else list(_egg_requirements(text))

    @cached_property
    def _sections(self) -> dict[str, list[tuple[str, str]]]:
        return _read_sections(self.read_text("entry_points.txt") or "")

    def entries(self, group: str) -> list[tuple[str, str]]:
        """The ``(name, value)`` lines of one section of ``entry_points.txt``."""
        return self._sections.get(group, [])

    @cached_property
    def tops(self) -> frozenset[str]:
        """The top-level names it ships: ``top_level.txt``, else the first parts of ``RECORD``'s paths."""
        declared = (self.read_text("top_level.txt") or "").split()
        if declared:
            return frozenset(declared)
        record = self.read_text("RECORD")
        if record:
            import csv

            paths = (row[0] for row in csv.reader(record.splitlines()) if row)
            return frozenset(name for name in map(_top_name, paths) if "." not in name)
        if self.read_text("installed-files.txt") or self.read_text("SOURCES.txt"):
            raise _Unsure(self.path)  # an egg's lists of installed files: only importlib.metadata reads them alike
        return frozenset()


def _read_headers(text: str) -> dict[str, list[str]]:
    """The header block of a METADATA / PKG-INFO file (RFC 822 style), keys lower-cased."""
    headers: dict[str, list[str]] = {}
    last: list[str] | None = None
    for line in text.splitlines():
        if not line.strip():
            break  # the body (the long description) follows the first blank line
        if line[0] in " \t":
            if last is not None:
                last[-1] += "\n" + line
            continue
        key, colon, value = line.partition(":")
        if not colon:
            break  # not a header: the email parser ends the headers here too
        last = headers.setdefault(key.strip().lower(), [])
        last.append(value.strip())
    return headers


def _lines(text: str) -> Iterator[tuple[str | None, str]]:
    """``(section, line)`` for each non-blank, non-comment line, as importlib.metadata splits them."""
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        yield section, line


def _read_sections(text: str) -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {}
    for section, line in _lines(text):
        name, equals, value = line.partition("=")
        if section is not None and equals:  # a line without "=" names no entry point: skipped
            found.setdefault(section, []).append((name.strip(), value.strip()))
    return found


def _egg_requirements(text: str) -> Iterator[str]:
    """``requires.txt`` lines as ``Requires-Dist`` strings: ``[extra:marker]`` sections become markers."""
    for section, line in _lines(text):
        extra, _, marker = (section or "").partition(":")
        conditions = [f"({marker})" if extra and marker else marker] if marker else []
        if extra:
            conditions.append(f'extra == "{extra}"')
        space = " " if "@" in line else ""  # a URL requirement needs a space before its marker
        yield line + space + ("; " + " and ".join(conditions) if conditions else "")


class EntryPoint:
    """One ``name = module:attr`` line of a distribution's ``entry_points.txt``."""

    __slots__ = ("name", "value", "group", "dist")

    def __init__(self, name: str, value: str, group: str, dist: Distribution) -> None:
        self.name, self.value, self.group, self.dist = name, value, group, dist

    def _parts(self) -> tuple[str, str | None, str | None]:
        """``(module, attr, extras)`` as importlib.metadata's pattern reads the value."""
        module, colon, attr = self.value.partition(":")
        if all(part.isidentifier() for part in module.split(".")) and (
                not colon or all(part.isidentifier() for part in attr.split("."))):
            return module, attr if colon else None, None
        match = re.match(_VALUE, self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r} has a malformed value {self.value!r}; "
                             "write 'module' or 'module:attribute'")
        return match.group("module"), match.group("attr"), match.group("extras")

    @property
    def module(self) -> str:
        return self._parts()[0]

    @property
    def attr(self) -> str | None:
        return self._parts()[1]

    @property
    def extras(self) -> list[str]:
        return re.findall(r"\w+", self._parts()[2] or "")

    def load(self) -> Any:
        """Import the module and follow the attribute path, as importlib.metadata does."""
        module, attr, _ = self._parts()
        found = importlib.import_module(module)
        for part in filter(None, (attr or "").split(".")):
            found = getattr(found, part)
        return found

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def _path_finder_only() -> bool:
    """Whether the standard path finder (or the backport's stand-in) is the only one
    ``importlib.metadata`` would ask for distributions."""
    for finder in sys.meta_path:
        if getattr(finder, "find_distributions", None) is None or finder is PathFinder:
            continue
        kind = finder if isinstance(finder, type) else type(finder)
        if kind.__name__ == "MetadataPathFinder" and kind.__module__ in ("importlib_metadata", "importlib.metadata"):
            continue
        return False
    return True


#: One sys.path folder's distributions, as listed at its modification time (re-listed when it changes,
#: as importlib.metadata does, so a pip install in this process is seen).
_folders: dict[str, tuple[tuple[int, int, int], list[Distribution]]] = {}


def _folder(entry: str) -> list[Distribution] | None:
    """The distributions of one sys.path entry in listing order; None where only importlib.metadata can read it."""
    root = entry or "."
    try:
        stat = os.stat(root)
    except (OSError, ValueError):
        return []  # missing or unreadable: importlib.metadata finds nothing there either
    stamp = (stat.st_dev, stat.st_ino, stat.st_mtime_ns)  # "" follows the working directory
    cached = _folders.get(entry)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        children = os.listdir(root)
    except NotADirectoryError:
        return None  # a zip (or an .egg file): importlib.metadata reads inside those
    except OSError:
        return []
    if os.path.basename(root).lower().endswith(".egg"):
        return None  # an unpacked egg keeps its metadata in EGG-INFO
    dists = [Distribution(os.path.join(entry, child) if entry else child)
             for child in children if child.lower().endswith(_SUFFIXES)]
    _folders[entry] = (stamp, dists)
    return dists


def distributions() -> list[Distribution] | None:
    """Every distribution in the folders of sys.path, in importlib.metadata's order; None where it cannot tell."""
    if not _path_finder_only():
        return None
    found: list[Distribution] = []
    for entry in sys.path:
        dists = _folder(entry) if isinstance(entry, str) else None
        if dists is None:
            return None
        found.extend(dists)
    return found


def _best(same: list[Distribution]) -> Distribution:
    """Of the distributions of one name, the one importlib_metadata picks: the first with metadata, else the first."""
    return same[0] if len(same) == 1 else next((d for d in same if d.valid), same[0])


def _scan(group: str) -> list[EntryPoint] | None:
    """The group's entry points from the folders of sys.path, or None where that may not be all of them."""
    dists = distributions()
    if dists is None:
        return None
    by_key: dict[str, list[Distribution]] = {}
    for dist in dists:
        by_key.setdefault(dist.key, []).append(dist)
    order = {id(dist): i for i, dist in enumerate(dists)}
    having = [dist for dist in map(_best, by_key.values()) if dist.entries(group)]
    having.sort(key=lambda dist: (not dist.valid, order[id(dist)]))  # those with metadata first
    return [EntryPoint(name, value, group, dist) for dist in having for name, value in dist.entries(group)]


def _top_name(path: str) -> str:
    # importlib_metadata's _get_toplevel_name: a path's first folder, else its module name, else itself.
    parts = [part for part in path.split("/") if part and part != "."]
    if path.startswith("/"):
        parts.insert(0, "/")
    if len(parts) > 1:
        return parts[0]
    base = parts[0] if parts else path
    for suffix in sorted(all_suffixes(), key=len, reverse=True):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def package_version(top: str) -> str | None:
    """The version of the installed distribution shipping the top-level package ``top``, or None:
    importlib_metadata's ``version(packages_distributions()[top][0])`` without building the whole map."""
    dists = distributions()
    try:
        if dists is not None:
            for dist in dists:
                if top in dist.tops:
                    name = dist.name
                    same = [d for d in dists if d.key == normalize(name)] if name else []
                    if same:
                        return _best(same).version
            return None
    except _Unsure:
        pass
    metadata = _metadata()
    for name in dict.fromkeys(metadata.packages_distributions().get(top) or []):
        try:
            return str(metadata.version(name))
        except metadata.PackageNotFoundError:
            continue
    return None


def entry_points(group: str) -> list[Any]:
    """The entry points of ``group``, sorted by name (stable: equal names keep importlib.metadata's order)."""
    found: list[Any] | None = _scan(group)
    if found is None:
        found = list(_metadata().entry_points(group=group))
    return sorted(found, key=lambda ep: ep.name)
