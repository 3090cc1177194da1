"""Append-only JSON-lines files shared by processes: the call log and the ratings file.

On a local file system each line is one lock-free ``write`` to an ``O_APPEND``
file, which the kernel appends whole; a line that landed on a torn tail (a writer
killed mid-line) is written again. Elsewhere (network file systems) every line
takes an exclusive ``flock``. docs/reliability.md ("The call log without a lock")
has the details. Lock-free buys ``log_calls`` its per-call budget (two system calls fewer).
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time

from ._files import cut, make_folder, unwritable, write_all, write_out

#: Seconds between looks at whether the file is still the one at its path: a look per line would add a
#: third to what logging a call costs; a rotated log's lines of that second stay in the rotated file.
LOOK_EVERY = 1.0

#: The most bytes of a last line without its newline read to tell whether it is a whole record.
TAIL = 1 << 20

#: File systems on which a single ``write`` to an ``O_APPEND`` file is appended whole,
#: atomically with respect to other writers (local, in one kernel).
LOCAL_FILE_SYSTEMS = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "f2fs", "zfs", "jfs", "reiserfs",
    "bcachefs", "nilfs2", "overlay",
})


def file_system(path: str) -> str | None:
    """The type of the file system holding ``path`` (an existing folder), from
    ``/proc/self/mountinfo`` (``os.statvfs`` does not tell it); None where that cannot be told."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            mounts = handle.read().splitlines()
        dev = os.stat(path).st_dev
        real = os.path.realpath(path)
    except OSError:
        return None
    number = f"{os.major(dev)}:{os.minor(dev)}"
    best, best_len, by_dev = None, -1, None
    for line in mounts:
        left, sep, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if not sep or len(fields) < 5 or not rest:
            continue
        point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        if fields[2] == number:
            by_dev = rest[0]
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best_len:
            best, best_len = rest[0], len(point)
    return by_dev or best


def lock_free(folder: str) -> bool:
    """Whether lines to files in ``folder`` may be appended without a lock."""
    return file_system(folder) in LOCAL_FILE_SYSTEMS


class LineFile:
    """One append-only JSON-lines file, kept open for the process (see the module)."""

    def __init__(self, path: str, what: str, locked: bool | None = None) -> None:
        self.path, self.what = path, what
        folder = os.path.dirname(path)
        try:
            make_folder(folder)
            self.fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as error:  # a file where the folder should be, no permission, a read-only disk
            raise unwritable(path, error, what) from None
        status = os.fstat(self.fd)
        #: The file opened: another at its path (rotated by a rename) is opened again, as a removed one is.
        self.file = (status.st_dev, status.st_ino)
        self.looked = time.monotonic()
        self.locked = not lock_free(folder) if locked is None else locked
        self.lock = threading.Lock()  # a line's write and its check, one thread at a time
        # Where our last line ended: a line right after it needs no look at the byte before it.
        # -1 (none yet), so the first line is checked: that finds a tail torn before this process came.
        self.end = -1

    def close(self) -> None:
        with self.lock:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1

    def append(self, line: bytes) -> bool:
        """Append ``line`` (ending in a newline) whole; False when the file was removed, or (looked at
        once a `LOOK_EVERY`, with nothing written then) renamed away by a log rotation: open it again."""
        with self.lock:
            fd = self.fd
            if fd < 0:
                return False
            now = time.monotonic()
            if now - self.looked >= LOOK_EVERY:
                self.looked = now
                if not self._still_there():  # closed, so that no writer holding this one writes there again
                    os.close(fd)
                    self.fd = -1
                    return False
            if self.locked:
                return self._append_locked(line)
            if self.end < 0 and self._tail_end() == b"\n":  # once, before this process's first line
                self._write(b"\n")
            written = self._write(line)
            stat = os.fstat(fd)
            if stat.st_size - written == self.end and stat.st_nlink and written == len(line):
                self.end = stat.st_size  # right after our last, whole, line: whole
                return True
            if not stat.st_nlink:
                return False
            return self._check(line, written)

    def _tail_end(self) -> bytes:
        """What ends the file's last line, when it has no newline: a newline where it is a whole JSON
        object (a newline an editor dropped), else a NUL and a newline (a line torn by a crash)."""
        size = os.fstat(self.fd).st_size
        if not size or os.pread(self.fd, 1, size - 1) == b"\n":
            return b""
        start = max(0, size - TAIL)
        tail = os.pread(self.fd, size - start, start)
        if b"\n" not in tail and start:
            return b"\x00\n"
        from ._logfiles import parse_line  # here, not at import: only a file left so is ever read back

        return b"\n" if parse_line(tail[tail.rfind(b"\n") + 1:])[0] is not None else b"\x00\n"

    def _still_there(self) -> bool:
        try:
            status = os.stat(self.path)
        except OSError:
            return False
        return (status.st_dev, status.st_ino) == self.file

    def _write(self, data: bytes) -> int:
        try:
            return os.write(self.fd, data)
        except OSError as error:
            raise unwritable(self.path, error, self.what) from None

    def _check(self, line: bytes, written: int) -> bool:
        """Make sure the line just written stands whole on its own line; write it again if not."""
        for _ in range(100):
            whole = self._landed_whole(written) if written == len(line) else self._finish(line, written)
            if whole:
                return os.fstat(self.fd).st_nlink > 0
            written = self._write(line)
        raise unwritable(self.path, OSError(errno.EIO, "other writers kept cutting this line"), self.what)

    def _landed_whole(self, size: int) -> bool:
        """Whether the line just written starts a line (the byte before it is a newline)."""
        end = os.lseek(self.fd, 0, os.SEEK_CUR)  # O_APPEND: just past what this fd last wrote
        start = end - size
        whole = start == 0 or os.pread(self.fd, 1, start - 1) == b"\n"
        self.end = end if whole else -1
        return whole

    def _finish(self, line: bytes, written: int) -> bool:
        """A short write (a full disk): finish the line under the lock (False: write it again), or cut it back."""
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            start = os.lseek(self.fd, 0, os.SEEK_CUR) - written
            try:
                write_out(self.fd, line[written:])
            except OSError as error:
                if os.fstat(self.fd).st_size == os.lseek(self.fd, 0, os.SEEK_CUR):  # nothing of anyone's after ours
                    cut(self.fd, start)
                self.end = -1
                raise unwritable(self.path, error, self.what) from None
            end = os.lseek(self.fd, 0, os.SEEK_CUR)
            if end - start != len(line) or (start and os.pread(self.fd, 1, start - 1) != b"\n"):
                self.end = -1  # another writer came between our parts, or we landed on a torn tail
                return False
            self.end = end
            return True
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def _append_locked(self, line: bytes) -> bool:
        """The locked protocol (file systems where appends may interleave)."""
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            stat = os.fstat(self.fd)
            if stat.st_nlink == 0:
                return False
            size = stat.st_size
            if size and size != self.end:
                line = self._tail_end() + line  # so that this one stays whole
            try:
                write_all(self.fd, line, size)
            except OSError as error:
                raise unwritable(self.path, error, self.what) from None
            self.end = size + len(line)
            return True
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
