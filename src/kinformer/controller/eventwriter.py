"""What both event recorders share: recording from any thread, the bounded queue of writes, the background
writer with its retries, per-object token buckets, Event names, and flush/close.

A recorder (:class:`~kinformer.controller.events.EventRecorder` for events.k8s.io/v1,
:class:`~kinformer.controller.legacyevents.LegacyEventRecorder` for core/v1) subclasses :class:`EventWriter`:
it turns an ``event(...)`` call into a :class:`PendingEvent` and hands it to :meth:`EventWriter._mark_dirty`;
the writer sends it, creating the Event or patching the one already on the server.

Invariants: an entry is in ``_pending`` at most once, exactly while its ``dirty`` flag is set (the writer
clears the flag when it takes the entry, so a change made during the write queues it again); at most one
writer task exists, and it ends when ``_pending`` is empty (so a recorder nobody closes leaves no task
behind); :meth:`EventWriter.flush` returns once every event recorded before it was written or given up.
Nothing raises into the caller: a bad event, a full queue or a failed write is logged and counted.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from kinformer.clock import Clock
from kinformer.errors import AlreadyExists, APIError, NotFound
from kinformer.timestamps import micro_time

__all__ = ["EVENT_TYPES", "EventNames", "EventWriter", "PendingEvent", "RecorderStats", "TokenBuckets",
           "micro_time", "object_reference"]

log = logging.getLogger("kinformer.controller.events")

EVENT_TYPES = ("Normal", "Warning")


def object_reference(obj: Mapping[str, Any]) -> dict[str, str]:
    """A core/v1 ObjectReference to ``obj`` (apiVersion, kind, namespace, name, uid, resourceVersion)."""
    meta = obj.get("metadata") or {}
    ref = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "namespace": meta.get("namespace"),
           "name": meta.get("name"), "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
    return {k: v for k, v in ref.items() if v}


class EventNames:
    """Event names as client-go makes them, ``<object name>.<hex nanoseconds>``, strictly increasing per
    recorder so two events in one clock tick never collide."""

    def __init__(self) -> None:
        self.last_ns = 0

    def name(self, object_name: str, wall: float) -> str:
        nanos = max(int(wall * 1e9), self.last_ns + 1)
        self.last_ns = nanos
        return f"{object_name}.{nanos:x}"


@dataclass
class _Bucket:
    tokens: float
    at: float


class TokenBuckets:
    """One token bucket per key (client-go's ``EventSourceObjectSpamFilter``): a bucket starts full with
    ``burst`` tokens and gets one back every ``refill_interval`` seconds; at most ``max_keys`` buckets are
    kept (least recently used dropped)."""

    def __init__(self, burst: int, refill_interval: float, max_keys: int) -> None:
        self.burst, self.refill_interval, self.max_keys = burst, refill_interval, max_keys
        self._buckets: OrderedDict[Any, _Bucket] = OrderedDict()

    def take(self, key: Any, now: float) -> bool:
        """Take a token from ``key``'s bucket at monotonic time ``now``; False when it is empty."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.burst), now)
            while len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            refill = (now - bucket.at) / self.refill_interval if self.refill_interval > 0 else float(self.burst)
            bucket.tokens = min(float(self.burst), bucket.tokens + refill)
            bucket.at = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True


@dataclass
class PendingEvent:
    """An Event to write. ``created``: it may already exist on the server, so a repeat is a patch."""

    body: dict[str, Any]
    count: int = 1
    created: bool = False
    dirty: bool = False  # True iff the entry is in its writer's _pending

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    def snapshot(self) -> dict[str, Any]:
        """The Event to create, as of now."""
        return dict(self.body)

    def patch(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The merge patch that brings an existing Event to ``body``; None for a first occurrence."""
        return None


@dataclass
class RecorderStats:
    """Counts of what the recorder did (``reasons``: dropped events by cause)."""

    written: int = 0
    dropped: int = 0
    failed: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


class EventWriter:
    """The background writer of a recorder reporting as ``component`` through ``client``."""

    resource: ClassVar[str]

    def __init__(self, client: Any, component: str, *, clock: Clock, max_pending: int, max_tries: int,
                 retry_interval: float) -> None:
        if not component:
            raise ValueError(f"a {type(self).__name__} needs a component name (the reporting controller)")
        if max_pending < 1 or max_tries < 1:
            raise ValueError(f"max_pending and max_tries must be >= 1, got {max_pending} and {max_tries}")
        self.client, self.component, self.clock = client, component, clock
        self.max_pending, self.max_tries, self.retry_interval = max_pending, max_tries, retry_interval
        self.stats = RecorderStats()
        self.names = EventNames()
        self._pending: deque[PendingEvent] = deque()
        self._writer: asyncio.Task[None] | None = None
        self._closed = False
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    @property
    def dropped(self) -> int:
        """Events not written: over the per-object rate limit, the queue bound, rejected or out of retries."""
        return self.stats.dropped

    # -- recording ------------------------------------------------------------------------------------

    def _submit(self, reason: str, record: Callable[..., None], *args: Any) -> None:
        """Run ``record(*args)`` on the recorder's loop: now when called on it, else soon (thread-safe)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            self._loop = loop
            self._guarded(reason, record, *args)
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._guarded, reason, record, *args)
        else:
            self._drop("no event loop", f"event {reason!r} recorded outside any event loop")

    def _guarded(self, reason: str, record: Callable[..., None], *args: Any) -> None:
        if self._closed:
            return self._drop("closed", f"event {reason!r} recorded after close()")
        try:
            record(*args)
        except Exception as exc:  # bad input must never reach the reconciler
            self._drop("invalid", f"event {reason!r}: {exc}")
        return None

    def _check_type(self, type_: str) -> None:
        if type_ not in EVENT_TYPES:
            raise ValueError(f"event type {type_!r} is not one of {EVENT_TYPES}")

    def _has_room(self, reason: str, object_name: str) -> bool:
        """False (and the event counted as dropped) when ``max_pending`` writes are already queued."""
        if len(self._pending) < self.max_pending:
            return True
        self._drop("queue full", f"event {reason!r} on {object_name}: {self.max_pending} writes already pending")
        return False

    def _mark_dirty(self, entry: PendingEvent) -> None:
        """Queue ``entry`` for writing (once) and make sure the writer runs."""
        if not entry.dirty:
            entry.dirty = True
            self._pending.append(entry)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_pending(),
                                                                  name=f"event-recorder-{self.component}")

    def _taken(self, entry: PendingEvent) -> None:
        """Called as the writer takes ``entry`` from the queue (a later change queues it again)."""

    def _drop(self, why: str, message: str) -> None:
        self.stats.dropped += 1
        self.stats.reasons[why] = self.stats.reasons.get(why, 0) + 1
        # the per-object spam filter drops quietly, as client-go's EventCorrelator does (a controller creating
        # hundreds of pods would otherwise log a line per pod); the stats still count every drop
        level = logging.DEBUG if why == "rate limited" else logging.WARNING
        log.log(level, "event recorder %s: dropped an event (%s): %s", self.component, why, message)

    # -- writing --------------------------------------------------------------------------------------

    async def _write_pending(self) -> None:
        pending = self._pending
        while pending:
            entry = pending.popleft()
            entry.dirty = False
            self._taken(entry)
            try:
                await self._write_with_retries(entry)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let the writer die with work queued
                self.stats.failed += 1
                log.error("event recorder %s: writing event %s failed: %s", self.component, entry.name, exc,
                          exc_info=True)

    async def _write_with_retries(self, entry: PendingEvent) -> None:
        for attempt in range(1, self.max_tries + 1):
            body = entry.snapshot()
            try:
                await self._write(entry, body)
                self.stats.written += 1
                return
            except APIError as exc:
                if exc.code < 500 and exc.code != 429:
                    self._drop("rejected", f"the server rejected event {entry.name}: {exc}")
                    return
                error: Exception = exc
            except Exception as exc:  # connection errors, timeouts, aiohttp's client errors: transient
                error = exc
            if attempt == self.max_tries:
                break
            log.info("event recorder %s: writing event %s failed (%s); retry %d/%d", self.component,
                     entry.name, error, attempt, self.max_tries - 1)
            await self.clock.sleep(self.retry_interval * random.uniform(0.75, 1.25))
        self._drop("retries exhausted", f"event {entry.name} after {self.max_tries} tries")

    async def _write(self, entry: PendingEvent, body: dict[str, Any]) -> None:
        """Patch the Event when it may exist (create it if it does not), else create it (patch it if it does)."""
        meta = body["metadata"]
        patch = entry.patch(body)
        if entry.created and patch is not None:
            try:
                await self.client.patch(self.resource, meta["name"], patch, namespace=meta["namespace"])
                return
            except NotFound:
                pass  # the Event expired or was deleted: create it again, with its count
        try:
            await self.client.create(self.resource, body, namespace=meta["namespace"])
        except AlreadyExists:
            if patch is None:
                raise
            await self.client.patch(self.resource, meta["name"], patch, namespace=meta["namespace"])
        entry.created = True

    # -- lifecycle ------------------------------------------------------------------------------------

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every event recorded so far is written (or given up); False if ``timeout`` passed first."""
        self._loop = asyncio.get_running_loop()
        await asyncio.sleep(0)  # let events scheduled from other threads land
        try:
            async with asyncio.timeout(timeout):
                while self._writer is not None and not self._writer.done():
                    await asyncio.shield(self._writer)
        except TimeoutError:
            log.warning("event recorder %s: %d events still unwritten after %.1fs", self.component,
                        len(self._pending), timeout)
            return False
        return True

    async def close(self, timeout: float | None = 10.0) -> None:
        """Flush (at most ``timeout`` seconds), then stop: later events are dropped."""
        await self.flush(timeout)
        self._closed = True
        writer = self._writer
        if writer is not None and not writer.done():
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)

    async def __aenter__(self) -> Self:
        self._loop = asyncio.get_running_loop()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.component} pending={len(self._pending)} written={self.stats.written}>"
