"""The MVCC storage interface behind the embedded API server (the shape of etcd v3 and kine).

Invariants every backend keeps:

* One global revision counter. Every successful create, update or delete bumps it by exactly one
  and the written key's ``mod_revision`` is that new revision.
* ``value`` is opaque bytes (the server stores the object's JSON without ``resourceVersion``; it
  sets ``metadata.resourceVersion = str(mod_revision)`` when it serves the object).
* Writes are compare-and-swap on the key's current ``mod_revision`` (``expected_revision``), so two
  racing writers never both win.
* Reads at a revision see exactly the state after that revision. A revision at or below the
  compaction point (except the compaction point itself) raises :class:`Compacted`; one above the
  current revision raises :class:`FutureRevision`.
* ``watch(prefix, start_revision)`` yields, in revision order, every event with
  ``revision >= start_revision`` for keys under ``prefix``, then live events, with no gaps and no
  duplicates; if ``start_revision`` is compacted it raises :class:`Compacted` before yielding.
  A watcher that falls too far behind is ended with :class:`WatcherTooSlow` (re-watch from the
  last revision seen).
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal


class StorageError(Exception):
    """Base class of storage failures."""


class KeyExists(StorageError):
    """create() of a key that already exists."""


class KeyNotFound(StorageError):
    """update()/delete() of a key that does not exist."""


class RevisionMismatch(StorageError):
    """Compare-and-swap failed: the key's mod_revision is not the expected one."""

    def __init__(self, current: KeyValue | None) -> None:
        super().__init__("revision mismatch")
        self.current = current


class Compacted(StorageError):
    """The requested revision is older than the compaction point."""

    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"required revision {requested} has been compacted (compacted to {compacted})")
        self.requested = requested
        self.compacted = compacted


class FutureRevision(StorageError):
    """The requested revision is newer than the current revision."""

    def __init__(self, requested: int, current: int) -> None:
        super().__init__(f"required revision {requested} is a future revision (current {current})")
        self.requested = requested
        self.current = current


class WatcherTooSlow(StorageError):
    """A watcher's buffer overflowed; it must re-watch from its last revision."""


def resolve_revision(revision: int, current: int, compacted: int) -> int:
    """The revision a read at ``revision`` (0 = latest) sees, per the module invariants.

    Raises ValueError for a negative revision, :class:`FutureRevision` above ``current`` and
    :class:`Compacted` below ``compacted``.
    """
    if revision == 0:
        return current
    if revision < 0:
        raise ValueError(f"revision must not be negative: {revision}")
    if revision > current:
        raise FutureRevision(revision, current)
    if revision < compacted:
        raise Compacted(revision, compacted)
    return revision


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    mod_revision: int
    create_revision: int


@dataclass(frozen=True, slots=True)
class Event:
    """One change. For DELETE, ``kv.value`` is the last value and ``kv.mod_revision`` the deletion's revision."""

    type: Literal["PUT", "DELETE"]
    kv: KeyValue
    prev_kv: KeyValue | None

    @property
    def revision(self) -> int:
        return self.kv.mod_revision

    @property
    def is_create(self) -> bool:
        return self.type == "PUT" and self.kv.create_revision == self.kv.mod_revision


@dataclass(frozen=True, slots=True)
class ListResult:
    kvs: list[KeyValue]
    revision: int  # the revision the list was read at
    more: bool  # True when ``limit`` cut the result short


class Storage(abc.ABC):
    """An MVCC key-value store. All methods are coroutine-safe within one event loop."""

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def current_revision(self) -> int: ...

    @abc.abstractmethod
    async def compacted_revision(self) -> int: ...

    @abc.abstractmethod
    async def get(self, key: str, revision: int = 0) -> KeyValue | None:
        """The key at ``revision`` (0 = latest), or None if absent then."""

    @abc.abstractmethod
    async def list(self, prefix: str, revision: int = 0, start_after: str = "", limit: int = 0) -> ListResult:
        """Keys under ``prefix`` in key order, strictly after ``start_after``, at ``revision`` (0 = latest)."""

    @abc.abstractmethod
    async def count(self, prefix: str, revision: int = 0, start_after: str = "") -> int:
        """How many keys ``list`` would return with no limit."""

    @abc.abstractmethod
    async def create(self, key: str, value: bytes) -> KeyValue: ...

    @abc.abstractmethod
    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        """Replace the value if the key's mod_revision equals ``expected_revision`` (0 = unconditional)."""

    @abc.abstractmethod
    async def delete(self, key: str, expected_revision: int = 0) -> KeyValue:
        """Delete the key; returns its last value with the deletion's revision as ``mod_revision``."""

    @abc.abstractmethod
    def watch(self, prefix: str, start_revision: int) -> AsyncIterator[Event]:
        """Events for keys under ``prefix`` from ``start_revision`` on (see the module invariants)."""

    @abc.abstractmethod
    async def compact(self, revision: int) -> None:
        """Drop history at or below ``revision``, keeping each live key's latest value."""
