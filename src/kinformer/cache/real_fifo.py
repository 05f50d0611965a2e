"""RealFIFO: client-go 1.33's in-order alternative to DeltaFIFO.

Every notification is kept and delivered in arrival order, one :class:`Delta` per ``pop`` (handed to
``process`` as a one-element list, so consumers written for :class:`DeltaFIFO` work unchanged). Nothing is
merged: two updates of one key are two pops. ``replace`` always emits ``Replaced`` deltas, preceded by
tombstones for vanished keys; ``resync`` emits ``Sync`` for known keys with nothing queued.

Same threading rule and in-flight accounting as :class:`~kinformer.cache.delta_fifo.DeltaFIFO`.

A consumer that processes synchronously may also take deltas straight from the producer
(:meth:`RealFIFO.set_direct`): while the queue is idle (nothing queued or in flight, the initial population
processed, not closed) ``add``/``update``/``delete`` hand their delta to it at once instead of queuing it, and
:meth:`RealFIFO.add_watch_deltas` a whole watch batch in one call.
Nothing queued can be overtaken and nothing is in flight meanwhile, so the order, ``has_synced``, ``replace``
and ``resync`` are exactly those of the queued path; a steady watch then costs no queue entry, no wake-up
and no pop per event, one call per batch (the informer's fast path).
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kinformer.cache.delta_fifo import (
    YIELD_EVERY,
    Delta,
    DeltaType,
    FIFOClosed,
    KeyListerGetter,
    PopProcessFunc,
    _PoppingFIFO,
)
from kinformer.cache.store import KeyFunc, meta_namespace_key
from kinformer.cache.tombstone import DeletedFinalStateUnknown

__all__ = ["RealFIFO"]

_new_tuple = tuple.__new__  # a NamedTuple made without its Python-level __new__ (the hot path's one allocation)

ADDED, UPDATED, DELETED, REPLACED, SYNC = (DeltaType.ADDED, DeltaType.UPDATED, DeltaType.DELETED,
                                          DeltaType.REPLACED, DeltaType.SYNC)


WatchDeltas = list[tuple[DeltaType, Any]]
"""One watch batch's deltas, ``(type, object)`` in arrival order."""


def _producer(kind: DeltaType, name: str, doc: str) -> Callable[[RealFIFO, Any], None]:
    """RealFIFO's ``add``/``update``/``delete`` for deltas of ``kind``: :meth:`RealFIFO.add_watch_deltas` of
    one delta, raising what it rejected it for (an object without a key)."""

    def produce(self: RealFIFO, obj: Any) -> None:
        for _, exc in self.add_watch_deltas([(kind, obj)]):
            raise exc

    produce.__doc__ = doc
    produce.__name__ = name
    produce.__qualname__ = f"RealFIFO.{name}"
    return produce


_NONE_REJECTED: tuple[tuple[DeltaType, Exception], ...] = ()


class RealFIFO(_PoppingFIFO):
    """An in-order queue of deltas with DeltaFIFO's interface.

    Invariants: ``_log`` holds ``(key, delta)`` in arrival order; ``_counts[k]`` is the number of entries
    for ``k`` in ``_log`` and ``_last[k]`` the newest of them (both absent when there are none).
    ``len()`` is the number of queued deltas (not keys).
    """

    __slots__ = ("_counts", "_direct", "_last", "_log")

    def __init__(self, key_func: KeyFunc = meta_namespace_key, known_objects: KeyListerGetter | None = None,
                 emit_delta_type_replaced: bool = True) -> None:
        super().__init__(key_func, known_objects)
        del emit_delta_type_replaced  # accepted for interface parity; RealFIFO always emits Replaced
        self._log: deque[tuple[str, Delta]] = deque()
        self._counts: dict[str, int] = {}
        self._last: dict[str, Delta] = {}
        self._direct: Callable[[WatchDeltas], None] | None = None

    def set_direct(self, process: Callable[[WatchDeltas], None] | None) -> None:
        """Hand deltas to ``process(deltas)`` (a list of ``(type, object)``, in order: one watch batch, or one
        delta of ``add``/``update``/``delete``) instead of queuing them while the queue is idle (see the
        module's docstring); None turns it off. ``process`` runs in the producer's call and must not raise."""
        self._direct = process

    def add_watch_deltas(self, deltas: WatchDeltas) -> Sequence[tuple[DeltaType, Exception]]:
        """One watch batch's deltas (Added, Updated or Deleted), in order: handed to the direct consumer in one
        call while the queue is idle (nothing queued or in flight, the initial population processed, open;
        the test is written out: this is the informer's per-batch path), else queued in order. Returns
        ``(type, exception)`` for each delta whose object has no key (not queued; the rest are)."""
        direct = self._direct
        if (direct is not None and self._populated and not self._log and not self._in_flight
                and not self._initial_unprocessed and not self._closed):
            direct(deltas)
            return _NONE_REJECTED
        if not self._populated:
            self._populate_by_event()
        rejected: list[tuple[DeltaType, Exception]] = []
        key_of = self.key_of
        for kind, obj in deltas:
            try:
                key = key_of(obj)
            except Exception as exc:
                rejected.append((kind, exc))
                continue
            self._append(kind, obj, key)
        return rejected

    def _append(self, kind: DeltaType, obj: Any, key: str) -> None:
        delta = _new_tuple(Delta, (kind, obj))
        self._log.append((key, delta))
        self._counts[key] = self._counts.get(key, 0) + 1
        self._last[key] = delta
        if self._waiters:
            self._wake()

    add = _producer(ADDED, "add", "Queue an Added delta.")
    update = _producer(UPDATED, "update", "Queue an Updated delta.")
    delete = _producer(DELETED, "delete",
                       "Queue a Deleted delta (always: RealFIFO reports every deletion it is told about).")

    def _known_object(self, key: str) -> Any | None:
        delta = self._in_flight.get(key)
        if delta is not None:
            return None if delta.type is DELETED else delta.object
        return self._known.get_by_key(key) if self._known is not None else None

    def _known_keys(self) -> Iterable[str]:
        if self._known is None:
            return ()
        keys = dict.fromkeys(self._known.list_keys())
        keys.update(dict.fromkeys(self._in_flight))
        return keys

    def replace(self, objs: Iterable[Any], resource_version: str = "", *, scope: str | None = None) -> None:
        """Tombstones for vanished keys (queued or known, not listed; starting with ``scope`` when given), then
        a Replaced delta per listed object."""
        objs = list(objs)
        listed = {self.key_of(o) for o in objs}
        queued = list(self._last)
        for key in queued:
            last = self._last[key]
            if key not in listed and last.type is not DELETED and self._in_scope(key, scope):
                self._append(DELETED, DeletedFinalStateUnknown(key, last.object), key)
        for key in self._known_keys():
            if key in listed or key in self._counts or not self._in_scope(key, scope):
                continue
            obj = self._known_object(key)
            if obj is None and key in self._in_flight:
                continue  # its deletion is being processed right now
            self._append(DELETED, DeletedFinalStateUnknown(key, obj), key)
        for obj in objs:
            self._append(REPLACED, obj, self.key_of(obj))
        if not self._populated:
            self._populate_by_replace()

    def resync(self) -> None:
        """Queue a Sync delta for every known key with nothing queued."""
        for key in self._known_keys():
            if key in self._counts:
                continue
            obj = self._known_object(key)
            if obj is not None:
                self._append(SYNC, obj, key)

    async def pop(self, process: PopProcessFunc) -> list[Delta]:
        """Wait for the oldest delta, run ``process([delta], is_in_initial_list)``, return ``[delta]``."""
        log = self._log
        if log:
            self._streak += 1
            if self._streak >= YIELD_EVERY:
                self._streak = 0
                await asyncio.sleep(0)
        while not log:
            if self._closed:
                raise FIFOClosed("RealFIFO: Pop on a closed queue")
            await self._wait()
        key, delta, initial = self._take()
        deltas = [delta]
        try:
            result = process(deltas, initial or not self._populated)
            if result is not None and inspect.isawaitable(result):
                await result
        finally:
            self._finish(key, delta, initial)
        return deltas

    def pop_ready(self, process: Callable[[list[Delta], bool], None], limit: int) -> int:
        """Process up to ``limit`` queued deltas now, oldest first, each exactly as :meth:`pop` would (one per
        ``process`` call, same bookkeeping), without waiting or yielding to the loop: ``process`` must be
        synchronous. Returns how many were processed; an exception from ``process`` propagates after its
        delta's bookkeeping, the later deltas staying queued. (The informer's batch: no coroutine per delta.)"""
        log = self._log
        take = self._take
        finish = self._finish
        done = 0
        while log and done < limit:
            key, delta, initial = take()
            try:
                process([delta], initial or not self._populated)
            finally:
                finish(key, delta, initial)
            done += 1
        return done

    def _take(self) -> tuple[str, Delta, bool]:
        """Pop the oldest entry and record it in flight: (key, delta, whether it is of the initial population)."""
        key, delta = self._log.popleft()
        remaining = self._counts[key] - 1
        if remaining:
            self._counts[key] = remaining
        elif self._log:
            del self._counts[key]
            del self._last[key]
        else:  # drained: new dicts, as a dict never shrinks (after a big Replace it would keep its size)
            self._counts = {}
            self._last = {}
        initial = self._initial_to_pop > 0
        if initial:
            self._initial_to_pop -= 1
        self._in_flight[key] = delta
        return key, delta, initial

    def _finish(self, key: str, delta: Delta, initial: bool) -> None:
        """``process`` ended for ``delta``: out of flight (unless a later pop replaced it), counted as synced."""
        if self._in_flight.get(key) is delta:
            del self._in_flight[key]
        if initial:
            self._initial_unprocessed -= 1
            if not self._initial_unprocessed:
                self._notify_synced()

    def get_by_key(self, key: str) -> list[Delta] | None:
        """The deltas queued for ``key``, oldest first, or None (a scan: for tests and debugging)."""
        if key not in self._counts:
            return None
        return [d for k, d in self._log if k == key]

    def list_keys(self) -> list[str]:
        """The distinct queued keys in order of their oldest queued delta."""
        return list(dict.fromkeys(k for k, _ in self._log))

    def list(self) -> list[Any]:
        """The newest queued object of every queued key."""
        return [self._last[k].object for k in self.list_keys()]

    def __len__(self) -> int:
        return len(self._log)

    def __contains__(self, key: object) -> bool:
        return key in self._counts
