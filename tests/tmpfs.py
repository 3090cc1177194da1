"""A small file system of a test's own: a tmpfs mounted at a folder (a test skips where it cannot
mount one: it needs root), to fill to the last byte or remount read-only.

Import it from a test in ``tests/`` with ``from tmpfs import fill, tmpfs``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest


@contextlib.contextmanager
def tmpfs(where: Path, *options: str) -> Iterator[Path]:
    """``where`` made and mounted as a tmpfs of 64 KiB (``"size=4m"`` among ``options`` for more,
    ``"ro"`` for read-only) while the block runs."""
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(("size=64k", *options)), "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip() or 'not root'})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(where: Path) -> None:
    """Fill the file system under ``where`` to its last byte (a file ``filler``: remove it for space again)."""
    fd = os.open(where / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"x" * 512)
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(fd)
