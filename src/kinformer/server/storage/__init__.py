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
    "STORAGE_URL_FORMS",
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
    "parse_storage_url",
]


#: every form of storage URL :func:`open_storage` takes, as its errors list them
STORAGE_URL_FORMS = ("memory, sqlite:///ABSOLUTE/PATH.db, sqlite://RELATIVE/PATH.db, sqlite://:memory:, "
                     "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]")


def parse_storage_url(url: str) -> tuple[str, str, list[str]]:
    """``(kind, path or etcd prefix, etcd endpoints)`` of a storage URL, without opening or creating anything;
    raises ValueError naming every accepted form for anything unsupported."""
    if url in ("memory", "memory://"):
        return "memory", "", []
    if url.startswith("sqlite://") and len(url) > len("sqlite://"):
        return "sqlite", url[len("sqlite://") :], []
    if url.startswith("etcd://"):
        hosts, slash, path = url[len("etcd://") :].partition("/")
        endpoints = [h for h in hosts.split(",") if h]
        if endpoints and all(_host_port(e) for e in endpoints):
            return "etcd", (slash + path.rstrip("/") if path.strip("/") else ""), endpoints
    raise ValueError(f"unsupported storage URL {url!r}; use one of: {STORAGE_URL_FORMS}")


def _host_port(endpoint: str) -> bool:
    host, colon, port = endpoint.rpartition(":")
    return bool(host and colon and port.isdigit())


def open_storage(url: str) -> Storage:
    """Build (but do not start) the storage a URL names; raises ValueError for anything unsupported."""
    kind, path, endpoints = parse_storage_url(url)
    if kind == "sqlite":
        from .sqlite import SQLiteStorage

        return SQLiteStorage(path)
    if kind == "etcd":
        from .etcd import EtcdStorage

        return EtcdStorage(endpoints, prefix=path)
    return MemoryStorage()


def __getattr__(name: str) -> object:
    if name == "SQLiteStorage":
        from .sqlite import SQLiteStorage

        return SQLiteStorage
    if name == "EtcdStorage":
        from .etcd import EtcdStorage

        return EtcdStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
