"""Writing files that must not be lost or left half written: the call log, ratings, stores.

A write that fails is cut back, so a reader never finds a partial line; `unwritable`
says what is wrong in words (code ``store-unwritable``); `check_folder` refuses, before
anything is paid for, a folder that can never be written.
"""

from __future__ import annotations

import errno
import os

from ._errors import FunctAIError

#: What each ``errno`` means for someone who has to fix it.
_WHY = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "the operation is not permitted (permissions, or an immutable file)",
    errno.ENOTDIR: "a file is where a folder should be",
    errno.EEXIST: "a file is where a folder should be",
    errno.EISDIR: "a folder is where the file should be",
    errno.EIO: "the disk reported an I/O error",
}


def unwritable(path: str | os.PathLike[str], error: OSError, what: str = "store") -> FunctAIError:
    """The ``store-unwritable`` error for ``error`` raised while writing ``path``."""
    return _failed(path, error, "write", what, "free space, fix the permissions, or point it at another folder",
                   "store-unwritable")


def unreadable(path: str | os.PathLike[str], error: OSError, what: str = "call log") -> FunctAIError:
    """The ``store-unreadable`` error for ``error`` raised while reading ``path``."""
    return _failed(path, error, "read", what, "fix the permissions, or move what is in its place", "store-unreadable")


def _failed(path: str | os.PathLike[str], error: OSError, doing: str, what: str, fix: str, code: str) -> FunctAIError:
    why = _WHY.get(error.errno or 0) or error.strerror or type(error).__name__
    return FunctAIError(
        f"cannot {doing} the {what} at {os.fspath(path)}: {why} ({errno.errorcode.get(error.errno or 0, 'error')}); "
        f"{fix}",
        code=code,
        path=os.fspath(path),
        errno=error.errno,
    )


def write_out(fd: int, data: bytes) -> None:
    """Write all of ``data``: a short ``os.write`` (a nearly full disk) is continued."""
    while data:
        n = os.write(fd, data)
        if n == 0:
            raise OSError(errno.EIO, "write returned 0")
        data = data[n:]


def write_all(fd: int, data: bytes, size_before: int) -> None:
    """Write ``data`` at the end of the file, or cut the file back to ``size_before`` and raise (the
    caller holds an exclusive lock, and readers read new bytes only under a shared one)."""
    try:
        write_out(fd, data)
    except BaseException:
        cut(fd, size_before)
        raise


def cut(fd: int, size: int) -> None:
    """Cut the file back to ``size`` bytes, as far as it can be (what failed is raised by the caller)."""
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass


def check_folder_name(path: str) -> str:
    """Refuse a folder name that is surely a mistake: blank, or holding a NUL byte."""
    if not path.strip() or "\x00" in path:
        from ._stores.urls import redact  # here: `import functai` loads no store; a URL's password is never repeated

        raise FunctAIError(
            f"{redact(path)!r} names no store or call log: give a folder path or a URL (sqlite:///file.db, "
            "postgresql://host/db)",
            code="store-url",
        )
    return path


def check_folder(folder: str | os.PathLike[str], what: str = "call log", file: str | None = None) -> None:
    """Refuse a folder that cannot be written, creating nothing: the nearest part of the path that
    exists must be a folder this process may write into (and ``file`` in it, if there, writable)."""
    path = os.path.abspath(os.fspath(folder))
    probe = path
    while not os.path.lexists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return
        probe = parent
    if not os.path.isdir(probe):
        raise unwritable(path, NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), probe), what)
    if not os.access(probe, os.W_OK | os.X_OK):
        code = errno.EROFS if read_only(probe) else errno.EACCES
        raise unwritable(path, PermissionError(code, os.strerror(code), probe), what)
    if file is not None and probe == path:
        target = os.path.join(path, file)
        if os.path.isdir(target):
            raise unwritable(target, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), target), what)
        if os.path.lexists(target) and not os.access(target, os.W_OK):
            code = errno.EROFS if read_only(path) else errno.EACCES
            raise unwritable(target, PermissionError(code, os.strerror(code), target), what)


def make_folder(folder: str | os.PathLike[str]) -> None:
    """Create ``folder`` (and its parents) as 0700 whatever the umask; refuse a file in its place."""
    try:
        os.makedirs(folder, mode=0o700)
    except FileExistsError:
        if not os.path.isdir(folder):
            raise NotADirectoryError(errno.ENOTDIR, "a file is where a folder should be", os.fspath(folder)) from None
        return
    os.chmod(folder, 0o700)  # the umask may have narrowed it; only ours are touched


def fsync_file(path: str | os.PathLike[str]) -> None:
    """Make what was written to the file at ``path`` durable (nothing when it is missing)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_only(path: str) -> bool:
    """Whether the file system holding ``path`` is mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False
