"""MVCC storage backends for the embedded API server, and ``open_storage(url)`` to pick one.

URLs: ``memory`` / ``memory://`` (process memory), ``sqlite:///abs/path.db`` (absolute path),
``sqlite://relative.db`` (relative to the working directory), ``sqlite://:memory:`` (in-memory SQLite),
``etcd://HOST:PORT[,HOST:PORT...][/PREFIX]`` (an etcd v3 cluster; keys are stored under ``/PREFIX``).
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
    "EtcdStorage",
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
    if url.startswith("etcd://"):
        hosts, slash, path = url[len("etcd://") :].partition("/")
        endpoints = [h for h in hosts.split(",") if h]
        if not endpoints:
            raise ValueError(f"unsupported storage URL {url!r}; use etcd://HOST:PORT[,HOST:PORT...][/PREFIX]")
        from .etcd import EtcdStorage

        return EtcdStorage(endpoints, prefix=slash + path.rstrip("/") if path.strip("/") else "")
    raise ValueError(f"unsupported storage URL {url!r}; use memory or sqlite:///PATH")


def __getattr__(name: str) -> object:
    if name == "SQLiteStorage":
        from .sqlite import SQLiteStorage

        return SQLiteStorage
    if name == "EtcdStorage":
        from .etcd import EtcdStorage

        return EtcdStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
