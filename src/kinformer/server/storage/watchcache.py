"""The watch cache: the current object set and a bounded window of recent events, per resource.

One storage watch on ``/registry/`` feeds every resource (the kube-apiserver watch cache, with one
source stream). Because every revision of the store is one write under ``/registry/``, the cache
knows it has applied *every* revision up to :attr:`WatchCache.revision` — a progress notification for
free, which makes consistent reads and bookmarks exact. This holds for several API server replicas
over one etcd cluster too (every replica writes only under ``/registry/`` and each replica's cache sees
every replica's writes in revision order). Only foreign writes to the same etcd (another key prefix,
another application) leave revision gaps; :meth:`WatchCache.wait_fresh` then proves with a history
probe that nothing under ``/registry/`` is pending before advancing, which costs a consistent read
about half a second — give the servers an etcd cluster of their own.

Invariants:

* ``bucket.objects`` is the state of the bucket's keys at :attr:`WatchCache.revision`.
* ``bucket.ring`` holds, in revision order, every event of the bucket with revision
  ``> bucket.ring_start`` (up to ``size`` events); older ones must come from storage history.
* Each object version is serialised once (:attr:`CachedEvent.raw`); every watcher writes those bytes.
* Subscribing (ring replay + live registration) is synchronous, so a watcher sees no gap and no duplicate.
* A watcher whose buffer overflows (``watcher_buffer_events`` events or ``watcher_buffer_bytes`` bytes of objects) is
  closed and its buffer dropped (its client re-watches from its last RV) instead of blocking others or pinning
  more superseded object versions.
* A write calls, in the order they were added, the listeners added for its bucket's prefix and those added for
  every prefix (:meth:`WatchCache.add_listener`), each after the cache has applied it; a listener that raises
  is logged and keeps neither the others nor the cache from the event.
* The listeners of an event read its object and the version it replaced decoded as they come; after them the
  cache keeps decoded only what a watcher with a selector subscribed to the bucket reads (the event's object
  and the version it replaced), and what a reader decodes of a current version (see :class:`CachedObject`).
* :class:`CachedObject` and :class:`CachedEvent` are not tracked by the cyclic garbage collector (CPython): they
  refer only to strings, bytes, ints, decoded JSON and each other, never to anything that refers back to them, so
  they are never part of a reference cycle; a cache of many thousand objects and its rings of a thousand events
  a resource cost the collector nothing at each collection.
* A writer may :meth:`WatchCache.offer` the object it just wrote (decoded, with its served bytes) for the
  event of that key and revision; the cache then takes it instead of decoding the stored value again. An
  offered object is read-only from then on, like every cached object.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from kinformer.untrack import gc_untrack

from .base import Compacted, Event, Storage, WatcherTooSlow

log = logging.getLogger(__name__)

ROOT = "/registry/"
OFFER_LIMIT = 1024  # writes offered and not yet applied (beyond it, offers are declined: the cache decodes)
#: What one watcher may have buffered and not yet written to its client, in events and in bytes of their objects.
DEFAULT_WATCHER_BUFFER_EVENTS = 10_000
DEFAULT_WATCHER_BUFFER_BYTES = 16 * 1024 * 1024


def split_key(key: str) -> tuple[str, str, str]:
    """``/registry/g/plural/ns/name`` -> (bucket prefix ``/registry/g/plural/``, namespace, name)."""
    i = key.index("/", 10)
    j = key.index("/", i + 1)
    prefix = key[: j + 1]
    rest = key[j + 1:]
    ns, sep, name = rest.partition("/")
    return (prefix, ns, name) if sep else (prefix, "", rest)


class CachedObject:
    """One object version as served: its JSON bytes and the decoded dict (read-only by contract).

    ``raw`` and ``api_version`` (the object's ``apiVersion``, what serving it unconverted checks) always hold the
    version. The decoded dict is held only where someone reads it: a version comes decoded (the writer's object
    or a decode of the stored value); once its event's listeners have run, the cache drops the dict
    (:meth:`compact`: a decoded pod is some fifty containers the cyclic collector walks at every collection, and
    most versions are never read decoded again) unless a watcher with a selector will read it. A current (or
    kept superseded) version decodes ``raw`` again at its next read of :attr:`obj` and keeps that dict; a
    released version (:meth:`release`: replaced) decodes ``raw`` at each read (a fresh, equal dict each time).
    :attr:`meta` is the metadata without ``managedFields``, what the server's own controllers read of every
    version, kept while the version is current.
    """

    __slots__ = ("_keep", "_meta", "_obj", "api_version", "key", "name", "namespace", "raw", "rev")

    def __init__(self, key: str, namespace: str, name: str, obj: dict[str, Any], raw: bytes, rev: int) -> None:
        self.key = key
        self.namespace = namespace
        self.name = name
        self._obj: dict[str, Any] | None = obj
        self._meta: dict[str, Any] | None = None
        self._keep = True  # a decode of ``raw`` is kept: current (or a kept superseded) version
        self.api_version: Any = obj.get("apiVersion")
        self.raw = raw
        self.rev = rev
        gc_untrack(self)  # it refers to nothing that refers back: never in a cycle (see the module docstring)

    @property
    def obj(self) -> dict[str, Any]:
        """The decoded object (one dict while it is held, see the class docstring; never changed)."""
        obj = self._obj
        if obj is None:
            obj = orjson.loads(self.raw)
            if self._keep:
                self._obj = obj
        return obj

    @property
    def meta(self) -> dict[str, Any]:
        """``metadata`` without ``managedFields`` (read-only; it shares its values with :attr:`obj`)."""
        meta = self._meta
        if meta is None:
            md = self.obj.get("metadata") or {}
            meta = {k: v for k, v in md.items() if k != "managedFields"} if "managedFields" in md else md
            if self._keep:
                self._meta = meta
        return meta

    def compact(self) -> None:
        """Drop the decoded dict (the bytes and :attr:`meta` stay): the next read of :attr:`obj` decodes again."""
        self._obj = None

    def release(self) -> None:
        """The version was replaced: drop the decoded dict and :attr:`meta`; every read decodes the bytes."""
        self._obj = None
        self._meta = None
        self._keep = False


class CachedEvent:
    """A watch event: ``type`` is ADDED, MODIFIED or DELETED; ``prev`` the version it replaced.

    :attr:`line` (the event as a watch stream writes it) is built when a watcher first asks for it, once per
    event: most events of a busy resource are written by no watcher, and each line is a copy of the object.
    """

    __slots__ = ("_line", "cur", "prev", "rev", "type")

    def __init__(self, type_: str, cur: CachedObject, prev: CachedObject | None) -> None:
        self.type = type_
        self.cur = cur
        self.prev = prev
        self.rev = cur.rev
        self._line: bytes | None = None
        gc_untrack(self)  # as its objects: never in a cycle

    @property
    def line(self) -> bytes:
        """``{"type":...,"object":...}`` and a newline: the watch stream's JSON line of this event."""
        line = self._line
        if line is None:
            line = self._line = b"".join((b'{"type":"', self.type.encode(), b'","object":', self.cur.raw, b"}\n"))
        return line


class Watcher:
    """A live subscriber with a bounded buffer, woken whenever events arrive or it is closed.

    The buffer holds at most ``limit`` events and ``max_bytes`` bytes of their objects (an event alone in the
    buffer is always taken, however large): a watcher that falls further behind is closed and its buffer
    dropped at once (:attr:`overflowed`), so it pins nothing more; its client resumes from the last
    resourceVersion it received, as from any watch that ends.
    """

    __slots__ = ("buf", "bytes", "closed", "filtered", "limit", "max_bytes", "namespace", "overflowed", "wake")

    def __init__(self, namespace: str, limit: int, max_bytes: int = DEFAULT_WATCHER_BUFFER_BYTES,
                 filtered: bool = False) -> None:
        self.buf: deque[CachedEvent] = deque()
        # it reads the objects of its events (a selector): what it reads is kept decoded while it is subscribed
        self.filtered = filtered
        self.bytes = 0  # of the objects of the events in ``buf``
        self.wake = asyncio.Event()
        self.closed = False
        self.overflowed = False
        self.namespace = namespace
        self.limit = limit
        self.max_bytes = max_bytes

    def push(self, ev: CachedEvent) -> bool:
        """Queue ``ev``; returns False (and closes, dropping the buffer) when it would exceed a bound."""
        size = len(ev.cur.raw)
        if self.buf and (len(self.buf) >= self.limit or self.bytes + size > self.max_bytes):
            self.overflowed = True
            self.buf.clear()
            self.bytes = 0
            self.close()
            return False
        self.buf.append(ev)
        self.bytes += size
        self.wake.set()
        return True

    def take(self, max_bytes: int) -> list[CachedEvent]:
        """Remove and return the oldest buffered events, up to ``max_bytes`` of objects (at least one event)."""
        buf = self.buf
        out: list[CachedEvent] = []
        taken = 0
        while buf and (not out or taken + len(buf[0].cur.raw) <= max_bytes):
            ev = buf.popleft()
            taken += len(ev.cur.raw)
            out.append(ev)
        self.bytes -= taken
        return out

    def close(self) -> None:
        self.closed = True
        self.wake.set()


class Bucket:
    """Cache of one resource (all versions share one storage prefix)."""

    __slots__ = ("listeners", "objects", "prefix", "ring", "ring_start", "superseded", "watchers")

    def __init__(self, prefix: str, size: int, ring_start: int) -> None:
        self.prefix = prefix
        # the listeners a write of this bucket calls, in order; None until the next write works them out
        self.listeners: tuple[Listener, ...] | None = None
        self.objects: dict[str, CachedObject] = {}
        # key -> the version the current one replaced, still decoded for the watchers with a selector (the prev
        # of the key's newest event, while that event is in the ring; so at most one such version per event)
        self.superseded: dict[str, CachedObject] = {}
        self.ring: deque[CachedEvent] = deque()
        self.ring_start = ring_start
        self.watchers: set[Watcher] = set()

    def snapshot(self, namespace: str = "") -> list[CachedObject]:
        """Current objects (of ``namespace`` when given), in key order."""
        objs = self.objects
        if namespace:
            start = f"{self.prefix}{namespace}/"
            keys = sorted(k for k in objs if k.startswith(start))
        else:
            keys = sorted(objs)
        return [objs[k] for k in keys]


Listener = Callable[[str, CachedEvent], None]


def check_prefix(prefix: object) -> str:
    """``prefix`` itself when it is a bucket's prefix (``/registry/<group>/<plural>/``); ValueError otherwise."""
    if not isinstance(prefix, str) or not prefix.startswith(ROOT) or not prefix.endswith("/") \
            or prefix.count("/") != 4 or "//" in prefix:
        raise ValueError(f"watch cache listener prefix {prefix!r} is not of the form /registry/<group>/<plural>/")
    return prefix


def decode(key: str, value: bytes, rev: int) -> CachedObject:
    """Decode a stored value and stamp ``metadata.resourceVersion``."""
    _, ns, name = split_key(key)
    return _decode(key, ns, name, value, rev)


def _decode(key: str, ns: str, name: str, value: bytes, rev: int) -> CachedObject:
    obj = orjson.loads(value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(rev)
    return CachedObject(key, ns, name, obj, orjson.dumps(obj), rev)


class WatchCache:
    """The cache of every resource under ``/registry/``, fed by one storage watch."""

    def __init__(self, storage: Storage, size: int = 1000, watcher_buffer_events: int = DEFAULT_WATCHER_BUFFER_EVENTS,
                 watcher_buffer_bytes: int = DEFAULT_WATCHER_BUFFER_BYTES) -> None:
        self.storage = storage
        self.size = max(1, size)
        self.watcher_buffer_events = watcher_buffer_events
        self.watcher_buffer_bytes = watcher_buffer_bytes
        self.revision = 0
        self.start_revision = 0
        self.buckets: dict[str, Bucket] = {}
        # every listener with the prefixes it wants (None: every prefix), in the order they were added
        self._listeners: list[tuple[Listener, frozenset[str] | None]] = []
        # (listener, on_reset) pairs: on_reset is called after the cache had to reload everything (its event
        # stream had a gap), to rebuild what the listener derived from the events
        self._resets: list[tuple[Listener, Callable[[], None]]] = []
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        # key -> (revision, object, served bytes) a writer offered for an event not applied yet
        self._offers: dict[str, tuple[int, dict[str, Any], bytes]] = {}

    async def start(self) -> None:
        """Load the current state and start following the store."""
        await self._load()
        self._task = asyncio.create_task(self._run(), name="kinformer-watchcache")

    async def stop(self) -> None:
        """End following the store, close every watcher and drop every cached object (:meth:`start` loads them
        again): the server's controllers and the cache refer to each other, and what a cycle holds would
        otherwise wait for the cyclic collector, a whole cluster's objects at a server's end."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for bucket in self.buckets.values():
            for w in list(bucket.watchers):
                w.close()
            bucket.watchers.clear()
        self.buckets = {}
        for _, _, fut in self._waiters:
            if not fut.done():
                fut.cancel()
        self._waiters.clear()

    def add_listener(self, listener: Listener, prefixes: Iterable[str] | None = None, *,
                     on_reset: Callable[[], None] | None = None) -> None:
        """Call ``listener(prefix, event)`` for each write under one of ``prefixes`` (bucket prefixes,
        ``/registry/<group>/<plural>/``), or for every write when ``prefixes`` is None. Synchronous, on the
        cache's task, once the cache has applied the write; it must not block and should not raise.
        ``on_reset()`` is called instead of events the cache could not follow (it reloaded everything)."""
        if isinstance(prefixes, str):
            raise TypeError("watch cache listener prefixes: an iterable of prefixes, not one string")
        wanted = None if prefixes is None else frozenset(check_prefix(p) for p in prefixes)
        self._listeners.append((listener, wanted))
        if on_reset is not None:
            self._resets.append((listener, on_reset))
        self._forget_listeners()

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener`` and its ``on_reset`` (each time it was added); a no-op for one never added."""
        self._listeners = [entry for entry in self._listeners if entry[0] != listener]
        self._resets = [entry for entry in self._resets if entry[0] != listener]
        self._forget_listeners()

    @property
    def reset_listeners(self) -> tuple[Callable[[], None], ...]:
        """The ``on_reset`` callbacks of the listeners added, in order."""
        return tuple(reset for _, reset in self._resets)

    def _forget_listeners(self) -> None:
        for bucket in self.buckets.values():
            bucket.listeners = None

    def _listeners_of(self, bucket: Bucket) -> tuple[Listener, ...]:
        """The listeners a write of ``bucket`` calls, in the order they were added (kept on the bucket)."""
        prefix = bucket.prefix
        found = bucket.listeners = tuple(fn for fn, wanted in self._listeners if wanted is None or prefix in wanted)
        return found

    def offer(self, key: str, rev: int, obj: dict[str, Any], raw: bytes) -> None:
        """The writer of ``key`` at ``rev`` hands over its object (``metadata.resourceVersion`` set) and its
        served bytes (``orjson.dumps(obj)``, what decoding the stored value would give); declined when the
        cache is already past ``rev`` or holds :data:`OFFER_LIMIT` offers."""
        if rev > self.revision and len(self._offers) < OFFER_LIMIT:
            self._offers[key] = (rev, obj, raw)

    def _decode(self, key: str, ns: str, name: str, value: bytes, rev: int) -> CachedObject:
        offered = self._offers.pop(key, None) if self._offers else None
        if offered is not None and offered[0] == rev:
            return CachedObject(key, ns, name, offered[1], offered[2], rev)
        return _decode(key, ns, name, value, rev)

    async def _load(self) -> None:
        self._offers.clear()
        result = await self.storage.list(ROOT)
        self.revision = self.start_revision = result.revision
        for bucket in self.buckets.values():
            for w in list(bucket.watchers):
                w.close()
        self.buckets = {}
        for kv in result.kvs:
            try:
                prefix = split_key(kv.key)[0]
            except ValueError:
                log.warning("watch cache: ignoring key %r", kv.key)
                continue
            self.bucket(prefix).objects[kv.key] = decode(kv.key, kv.value, kv.mod_revision)
        self._release_waiters(self.revision)

    def bucket(self, prefix: str) -> Bucket:
        b = self.buckets.get(prefix)
        if b is None:
            b = self.buckets[prefix] = Bucket(prefix, self.size, self.start_revision)
        return b

    async def _run(self) -> None:
        while True:
            try:
                async for ev in self.storage.watch(ROOT, self.revision + 1):
                    self._apply(ev)
            except asyncio.CancelledError:
                raise
            except WatcherTooSlow:
                log.warning("watch cache fell behind the store; re-watching from %d", self.revision)
            except Compacted:
                log.error("watch cache history compacted at %d; reloading", self.revision)
                await self._load()
                for reset in self.reset_listeners:
                    try:
                        reset()
                    except Exception:
                        log.exception("watch cache reset listener failed")
            except Exception:
                log.exception("watch cache source failed; re-watching from %d", self.revision)
                await asyncio.sleep(0.1)
            else:
                return

    def _apply(self, ev: Event) -> None:
        kv = ev.kv
        key = kv.key
        rev = kv.mod_revision
        try:
            prefix, ns, name = split_key(key)
        except ValueError:  # not an object key (someone else's key under /registry/): nothing to serve
            log.warning("watch cache: ignoring key %r", key)
            self._advance(rev)
            return
        bucket = self.bucket(prefix)
        prev = bucket.objects.get(key)
        if not kv.value and ev.type == "DELETE":  # etcd omits the last value when its revision was compacted
            if prev is None:
                self._advance(rev)
                return
            cur = decode(key, prev.raw, rev)
        else:
            cur = self._decode(key, ns, name, kv.value, rev)
        if ev.type == "DELETE":
            bucket.objects.pop(key, None)
            cev = CachedEvent("DELETED", cur, prev)
        else:
            bucket.objects[key] = cur
            cev = CachedEvent("MODIFIED" if prev is not None else "ADDED", cur, prev)
        ring = bucket.ring
        ring.append(cev)
        if len(ring) > self.size:
            evicted = ring.popleft()
            bucket.ring_start = evicted.rev
            if evicted.prev is not None and bucket.superseded.get(evicted.cur.key) is evicted.prev:
                del bucket.superseded[evicted.cur.key]  # its key's newest event left the window
        if rev > self.revision:  # a gap probe may have advanced past an event still in flight (see wait_fresh)
            self.revision = rev
        if bucket.watchers:
            for w in list(bucket.watchers):
                if w.namespace and w.namespace != ns:
                    continue
                if not w.push(cev):
                    bucket.watchers.discard(w)
        listeners = bucket.listeners
        if listeners is None:
            listeners = self._listeners_of(bucket)
        for listener in listeners:
            try:
                listener(prefix, cev)
            except Exception:
                log.exception("watch cache listener failed")
        self._supersede(bucket, key, cev)
        waiters = self._waiters
        while waiters and waiters[0][0] <= rev:
            fut = heapq.heappop(waiters)[2]
            if not fut.done():
                fut.set_result(None)

    @staticmethod
    def _supersede(bucket: Bucket, key: str, ev: CachedEvent) -> None:
        """``ev`` (of ``key``) was applied and its listeners called: drop the decoded versions no one reads.

        While a watcher with a selector is subscribed to the bucket (rendering an event for it reads the event's
        object, and a MODIFIED event's prev too), the new version stays decoded and the one it replaced is kept
        (in ``bucket.superseded``, until the next write of ``key``); otherwise the new version is compacted and
        the replaced one released. A DELETED event's prev is never read again, its object only by such a watcher.
        """
        older = bucket.superseded.pop(key, None)
        if older is not None:
            older.release()
        watchers = bucket.watchers
        read = bool(watchers) and any(w.filtered for w in watchers)
        cur, prev = ev.cur, ev.prev
        if ev.type == "DELETED":
            if prev is not None:
                prev.release()
            if not read:
                cur.release()
            return
        if prev is not None:
            if read:
                bucket.superseded[key] = prev
            else:
                prev.release()
        if not read:
            cur.compact()

    async def wait_for(self, revision: int, timeout: float) -> bool:
        """Wait until the cache has applied ``revision``; False on timeout."""
        if self.revision >= revision:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (revision, next(self._seq), fut))
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            return False
        return True

    async def sync(self, timeout: float = 10.0) -> int:
        """Wait until the cache reflects the store's current revision (a consistent read point).

        When the store's revisions have gaps under ``/registry/`` (writes elsewhere in a shared store),
        the current revision never arrives as an event: a probe of the store's history then proves that
        nothing under ``/registry/`` is pending and the cache's revision advances to it.
        """
        rev = await self.storage.current_revision()
        if not await self.wait_fresh(rev, timeout):
            raise TimeoutError(f"watch cache did not reach revision {rev}")
        return rev

    async def wait_fresh(self, rev: int, timeout: float) -> bool:
        """Like :meth:`wait_for`, but also done when the store proves nothing under ``/registry/`` is pending
        up to ``rev`` (a revision the store has reached); False on timeout."""
        if self.revision >= rev:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if await self.wait_for(rev, min(timeout, 0.25)):
            return True
        if await self.storage.current_revision() >= rev and await self._nothing_pending(rev):
            self._advance(rev)
            return True
        return await self.wait_for(rev, max(0.0, deadline - loop.time()))

    async def _nothing_pending(self, rev: int) -> bool:
        """True when the store holds no event under ``/registry/`` in (cache revision, ``rev``].

        Only needed when something other than API servers writes to the store (with etcd, revisions
        are cluster-wide: writes outside this server's key prefix leave gaps under ``/registry/``).
        A history watch answers at once on the in-process stores; etcd hands history to a new watcher
        from its unsynced-watcher loop (every 100 ms), hence the wait. The main watch has already had
        ``wait_fresh``'s first wait to deliver any event at or below ``rev``; an event that still
        arrives later is applied normally and never moves :attr:`revision` back.
        """
        events = self.storage.watch(ROOT, self.revision + 1)
        try:
            first = await asyncio.wait_for(anext(events), 0.3)
        except TimeoutError:
            return True
        except Exception:
            return False
        finally:
            with contextlib.suppress(Exception):
                await events.aclose()  # type: ignore[attr-defined]
        return first.revision > rev

    def _advance(self, rev: int) -> None:
        if rev <= self.revision:
            return
        self.revision = rev
        self._release_waiters(rev)

    def _release_waiters(self, rev: int) -> None:
        """Resolve every :meth:`wait_for` waiting on a revision ``<= rev``."""
        waiters = self._waiters
        while waiters and waiters[0][0] <= rev:
            fut = heapq.heappop(waiters)[2]
            if not fut.done():
                fut.set_result(None)

    def subscribe(self, prefix: str, after: int, namespace: str = "",
                  filtered: bool = False) -> tuple[Watcher, list[CachedEvent]] | None:
        """Register a live watcher for events after ``after``; returns it with the ring events to replay first.

        None when ``after`` is older than the ring window (the caller falls back to storage history).
        ``filtered``: the watcher reads its events' objects (a selector), so the cache keeps them decoded.
        """
        bucket = self.bucket(prefix)
        if after < bucket.ring_start:
            return None
        replay = [ev for ev in bucket.ring if ev.rev > after and (not namespace or ev.cur.namespace == namespace)]
        w = Watcher(namespace, self.watcher_buffer_events, self.watcher_buffer_bytes, filtered)
        bucket.watchers.add(w)
        return w, replay

    def subscribe_snapshot(self, prefix: str, namespace: str = "",
                           filtered: bool = False) -> tuple[Watcher, list[CachedObject], int]:
        """Register a live watcher and return the current objects it starts from, atomically (``filtered``: as
        for :meth:`subscribe`)."""
        bucket = self.bucket(prefix)
        w = Watcher(namespace, self.watcher_buffer_events, self.watcher_buffer_bytes, filtered)
        bucket.watchers.add(w)
        return w, bucket.snapshot(namespace), self.revision

    def unsubscribe(self, prefix: str, w: Watcher) -> None:
        w.closed = True
        b = self.buckets.get(prefix)
        if b is not None:
            b.watchers.discard(w)
