"""MVCC storage backends for the embedded API server, and ``open_storage(url)`` to pick one.

URLs: ``memory`` / ``memory://`` (process memory), ``sqlite:///abs/path.db`` (absolute path),
``sqlite://relative.db`` (relative to the working directory), ``sqlite://:memory:`` (in-memory SQLite).
"""

from __future__ import annotations

from .base import (
    Compacted,
    Event,
    FutureRevision,
    KeyExists,
    KeyNotFound,
    KeyValue,
    ListResult,
    RevisionMismatch,
    Storage,
    StorageError,
    WatcherTooSlow,
)
from .memory import MemoryStorage

__all__ = [
    "Compacted",
    "Event",
    "FutureRevision",
    "KeyExists",
    "KeyNotFound",
    "KeyValue",
    "ListResult",
    "MemoryStorage",
    "RevisionMismatch",
    "SQLiteStorage",
    "Storage",
    "StorageError",
    "WatcherTooSlow",
    "open_storage",
]


def open_storage(url: str) -> Storage:
    """Build (but do not start) the storage a URL names; raises ValueError for anything unsupported."""
    if url in ("memory", "memory://"):
        return MemoryStorage()
    if url.startswith("sqlite://"):
        path = url[len("sqlite://") :]
        if not path:
            raise ValueError(f"unsupported storage URL {url!r}; use memory or sqlite:///PATH")
        from .sqlite import SQLiteStorage

        return SQLiteStorage(path)
    raise ValueError(f"unsupported storage URL {url!r}; use memory or sqlite:///PATH")


def __getattr__(name: str) -> object:
    if name == "SQLiteStorage":
        from .sqlite import SQLiteStorage

        return SQLiteStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
