"""In-memory MVCC storage, plus the watch fan-out hub every backend shares.

:class:`MemoryStorage` keeps the full history of every key in memory (until compaction):

* ``_keys`` is the sorted list of every key that has any retained version (live or tombstone), so a
  prefix list is ``O(log n + k)`` via :mod:`bisect`.
* ``_hist[key]`` holds two parallel lists: the revisions at which the key changed (ascending) and the
  :class:`KeyValue` written then (``None`` marks a deletion).
* ``_log`` holds every retained :class:`Event` in revision order; ``_log[i]`` has revision
  ``_log_base + i + 1``. Watches replay history from it.
* The retained :class:`KeyValue` and :class:`Event` objects are not tracked by the cyclic garbage collector
  (CPython): frozen, they refer only to strings, bytes, ints and each other, so they are never part of a
  reference cycle, and a history of many thousand versions costs the collector nothing at each collection.

Every mutation runs without an ``await`` between its check and its write, so within one event loop
compare-and-swap is atomic and each successful write gets exactly one new revision.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import AsyncIterator, Iterable
from typing import Literal

from kinformer.untrack import gc_untrack

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
    resolve_revision,
)

__all__ = ["DEFAULT_WATCH_BUFFER", "MemoryStorage", "WatchHub", "prefix_end"]

DEFAULT_WATCH_BUFFER = 10_000


def prefix_end(prefix: str) -> str | None:
    """The smallest string greater than every string that starts with ``prefix`` (None: no bound)."""
    while prefix:
        last = ord(prefix[-1])
        if last < 0x10FFFF:
            return prefix[:-1] + chr(last + 1)
        prefix = prefix[:-1]
    return None


class _Subscriber:
    """One watcher's bounded buffer of live events.

    Invariant: once ``overflowed`` is set nothing more is appended, so the events already buffered
    are a gap-free prefix of the stream and the watcher can end cleanly after delivering them.
    """

    __slots__ = ("buffer", "closed", "limit", "overflowed", "prefix", "waiter")

    def __init__(self, prefix: str, limit: int) -> None:
        self.prefix = prefix
        self.limit = limit
        self.buffer: deque[Event] = deque()
        self.overflowed = False
        self.closed = False
        self.waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Block until something is buffered, the buffer overflowed, or the hub closed."""
        if self.buffer or self.overflowed or self.closed:
            return
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None


class WatchHub:
    """Fans committed events out to subscribers, each with its own bounded buffer.

    ``publish`` must be called on the event loop, in revision order, once per committed batch. A
    subscriber whose buffer would exceed its limit is marked overflowed (its watch then ends with
    :class:`WatcherTooSlow`) instead of slowing the writer or the other watchers down.
    """

    __slots__ = ("_subs", "buffer_limit", "closed")

    def __init__(self, buffer_limit: int = DEFAULT_WATCH_BUFFER) -> None:
        if buffer_limit < 1:
            raise ValueError("watch buffer limit must be at least 1")
        self.buffer_limit = buffer_limit
        self.closed = False
        self._subs: set[_Subscriber] = set()

    def __len__(self) -> int:
        return len(self._subs)

    def subscribe(self, prefix: str) -> _Subscriber:
        sub = _Subscriber(prefix, self.buffer_limit)
        if self.closed:
            sub.closed = True  # its watch ends after any history
        else:
            self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: _Subscriber) -> None:
        self._subs.discard(sub)

    def publish(self, events: Iterable[Event]) -> None:
        subs = self._subs
        if not subs:
            return
        events = events if isinstance(events, list) else list(events)
        for sub in subs:
            if sub.overflowed:
                continue
            prefix = sub.prefix
            buf = sub.buffer
            added = False
            for ev in events:
                if ev.kv.key.startswith(prefix):
                    if len(buf) >= sub.limit:
                        sub.overflowed = True
                        added = True
                        break
                    buf.append(ev)
                    added = True
            if added:
                sub.wake()

    def close(self) -> None:
        """End every subscription (now and later): watches stop after the events already buffered."""
        self.closed = True
        for sub in self._subs:
            sub.closed = True
            sub.wake()
        self._subs.clear()


async def drain_live(sub: _Subscriber, after: int, start: int) -> AsyncIterator[Event]:
    """Yield a subscriber's live events with revision > ``after`` and >= ``start`` until it ends.

    Raises :class:`WatcherTooSlow` once the buffered events are delivered if the buffer overflowed.
    """
    buf = sub.buffer
    floor = max(after + 1, start)
    while True:
        while buf:
            ev = buf.popleft()
            if ev.kv.mod_revision >= floor:
                yield ev
        if sub.overflowed:
            raise WatcherTooSlow(f"watch on {sub.prefix!r} fell more than {sub.limit} events behind")
        if sub.closed:
            return
        await sub.wait()


class _History:
    """The retained versions of one key: ascending revisions and the value written (None = deleted)."""

    __slots__ = ("kvs", "revs")

    def __init__(self) -> None:
        self.revs: list[int] = []
        self.kvs: list[KeyValue | None] = []

    def at(self, revision: int) -> KeyValue | None:
        revs = self.revs
        if revs[-1] <= revision:
            return self.kvs[-1]
        i = bisect_right(revs, revision)
        return self.kvs[i - 1] if i else None


class MemoryStorage(Storage):
    """MVCC storage held in process memory; nothing survives the process.

    ``history_limit``: when set, history older than that many revisions is compacted automatically
    (amortised: compaction runs once the retained history exceeds the limit by a quarter).
    ``watch_buffer``: per-watcher bound on undelivered live events before :class:`WatcherTooSlow`.
    """

    def __init__(self, history_limit: int | None = None, *, watch_buffer: int = DEFAULT_WATCH_BUFFER) -> None:
        if history_limit is not None and history_limit < 1:
            raise ValueError("history_limit must be at least 1")
        self._history_limit = history_limit
        self._rev = 0
        self._compacted = 0
        self._keys: list[str] = []
        self._hist: dict[str, _History] = {}
        self._log: list[Event] = []
        self._log_base = 0  # revision just before _log[0]
        self._hub = WatchHub(watch_buffer)
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """(Re)open for writes; watches ended by a previous close() stay ended."""
        if self._closed:
            self._hub = WatchHub(self._hub.buffer_limit)
            self._closed = False

    async def close(self) -> None:
        self._closed = True
        self._hub.close()

    async def __aenter__(self) -> MemoryStorage:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- reads ---------------------------------------------------------------------------------------

    async def current_revision(self) -> int:
        return self._rev

    async def compacted_revision(self) -> int:
        return self._compacted

    def _resolve(self, revision: int) -> int:
        return resolve_revision(revision, self._rev, self._compacted)

    async def get(self, key: str, revision: int = 0) -> KeyValue | None:
        rev = self._resolve(revision)
        hist = self._hist.get(key)
        return hist.at(rev) if hist is not None else None

    def _scan(self, prefix: str, start_after: str) -> tuple[int, int]:
        keys = self._keys
        lo = bisect_left(keys, prefix)
        if start_after >= prefix:
            lo = max(lo, bisect_right(keys, start_after))
        end = prefix_end(prefix)
        hi = bisect_left(keys, end, lo) if end is not None else len(keys)
        return lo, hi

    async def list(self, prefix: str, revision: int = 0, start_after: str = "", limit: int = 0) -> ListResult:
        rev = self._resolve(revision)
        lo, hi = self._scan(prefix, start_after)
        keys, hists = self._keys, self._hist
        out: list[KeyValue] = []
        more = False
        for i in range(lo, hi):
            kv = hists[keys[i]].at(rev)
            if kv is None:
                continue
            if limit and len(out) >= limit:
                more = True
                break
            out.append(kv)
        return ListResult(out, rev, more)

    async def count(self, prefix: str, revision: int = 0, start_after: str = "") -> int:
        rev = self._resolve(revision)
        lo, hi = self._scan(prefix, start_after)
        keys, hists = self._keys, self._hist
        return sum(1 for i in range(lo, hi) if hists[keys[i]].at(rev) is not None)

    # -- writes --------------------------------------------------------------------------------------

    def _latest(self, key: str) -> KeyValue | None:
        hist = self._hist.get(key)
        return hist.kvs[-1] if hist is not None else None

    def _commit(self, typ: Literal["PUT", "DELETE"], kv: KeyValue, prev: KeyValue | None) -> None:
        key = kv.key
        hist = self._hist.get(key)
        if hist is None:
            hist = self._hist[key] = _History()
            keys = self._keys
            if not keys or keys[-1] < key:
                keys.append(key)
            else:
                keys.insert(bisect_left(keys, key), key)
        gc_untrack(kv)
        hist.revs.append(kv.mod_revision)
        hist.kvs.append(kv if typ == "PUT" else None)
        self._rev = kv.mod_revision
        ev = Event(typ, kv, prev)
        gc_untrack(ev)
        self._log.append(ev)
        self._hub.publish([ev])
        limit = self._history_limit
        if limit is not None and self._rev - self._compacted > limit + max(1, limit // 4):
            self._compact_now(self._rev - limit)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("storage is closed")

    async def create(self, key: str, value: bytes) -> KeyValue:
        self._check_open()
        if self._latest(key) is not None:
            raise KeyExists(key)
        rev = self._rev + 1
        kv = KeyValue(key, value, rev, rev)
        self._commit("PUT", kv, None)
        return kv

    def _expect(self, key: str, expected_revision: int) -> KeyValue:
        """The live value of ``key`` if it is at ``expected_revision`` (0: any); else KeyNotFound/RevisionMismatch."""
        self._check_open()
        cur = self._latest(key)
        if cur is None:
            raise KeyNotFound(key)
        if expected_revision and cur.mod_revision != expected_revision:
            raise RevisionMismatch(cur)
        return cur

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        cur = self._expect(key, expected_revision)
        kv = KeyValue(key, value, self._rev + 1, cur.create_revision)
        self._commit("PUT", kv, cur)
        return kv

    async def delete(self, key: str, expected_revision: int = 0) -> KeyValue:
        cur = self._expect(key, expected_revision)
        kv = KeyValue(key, cur.value, self._rev + 1, cur.create_revision)
        self._commit("DELETE", kv, cur)
        return kv

    # -- watch ---------------------------------------------------------------------------------------

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[Event]:
        """History from ``start_revision`` (<= 0: from the next revision), then live events.

        A ``start_revision`` above the current revision is allowed: the watch waits for it.
        """
        if 0 < start_revision <= self._compacted:
            raise Compacted(start_revision, self._compacted)
        sub = self._hub.subscribe(prefix)
        now = self._rev
        try:
            if 0 < start_revision <= now:
                nxt = start_revision
                while nxt <= now:
                    idx = nxt - self._log_base - 1
                    if idx < 0:
                        raise Compacted(nxt, self._compacted)
                    ev = self._log[idx]
                    nxt += 1
                    if ev.kv.key.startswith(prefix):
                        yield ev
            async for ev in drain_live(sub, now, start_revision):
                yield ev
        finally:
            self._hub.unsubscribe(sub)

    # -- compaction ----------------------------------------------------------------------------------

    async def compact(self, revision: int) -> None:
        """Compact to ``revision``; a revision at or below the compaction point is a no-op."""
        if revision > self._rev:
            raise FutureRevision(revision, self._rev)
        if revision <= self._compacted:
            return
        self._compact_now(revision)

    def _compact_now(self, revision: int) -> None:
        cut = revision - self._log_base
        touched = {ev.kv.key for ev in self._log[:cut]}
        del self._log[:cut]
        self._log_base = revision
        self._compacted = revision
        dead: set[str] = set()
        for key in touched:
            hist = self._hist[key]
            i = bisect_right(hist.revs, revision) - 1  # the version current at ``revision``
            if hist.kvs[i] is None:
                i += 1  # a tombstone at or below the point goes too
            if i > 0:
                del hist.revs[:i]
                del hist.kvs[:i]
            if not hist.revs:
                del self._hist[key]
                dead.add(key)
        if dead:
            self._drop_keys(dead)

    def _drop_keys(self, dead: set[str]) -> None:
        keys = self._keys
        if len(dead) > 64:
            self._keys = [k for k in keys if k not in dead]
            return
        for key in dead:
            del keys[bisect_left(keys, key)]
