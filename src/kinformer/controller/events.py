"""An events.k8s.io/v1 Event recorder (client-go ``tools/events``), asyncio-first.

``recorder.event(obj, type, reason, message)`` returns at once; a background writer, owned by the recorder,
sends the Events to the API server. As client-go's recorder does:

* an Event names the object it is about in ``regarding`` and its author in ``reportingController`` (the
  component) and ``reportingInstance`` (component-hostname); it lives in the object's namespace
  (``default`` for cluster-scoped objects) and is named ``<object name>.<hex nanoseconds>``;
* the same event again (same type, reason, action, regarding, related, reporting controller/instance) is
  aggregated: the first repeat turns the Event into a ``series`` (count 2, lastObservedTime), later ones
  raise the count. Writes of one series coalesce: however many repeats arrive while a write is pending, the
  next write carries the latest count. A series not observed for ``series_expiry`` seconds is forgotten,
  so its next occurrence is a new Event;
* a write failing for a transient reason (connection, 5xx, 429) is retried ``max_tries`` times,
  ``retry_interval`` apart (jittered); one the server rejects (4xx) is logged and dropped.

Deliberate differences: the aggregation key ignores the object's resourceVersion (client-go's includes it,
so every change of the object started a new Event); distinct events are rate-limited per object by a token
bucket (``burst``, one token back every ``refill_interval`` seconds: client-go's legacy spam-filter
defaults 25 and 300 s), and events over the limit or over ``max_pending`` queued writes are dropped and
counted in :attr:`EventRecorder.dropped`. Nothing here raises into the caller: failures are logged.

Invariants: every key in ``_pending`` has its entry in ``_cache`` with ``dirty`` set, and appears once;
at most one writer task exists, and it ends when ``_pending`` is empty (so a recorder nobody closes leaves
no task behind); :meth:`flush` returns once every event recorded before it was written or given up.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kinformer.clock import REAL_CLOCK, Clock
from kinformer.errors import AlreadyExists, APIError, NotFound

__all__ = ["EVENT_TYPES", "EventRecorder", "RecorderStats", "object_reference"]

log = logging.getLogger(__name__)

EVENTS_RESOURCE = "events.k8s.io/v1/events"
EVENT_TYPES = ("Normal", "Warning")
MAX_NOTE_BYTES = 1024  # events.k8s.io validation: note is at most 1 kB
MAX_REASON_CHARS = 128  # ... reason and action at most 128 characters
_REF_FIELDS = ("apiVersion", "kind", "namespace", "name", "uid")


def micro_time(wall: float) -> str:
    """metav1.MicroTime in RFC 3339 with microseconds."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def object_reference(obj: Mapping[str, Any]) -> dict[str, str]:
    """A core/v1 ObjectReference to ``obj`` (apiVersion, kind, namespace, name, uid, resourceVersion)."""
    meta = obj.get("metadata") or {}
    ref = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "namespace": meta.get("namespace"),
           "name": meta.get("name"), "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
    return {k: v for k, v in ref.items() if v}


def _ref_key(ref: Mapping[str, str] | None) -> tuple[str, ...]:
    return tuple(ref.get(f, "") for f in _REF_FIELDS) if ref else ()


def _truncate_utf8(text: str, limit: int) -> str:
    data = text.encode()
    return text if len(data) <= limit else data[:limit].decode(errors="ignore")


@dataclass
class _Entry:
    """One Event as the recorder believes it is on the server."""

    body: dict[str, Any]
    count: int = 1
    last_observed: float = 0.0  # wall seconds
    observed_at: float = 0.0  # monotonic seconds, for expiry
    created: bool = False
    dirty: bool = False  # True iff its key is in the recorder's _pending

    def snapshot(self) -> dict[str, Any]:
        body = dict(self.body)
        if self.count > 1:
            body["series"] = {"count": self.count, "lastObservedTime": micro_time(self.last_observed)}
        return body


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class RecorderStats:
    """Counts of what the recorder did (``reasons``: dropped events by cause)."""

    written: int = 0
    dropped: int = 0
    failed: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


class EventRecorder:
    """Records events.k8s.io/v1 Events for ``component`` (the ``reportingController``) through ``client``.

    ``async with EventRecorder(client, "copier") as recorder:`` flushes and stops on exit; otherwise call
    :meth:`close` (or :meth:`flush`) before the loop ends. :meth:`event` may be called from the event loop
    or from another thread (plain reconcilers run in threads) once the recorder has seen its loop.
    """

    def __init__(self, client: Any, component: str, *, instance: str | None = None, clock: Clock = REAL_CLOCK,
                 burst: int = 25, refill_interval: float = 300.0, max_pending: int = 1000,
                 max_cached: int = 4096, series_expiry: float = 360.0, max_tries: int = 12,
                 retry_interval: float = 10.0) -> None:
        if not component:
            raise ValueError("an EventRecorder needs a component name (the reportingController)")
        self.client = client
        self.component = component
        self.instance = instance or f"{component}-{socket.gethostname()}"
        self.clock = clock
        self.burst, self.refill_interval = burst, refill_interval
        self.max_pending, self.max_cached = max_pending, max_cached
        self.series_expiry = series_expiry
        self.max_tries, self.retry_interval = max_tries, retry_interval
        self.stats = RecorderStats()
        self._cache: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
        self._buckets: OrderedDict[tuple[str, ...], _Bucket] = OrderedDict()
        self._pending: deque[tuple[Any, ...]] = deque()
        self._writer: asyncio.Task[None] | None = None
        self._last_ns = 0
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

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, *,
              action: str | None = None, related: Mapping[str, Any] | None = None) -> None:
        """Record that ``reason`` happened to ``obj`` (``type`` "Normal" or "Warning"); returns at once.

        ``action`` (what was done, default: ``reason``) and ``related`` (a second object) are optional.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            self._loop = loop
            self._record(obj, type, reason, message, action, related)
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._record, obj, type, reason, message, action, related)
        else:
            self._drop("no event loop", f"event {reason!r} recorded outside any event loop")

    def _record(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, action: str | None,
                related: Mapping[str, Any] | None) -> None:
        try:
            self._record_unsafe(obj, type_, reason, message, action or reason, related)
        except Exception as exc:  # bad input must never reach the reconciler
            self._drop("invalid", f"event {reason!r}: {exc}")

    def _record_unsafe(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, action: str,
                       related: Mapping[str, Any] | None) -> None:
        if self._closed:
            return self._drop("closed", f"event {reason!r} recorded after close()")
        if type_ not in EVENT_TYPES:
            return self._drop("invalid", f"event type {type_!r} is not one of {EVENT_TYPES}")
        if not reason or len(reason) > MAX_REASON_CHARS or len(action) > MAX_REASON_CHARS:
            return self._drop("invalid", f"event reason/action must be 1-{MAX_REASON_CHARS} characters")
        regarding = object_reference(obj)
        if not regarding.get("name"):
            return self._drop("invalid", f"event {reason!r}: the object has no metadata.name")
        related_ref = object_reference(related) if related is not None else None
        key = (type_, action, reason, _ref_key(regarding), _ref_key(related_ref))
        now, wall = self.clock.now(), self.clock.wall()
        self._expire(now)
        entry = self._cache.get(key)
        if entry is not None:
            entry.count += 1
            entry.last_observed, entry.observed_at = wall, now
            entry.body["note"] = _truncate_utf8(message, MAX_NOTE_BYTES)
            self._cache.move_to_end(key)
            self._mark_dirty(key, entry)
            return None
        if len(self._pending) >= self.max_pending:
            return self._drop("queue full", f"event {reason!r} on {regarding['name']}: {self.max_pending} "
                                            "writes already pending")
        if not self._take_token(_ref_key(regarding), now):
            return self._drop("rate limited", f"event {reason!r} on {regarding['name']}: over the per-object "
                                              f"limit ({self.burst} per {self.refill_interval:.0f}s)")
        body = self._new_event(regarding, related_ref, type_, reason, action, message, wall)
        self._cache[key] = entry = _Entry(body, last_observed=wall, observed_at=now)
        while len(self._cache) > self.max_cached:
            _, evicted = self._cache.popitem(last=False)
            if evicted.dirty:
                self._drop("cache full", f"event {evicted.body['metadata']['name']} evicted before its write")
        self._mark_dirty(key, entry)
        return None

    def _new_event(self, regarding: dict[str, str], related: dict[str, str] | None, type_: str, reason: str,
                   action: str, message: str, wall: float) -> dict[str, Any]:
        nanos = max(int(wall * 1e9), self._last_ns + 1)
        self._last_ns = nanos
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": f"{regarding['name']}.{nanos:x}",
                         "namespace": regarding.get("namespace") or "default"},
            "eventTime": micro_time(wall), "reportingController": self.component,
            "reportingInstance": self.instance, "action": action, "reason": reason, "type": type_,
            "regarding": regarding, "note": _truncate_utf8(message, MAX_NOTE_BYTES)}
        if related:
            body["related"] = related
        log.debug("event %s %s on %s/%s: %s", type_, reason, regarding.get("kind", ""), regarding["name"], message)
        return body

    def _take_token(self, ref: tuple[str, ...], now: float) -> bool:
        bucket = self._buckets.get(ref)
        if bucket is None:
            bucket = self._buckets[ref] = _Bucket(float(self.burst), now)
            while len(self._buckets) > self.max_cached:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(ref)
            refill = (now - bucket.at) / self.refill_interval if self.refill_interval > 0 else float(self.burst)
            bucket.tokens = min(float(self.burst), bucket.tokens + refill)
            bucket.at = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def _expire(self, now: float) -> None:
        """Forget series (and single events) not observed for ``series_expiry`` seconds (oldest first)."""
        cache = self._cache
        while cache:
            key, entry = next(iter(cache.items()))
            if now - entry.observed_at < self.series_expiry or entry.dirty:
                return
            del cache[key]

    def _mark_dirty(self, key: tuple[Any, ...], entry: _Entry) -> None:
        if not entry.dirty:
            entry.dirty = True
            self._pending.append(key)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_pending(),
                                                                  name=f"event-recorder-{self.component}")

    def _drop(self, why: str, message: str) -> None:
        self.stats.dropped += 1
        self.stats.reasons[why] = self.stats.reasons.get(why, 0) + 1
        log.warning("event recorder %s: dropped an event (%s): %s", self.component, why, message)

    # -- writing --------------------------------------------------------------------------------------

    async def _write_pending(self) -> None:
        pending = self._pending
        while pending:
            entry = self._cache.get(pending.popleft())
            if entry is None or not entry.dirty:
                continue  # evicted (and counted) meanwhile
            entry.dirty = False
            try:
                await self._write_with_retries(entry)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let the writer die with work queued
                self.stats.failed += 1
                log.error("event recorder %s: writing event %s failed: %s", self.component,
                          entry.body["metadata"]["name"], exc, exc_info=True)

    async def _write_with_retries(self, entry: _Entry) -> None:
        for attempt in range(1, self.max_tries + 1):
            body = entry.snapshot()
            try:
                await self._write(entry, body)
                self.stats.written += 1
                return
            except APIError as exc:
                if exc.code < 500 and exc.code != 429:
                    self._drop("rejected", f"the server rejected event {body['metadata']['name']}: {exc}")
                    return
                error: Exception = exc
            except (OSError, TimeoutError) as exc:
                error = exc
            except Exception as exc:  # aiohttp's client errors and the like: transient
                error = exc
            if attempt == self.max_tries:
                break
            log.info("event recorder %s: writing event %s failed (%s); retry %d/%d", self.component,
                     body["metadata"]["name"], error, attempt, self.max_tries - 1)
            await self.clock.sleep(self.retry_interval * random.uniform(0.75, 1.25))
        self._drop("retries exhausted", f"event {entry.body['metadata']['name']} after {self.max_tries} tries")

    async def _write(self, entry: _Entry, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        if entry.created and "series" in body:
            try:
                await self.client.patch(EVENTS_RESOURCE, meta["name"], {"series": body["series"]},
                                        namespace=meta["namespace"])
                return
            except NotFound:
                pass  # the Event expired or was deleted: create it again, series included
        try:
            await self.client.create(EVENTS_RESOURCE, body, namespace=meta["namespace"])
        except AlreadyExists:
            if "series" not in body:
                raise
            await self.client.patch(EVENTS_RESOURCE, meta["name"], {"series": body["series"]},
                                    namespace=meta["namespace"])
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

    async def __aenter__(self) -> EventRecorder:
        self._loop = asyncio.get_running_loop()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<EventRecorder {self.component} pending={len(self._pending)} written={self.stats.written}>"
