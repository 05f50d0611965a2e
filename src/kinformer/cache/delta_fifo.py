"""DeltaFIFO: the queue between the Reflector (producer) and the informer (consumer), as in client-go.

Each key owns an ordered list of :class:`Delta` s accumulated since it was last popped; keys leave the
queue in the order they first entered it. ``pop`` hands the whole list for one key to the consumer.

The FIFO belongs to one asyncio event loop: call every method from that loop's thread. Unlike client-go
(which runs ``process`` under the queue lock), ``process`` may await; while it does, the FIFO remembers
the popped deltas as *in flight* and treats them as the consumer's state for that key, so a ``replace``,
``resync`` or ``delete`` that runs meanwhile decides exactly as if ``process`` had already finished.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NamedTuple, Protocol

from kinformer.cache.store import KeyFunc, meta_namespace_key
from kinformer.cache.tombstone import DeletedFinalStateUnknown
from kinformer.cache.waiters import park, wake_all
from kinformer.errors import KinformerError

__all__ = [
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaFIFO",
    "DeltaType",
    "FIFOClosed",
    "KeyListerGetter",
    "PopProcessFunc",
]


class DeltaType(enum.StrEnum):
    """What happened to an object."""

    ADDED = "Added"
    UPDATED = "Updated"
    DELETED = "Deleted"
    REPLACED = "Replaced"  # listed again by a relist; may or may not have changed
    SYNC = "Sync"  # periodic resync of the cached state (or Replace when Replaced is not emitted)


class Delta(NamedTuple):
    """One change: its ``type`` and the object's state after it (for a deletion: the last state known)."""

    type: DeltaType
    object: Any


class FIFOClosed(KinformerError):
    """``pop`` on a FIFO that is closed and drained."""


class KeyListerGetter(Protocol):
    """What the FIFO needs from the consumer's store (an :class:`~kinformer.cache.store.Indexer`)."""

    def list_keys(self) -> list[str]: ...

    def get_by_key(self, key: str) -> Any | None: ...


PopProcessFunc = Callable[[list[Delta], bool], Awaitable[None] | None]

ADDED, UPDATED, DELETED, REPLACED, SYNC = (DeltaType.ADDED, DeltaType.UPDATED, DeltaType.DELETED,
                                          DeltaType.REPLACED, DeltaType.SYNC)

#: ``pop`` yields to the event loop once per this many pops that found an item ready, so a long
#: backlog never starves other tasks.
YIELD_EVERY = 128


class _Waitable:
    """Per-waiter futures for an asyncio queue: cancellation of one waiter never disturbs another."""

    __slots__ = ("_closed", "_streak", "_waiters")

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] = []
        self._closed = False
        self._streak = 0

    def _wake(self) -> None:
        self._waiters = wake_all(self._waiters)

    async def _wait(self) -> None:
        self._streak = 0
        await park(self._waiters)

    def close(self) -> None:
        """Close the queue: ``pop`` drains what is queued, then raises :class:`FIFOClosed`."""
        self._closed = True
        self._wake()

    @property
    def is_closed(self) -> bool:
        return self._closed


class _PoppingFIFO(_Waitable):
    """What DeltaFIFO and RealFIFO share: keys, the initial population and the in-flight record of ``pop``.

    Invariants: ``_in_flight[key]`` is what a running ``pop`` handed to ``process`` for ``key`` (each FIFO
    decides its shape), removed when that ``process`` ends unless a later pop of the key replaced it;
    ``_initial_to_pop`` counts queued entries of the first population not popped yet, ``_initial_unprocessed``
    those not processed yet (``has_synced`` waits for the latter). Subclasses define ``get_by_key`` and
    ``pop`` (whose bookkeeping stays inline: it is the informer's hot path).
    """

    __slots__ = ("_in_flight", "_initial_to_pop", "_initial_unprocessed", "_key_func", "_known", "_populated",
                 "_replaces_left", "_sync_waiters")

    def __init__(self, key_func: KeyFunc, known_objects: KeyListerGetter | None) -> None:
        super().__init__()
        self._key_func = key_func
        self._known = known_objects
        self._in_flight: dict[str, Any] = {}
        self._populated = False
        self._replaces_left = 1  # first replaces that make up the initial population
        self._initial_to_pop = 0  # initial entries not popped yet (decides is_in_initial_list)
        self._initial_unprocessed = 0  # initial entries not processed yet (decides has_synced)
        self._sync_waiters: list[asyncio.Future[None]] = []

    def key_of(self, obj: Any) -> str:
        """The key of ``obj``; a tombstone's recorded key for DeletedFinalStateUnknown."""
        if isinstance(obj, DeletedFinalStateUnknown):
            return obj.key
        return self._key_func(obj)

    def has_synced(self) -> bool:
        """True once the initial population has been popped and processed."""
        return self._populated and self._initial_unprocessed == 0

    async def wait_synced(self) -> None:
        """Return once :meth:`has_synced` (woken by the change that makes it true, never polled); raise
        :class:`FIFOClosed` if the queue is closed first."""
        while not self.has_synced():
            if self._closed:
                raise FIFOClosed("closed before it synced")
            await park(self._sync_waiters)

    def _notify_synced(self) -> None:
        """Wake :meth:`wait_synced` callers (after a change that may have made the queue synced, or close)."""
        self._sync_waiters = wake_all(self._sync_waiters)

    def expect_initial_replaces(self, count: int) -> None:
        """The initial population is the first ``count`` replaces (one per namespace of a multi-namespace
        informer): events queued before the last of them do not make the queue populated."""
        self._replaces_left = max(1, count)

    def _populate_by_event(self) -> None:
        if self._replaces_left <= 1:
            self._set_populated()

    def _populate_by_replace(self) -> None:
        """After a replace while not populated: the last of the initial replaces sets the population, which
        is everything queued then."""
        self._replaces_left -= 1
        if self._replaces_left <= 0:
            self._initial_to_pop = self._initial_unprocessed = len(self)  # type: ignore[arg-type]
            self._set_populated()

    @staticmethod
    def _in_scope(key: str, scope: str | None) -> bool:
        return scope is None or key.startswith(scope)

    def _set_populated(self) -> None:
        self._populated = True
        if self._initial_unprocessed == 0:
            self._notify_synced()

    def close(self) -> None:
        super().close()
        self._notify_synced()

    def get_by_key(self, key: str) -> list[Delta] | None:
        """The deltas queued for ``key`` (a copy), or None (each FIFO keeps them its own way)."""
        raise NotImplementedError

    def get(self, obj: Any) -> list[Delta] | None:
        """The deltas queued for ``obj``'s key (a copy), or None."""
        return self.get_by_key(self.key_of(obj))


class DeltaFIFO(_PoppingFIFO):
    """A producer/consumer queue of per-key delta lists (client-go ``DeltaFIFO``).

    Invariants:
      * a key is in ``_queue`` exactly when it is in ``_items``, and at most once;
      * every ``_items`` list is non-empty and never ends with two Deleted deltas (consecutive deletions
        merge, keeping the one that is not a tombstone);
      * ``has_synced()`` is true once the first ``replace`` (or the first add/update/delete, if it came
        first) happened and every key it queued has been popped *and* processed.
    """

    __slots__ = ("_emit_replaced", "_items", "_queue")

    def __init__(self, key_func: KeyFunc = meta_namespace_key, known_objects: KeyListerGetter | None = None,
                 emit_delta_type_replaced: bool = True) -> None:
        super().__init__(key_func, known_objects)
        self._emit_replaced = emit_delta_type_replaced
        self._items: dict[str, list[Delta]] = {}
        self._queue: deque[str] = deque()

    # ------------------------------------------------------------------ keys and queueing

    def _queue_action(self, kind: DeltaType, obj: Any, key: str) -> None:
        deltas = self._items.get(key)
        if deltas is None:
            self._items[key] = [Delta(kind, obj)]
            self._queue.append(key)
            if self._waiters:
                self._wake()
        elif kind is DELETED and deltas[-1].type is DELETED:
            # a repeated deletion: keep the one that carries the object's real final state
            if isinstance(deltas[-1].object, DeletedFinalStateUnknown):
                deltas[-1] = Delta(DELETED, obj)
        else:
            deltas.append(Delta(kind, obj))

    def add(self, obj: Any) -> None:
        """Queue an Added delta."""
        if not self._populated:
            self._populate_by_event()
        key = obj.key if obj.__class__ is DeletedFinalStateUnknown else self._key_func(obj)
        self._queue_action(ADDED, obj, key)

    def update(self, obj: Any) -> None:
        """Queue an Updated delta."""
        if not self._populated:
            self._populate_by_event()
        key = obj.key if obj.__class__ is DeletedFinalStateUnknown else self._key_func(obj)
        self._queue_action(UPDATED, obj, key)

    def delete(self, obj: Any) -> None:
        """Queue a Deleted delta, unless the key is neither known to the consumer nor queued.

        (Then the deletion was already reported, e.g. by a relist's tombstone, and is dropped.)
        """
        key = self.key_of(obj)
        if not self._populated:
            self._populate_by_event()
        if key not in self._items and self._known_object(key) is None:
            return
        self._queue_action(DELETED, obj, key)

    # ------------------------------------------------------------------ consumer state

    def _known_object(self, key: str) -> Any | None:
        """The consumer's object for ``key`` once in-flight processing is accounted for (None if absent)."""
        known = self._known
        if known is None:
            return None
        deltas = self._in_flight.get(key)
        if deltas is not None:
            last = deltas[-1]
            return None if last.type is DELETED else last.object
        return known.get_by_key(key)

    def _known_keys(self) -> Iterable[str]:
        known = self._known
        if known is None:
            return ()
        keys = known.list_keys()
        if not self._in_flight:
            return keys
        merged = dict.fromkeys(keys)
        merged.update(dict.fromkeys(self._in_flight))
        return merged

    # ------------------------------------------------------------------ replace / resync

    def replace(self, objs: Iterable[Any], resource_version: str = "", *, scope: str | None = None) -> None:
        """Queue a Replaced (or Sync) delta per listed object, and a tombstone per vanished key.

        A key is vanished when it is queued or known to the consumer but not in ``objs`` (and starts with
        ``scope`` when given: ``"ns/"`` for one namespace's list); its tombstone is
        ``DeletedFinalStateUnknown(key, last known object)``, the newest queued object if any. The first
        replace (or the last of :meth:`expect_initial_replaces`) sets the population ``has_synced`` waits for.
        """
        action = REPLACED if self._emit_replaced else SYNC
        listed: set[str] = set()
        for obj in objs:
            key = self.key_of(obj)
            listed.add(key)
            self._queue_action(action, obj, key)

        deletions = 0
        for key in [k for k in self._items if k not in listed and self._in_scope(k, scope)]:
            last = self._items[key][-1].object
            if isinstance(last, DeletedFinalStateUnknown):
                last = last.obj
            deletions += 1
            self._queue_action(DELETED, DeletedFinalStateUnknown(key, last), key)
        for key in self._known_keys():
            if key in listed or key in self._items or not self._in_scope(key, scope):
                continue
            obj = self._known_object(key)
            if obj is None and key in self._in_flight:
                continue  # being deleted right now: the consumer is about to forget it
            deletions += 1
            self._queue_action(DELETED, DeletedFinalStateUnknown(key, obj), key)

        if not self._populated:
            self._populate_by_replace()

    def resync(self) -> None:
        """Queue a Sync delta for every key the consumer knows, except keys that already have queued deltas."""
        if self._known is None:
            return
        for key in self._known_keys():
            if key in self._items:
                continue
            obj = self._known_object(key)
            if obj is not None:
                self._queue_action(SYNC, obj, key)

    # ------------------------------------------------------------------ consumer

    async def pop(self, process: PopProcessFunc) -> list[Delta]:
        """Wait for a key, remove it with its deltas, run ``process(deltas, is_in_initial_list)``, return the deltas.

        ``process`` may be a plain function or return an awaitable (which is awaited). Its exceptions
        propagate to the caller; the deltas are not requeued. Raise :class:`FIFOClosed` once closed and empty.
        """
        queue = self._queue
        if queue:
            self._streak += 1
            if self._streak >= YIELD_EVERY:
                self._streak = 0
                await asyncio.sleep(0)
        while not queue:
            if self._closed:
                raise FIFOClosed("DeltaFIFO: Pop on a closed queue")
            await self._wait()
        key = queue.popleft()
        deltas = self._items.pop(key)
        initial = self._initial_to_pop > 0
        in_initial_list = initial or not self._populated
        if initial:
            self._initial_to_pop -= 1
        in_flight = self._in_flight
        in_flight[key] = deltas
        try:
            result = process(deltas, in_initial_list)
            if result is not None and inspect.isawaitable(result):
                await result
        finally:
            if in_flight.get(key) is deltas:
                del in_flight[key]
            if initial:
                self._initial_unprocessed -= 1
                if not self._initial_unprocessed:
                    self._notify_synced()
        return deltas

    # ------------------------------------------------------------------ reads

    def get_by_key(self, key: str) -> list[Delta] | None:
        """A copy of the deltas queued for ``key``, or None."""
        deltas = self._items.get(key)
        return list(deltas) if deltas is not None else None

    def list_keys(self) -> list[str]:
        """The queued keys, in pop order."""
        return list(self._queue)

    def list(self) -> list[Any]:
        """The newest queued object of every key, in pop order."""
        items = self._items
        return [items[k][-1].object for k in self._queue]

    def __len__(self) -> int:
        return len(self._queue)

    def __contains__(self, key: object) -> bool:
        return key in self._items
