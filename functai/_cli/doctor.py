"""``functai plugins freeze`` and ``functai plugins doctor``: the installed plugin set written down so
an upgrade (or a new machine) can restore it with ``functai install -r``, and each installed plugin
checked in a process of its own, so one that hangs or kills its process costs one line of the report.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
from typing import Any, TextIO
from urllib.parse import unquote, urlsplit

from .._version import __version__
from .._builtins import GROUP as BUILTINS
from .._hooks import installed
from .._hooks.installed import GROUP, incompatible
from .._stores.opening import GROUP as STORES
from .common import CLIError, number, plural, short, table

#: The entry-point groups a plugin distribution registers in, and what doctor calls each kind.
KINDS: dict[str, str] = {GROUP: "plugin", BUILTINS: "builtin", STORES: "store", "functai.providers": "provider",
                         "functai.commands": "command"}
GROUPS: tuple[str, ...] = tuple(KINDS)

OK, SLOW, BROKEN = "ok", "slow", "broken"

#: What a child process runs (by path: see there why).
_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "doctor_child.py")


def register(verbs: Any) -> None:
    """Add ``freeze`` and ``doctor`` to the verbs of ``functai plugins``."""
    freeze = verbs.add_parser("freeze", help="the installed plugin distributions as requirement lines "
                                             "(restore them with functai install -r FILE)")
    freeze.set_defaults(run=cmd_freeze)
    doctor = verbs.add_parser("doctor", help="import each installed plugin in a process of its own and check it")
    doctor.add_argument("names", nargs="*", metavar="NAME", help="check only these (entry-point or distribution names)")
    doctor.add_argument("--timeout", type=number(float, 0.1, 86_400.0), default=10.0, metavar="SECONDS",
                        help="stop an import that takes longer (default 10)")
    doctor.add_argument("--slow", type=number(float, 0.0, 86_400.0), default=0.5, metavar="SECONDS",
                        help="call an import slower than this slow (default 0.5)")
    doctor.add_argument("--json", action="store_true", help="print JSON instead of text")
    doctor.set_defaults(run=cmd_doctor)


# -- freeze ------------------------------------------------------------------------------------------


def plugin_distributions() -> list[Any]:
    """The installed distributions with an entry point in any plugin group, one per name, in pip's order."""
    from packaging.utils import canonicalize_name

    found: dict[str, Any] = {}
    for group in GROUPS:
        for entry_point in installed.entry_points(group):  # looked up here: a test may replace it
            dist = getattr(entry_point, "dist", None)
            name = getattr(dist, "name", None)
            if name:
                found.setdefault(canonicalize_name(name), dist)
    return sorted(found.values(), key=lambda dist: str(dist.name).lower())  # pip's order


#: What no value written into a requirement line may hold, as it is or once unquoted: a control
#: character (a newline would start a line of its own, an ``--index-url`` pip obeys).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _safe(value: str, what: str, name: str) -> str:
    """``value`` when it is one plain field of a line; else ``freeze-unsafe`` (a crafted record)."""
    spaced = what != "folder" and re.search(r"\s", value)  # a space would end the field on its line
    for form in (value, unquote(value)):
        lines = ("a" + form + "a").splitlines()  # pip splits a file as str.splitlines does: U+2028 too
        if spaced or len(lines) != 1 or _CONTROL.search(form) or form.lstrip().startswith("-"):
            raise CLIError(f"the {what} recorded for {name!r} ({value[:80]!r}) holds a control character, a space "
                           "or a leading '-': written into the file it could add a line (an --index-url) that "
                           "install -r obeys; nothing was written", code="freeze-unsafe",
                           hint=f"reinstall {name} from a plain source, or check its direct_url.json")
    return value


def requirement(dist: Any) -> list[str]:
    """The lines ``pip freeze`` writes for ``dist``: ``name==version``; ``name @ URL`` for a folder,
    an archive or a VCS checkout it was installed from (its PEP 610 ``direct_url.json``); a comment
    and ``-e FOLDER`` for an editable install. A recorded value that could add a line refuses
    ``freeze-unsafe``."""
    name = _safe(str(dist.name), "name", str(dist.name))
    version = _safe(str(dist.version), "version", name)
    direct = _direct_url(dist)
    if direct is None:
        folder = _egg_link_project(dist)
        return _editable(name, version, _safe(folder, "folder", name)) if folder else [_pinned(name, version)]
    url = _safe(str(direct["url"]), "URL", name)
    fragments = []
    if isinstance(direct.get("vcs_info"), dict):
        vcs = direct["vcs_info"]
        line = f"{name} @ {_safe(str(vcs['vcs']), 'VCS', name)}+{url}@{_safe(str(vcs['commit_id']), 'commit', name)}"
    elif isinstance(direct.get("archive_info"), dict):
        line = f"{name} @ {url}"
        if direct["archive_info"].get("hash"):
            fragments.append(_safe(str(direct["archive_info"]["hash"]), "hash", name))
    else:  # dir_info: a local folder
        if (direct.get("dir_info") or {}).get("editable") and url.startswith("file:"):
            return _editable(name, version, _safe(unquote(urlsplit(url).path), "folder", name))
        line = f"{name} @ {url}"
    if direct.get("subdirectory"):
        fragments.append(f"subdirectory={_safe(str(direct['subdirectory']), 'subdirectory', name)}")
    return [line + ("#" + "&".join(fragments) if fragments else "")]


def _pinned(name: str, version: str) -> str:
    """``name==version``, or ``===`` for a version PEP 440 does not read (as pip writes it)."""
    from packaging.version import InvalidVersion, Version

    try:
        Version(version)
    except InvalidVersion:
        return f"{name}==={version}"
    return f"{name}=={version}"


def _direct_url(dist: Any) -> dict[str, Any] | None:
    """The distribution's ``direct_url.json`` (PEP 610), or None: installed from an index, or unreadable."""
    try:
        text = dist.read_text("direct_url.json")
        found = json.loads(text) if text else None
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and isinstance(found.get("url"), str) else None


def _editable(name: str, version: str, folder: str) -> list[str]:
    """pip's lines for an editable install of a folder: a comment naming it, then ``-e FOLDER``."""
    return [f"# Editable install ({_pinned(name, version)})", f"-e {folder}"]


def _egg_link_project(dist: Any) -> str | None:
    """The project folder of a ``setup.py develop`` install (an ``.egg-link`` on sys.path), as pip finds it."""
    path = getattr(dist, "path", None) or getattr(dist, "_path", None)
    if path is None or not str(path).endswith(".egg-info"):
        return None
    name = str(dist.name)
    links = (re.sub(r"[^A-Za-z0-9.]+", "-", name) + ".egg-link", f"{name}.egg-link")
    if any(os.path.isfile(os.path.join(entry, link)) for entry in sys.path if isinstance(entry, str) for link in links):
        return os.path.dirname(os.path.abspath(str(path)))
    return None


def cmd_freeze(args: argparse.Namespace, out: TextIO) -> int:
    """Requirement lines for the installed plugin distributions, sorted by name."""
    lines = [line for dist in plugin_distributions() for line in requirement(dist)]  # all, or none when one refuses
    print(f"# functai {__version__} plugin distributions in {sys.prefix} (functai plugins freeze)", file=out)
    print("# restore them with: functai install -r FILE", file=out)
    for line in lines:
        print(line, file=out)
    return 0


# -- doctor ------------------------------------------------------------------------------------------


def _seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.2f} s"
    return f"{value * 1000:.1f} ms" if value < 0.01 else f"{value * 1000:.0f} ms"


def _ended(status: int) -> str:
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit status {status}"


#: Seconds past the limit the child keeps itself before it is killed from here (an import holding
#: the interpreter so fast that the child's own clock cannot answer).
GRACE = 5.0


def _run_child(group: str, entry_point: Any, timeout: float) -> dict[str, Any]:
    """What a child process says of one entry point; a hang or a death is a code of its own. The
    child keeps the time limit and ends what the import started (see doctor_child); what the plugin
    prints is dropped, so a process it leaves holding the output cannot make a finished import wait."""
    command = [sys.executable, _CHILD, json.dumps(sys.path), group, entry_point.name,
               str(getattr(entry_point.dist, "name", None)), repr(timeout)]
    posix = os.name == "posix"
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               start_new_session=posix)
    try:
        said, _ = process.communicate(timeout=timeout + GRACE)
    except subprocess.TimeoutExpired:
        _stop(process, posix)
        return {"code": "plugin-timeout",
                "message": f"its import did not finish within {timeout:g} s; its process was stopped"}
    if posix:  # what it left in its session (the child ended what it could see on Linux; elsewhere this is all)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        return dict(json.loads(said))
    except (ValueError, TypeError):  # nothing (or not what the child writes) on its stdout
        return {"code": "plugin-crashed",
                "message": f"its import ended its process ({_ended(process.returncode)}) before it finished"}


def _stop(process: subprocess.Popen[bytes], posix: bool) -> None:
    """Kill a child and whatever it started in its session, and reap it."""
    try:
        if posix:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except OSError:
        pass  # it ended meanwhile
    try:
        process.communicate(timeout=5)
    except subprocess.TimeoutExpired:  # a descendant in a process group of its own still holds the pipes
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        process.wait()


def _wanted(names: list[str]) -> list[tuple[str, Any]]:
    """The entry points to check: every one in the plugin groups, or those ``names`` name (or their distributions)."""
    from packaging.utils import canonicalize_name

    points = [(group, point) for group in GROUPS for point in installed.entry_points(group)]
    if not names:
        return points

    def known(point: Any) -> set[str]:
        return {point.name, canonicalize_name(str(getattr(point.dist, "name", None) or ""))}

    unknown = [name for name in names if not any({name, canonicalize_name(name)} & known(point) for _, point in points)]
    if unknown:
        raise CLIError(f"no installed plugin or plugin distribution named {unknown[0]!r}", code="not-found",
                       hint="`functai plugins` lists what is installed")
    wanted = set(names) | {canonicalize_name(name) for name in names}
    return [(group, point) for group, point in points if wanted & known(point)]


def check(group: str, entry_point: Any, timeout: float, slow: float) -> dict[str, Any]:
    """One entry point checked: its distribution's functai range here, then its import in a child process."""
    dist = getattr(entry_point, "dist", None)
    row: dict[str, Any] = {"kind": KINDS[group], "group": group, "name": entry_point.name,
                           "distribution": getattr(dist, "name", None), "version": getattr(dist, "version", None),
                           "entry_point": entry_point.value, "code": None, "message": None}
    problem = incompatible(dist)  # decided from its metadata: it is not imported
    found: dict[str, Any] = ({"code": "plugin-incompatible", "message": problem} if problem
                             else _run_child(group, entry_point, timeout))
    seconds = found.get("seconds")
    row.update(found, seconds=seconds)
    row["status"] = BROKEN if found.get("code") else SLOW if seconds is not None and seconds > slow else OK
    return row


def _detail(row: dict[str, Any], slow: float, plugins: set[str]) -> str:
    """The last column: the code and why for a broken one, else its import time, hooks and API, and the
    plugins it requires that are not installed (a call that runs none of them refuses plugin-requires)."""
    if row["status"] == BROKEN:
        return f"{row['code']}: {short(row['message'] or '', 240)}"
    said = f"imported in {_seconds(row['seconds'] or 0.0)}"
    if row["status"] == SLOW:
        said += f" (slower than {slow:g} s)"
    if row["kind"] == "plugin":
        said += f"; hooks {', '.join(row.get('hooks') or []) or '-'}; API {row.get('api')}"
        missing = [name for name in row.get("requires") or () if name not in plugins]
        if missing:
            said += (f"; requires {', '.join(missing)}, not installed: a program must give "
                     f"{'it' if len(missing) == 1 else 'them'} (else its calls refuse plugin-requires)")
    return said


def cmd_doctor(args: argparse.Namespace, out: TextIO) -> int:
    """One line per installed plugin; exits 1 when any is broken."""
    rows = [check(group, point, args.timeout, args.slow) for group, point in _wanted(args.names)]
    broken = [row for row in rows if row["status"] == BROKEN]
    if args.json:
        print(json.dumps({"plugins": rows, "broken": len(broken)}, indent=2, ensure_ascii=False), file=out)
        return 1 if broken else 0
    if not rows:
        print(f"no installed plugins (entry-point groups {', '.join(GROUPS)})", file=out)
        return 0
    plugins = {point.name for point in installed.entry_points(GROUP)}
    lines = [["STATUS", "KIND", "NAME", "DISTRIBUTION", "CHECK"]]
    for row in rows:
        lines.append([row["status"], row["kind"], row["name"], f"{row['distribution'] or '-'} {row['version'] or ''}"
                      .rstrip(), _detail(row, args.slow, plugins)])
    table(lines, out)
    counts = [f"{sum(row['status'] == status for row in rows)} {status}" for status in (OK, SLOW, BROKEN)]
    print(f"{plural(len(rows), 'entry point')} checked, each imported in a process of its own "
          f"(limit {args.timeout:g} s): {', '.join(counts)}", file=out)
    off = [row["name"] for row in broken if row["group"] == GROUP]
    if off:
        already = [name for name in (os.environ.get("FUNCTAI_DISABLE_PLUGINS") or "").split(",") if name.strip()]
        print("to run calls without the broken plugins until they are fixed or uninstalled: "
              f"FUNCTAI_DISABLE_PLUGINS={','.join(dict.fromkeys([*already, *off]))}", file=out)
    return 1 if broken else 0
