"""The folder store's public name; the store lives in `functai.stores.folder`."""

from __future__ import annotations

from ..stores.folder import FolderStore

__all__ = ["FolderStore"]
