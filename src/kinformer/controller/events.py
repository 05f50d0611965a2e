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

kube-controller-manager's controllers use client-go's other recorder, ``tools/record``, writing core/v1
Events keyed by their message: that is :class:`~kinformer.controller.legacyevents.LegacyEventRecorder`. The
queue, the writer and its retries are :mod:`kinformer.controller.eventwriter`'s, shared by both.

Invariant: ``_cache`` holds at most ``max_cached`` entries (least recently observed evicted; an evicted entry
still pending is written all the same).
"""

from __future__ import annotations

import logging
import socket
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kinformer.clock import REAL_CLOCK, Clock

from .eventwriter import (
    EVENT_TYPES,
    EventWriter,
    PendingEvent,
    RecorderStats,
    TokenBuckets,
    micro_time,
    object_reference,
)

__all__ = ["EVENT_TYPES", "EventRecorder", "RecorderStats", "object_reference"]

log = logging.getLogger(__name__)

EVENTS_RESOURCE = "events.k8s.io/v1/events"
MAX_NOTE_BYTES = 1024  # events.k8s.io validation: note is at most 1 kB
MAX_REASON_CHARS = 128  # ... reason and action at most 128 characters
_REF_FIELDS = ("apiVersion", "kind", "namespace", "name", "uid")


def _ref_key(ref: Mapping[str, str] | None) -> tuple[str, ...]:
    return tuple(ref.get(f, "") for f in _REF_FIELDS) if ref else ()


def _truncate_utf8(text: str, limit: int) -> str:
    data = text.encode()
    return text if len(data) <= limit else data[:limit].decode(errors="ignore")


@dataclass
class _Entry(PendingEvent):
    """One Event as the recorder believes it is on the server; a repeat makes it a series."""

    last_observed: float = 0.0  # wall seconds
    observed_at: float = 0.0  # monotonic seconds, for expiry

    def snapshot(self) -> dict[str, Any]:
        body = dict(self.body)
        if self.count > 1:
            body["series"] = {"count": self.count, "lastObservedTime": micro_time(self.last_observed)}
        return body

    def patch(self, body: dict[str, Any]) -> dict[str, Any] | None:
        return {"series": body["series"]} if "series" in body else None


class EventRecorder(EventWriter):
    """Records events.k8s.io/v1 Events for ``component`` (the ``reportingController``) through ``client``.

    ``async with EventRecorder(client, "copier") as recorder:`` flushes and stops on exit; otherwise call
    :meth:`close` (or :meth:`flush`) before the loop ends. :meth:`event` may be called from the event loop
    or from another thread (plain reconcilers run in threads) once the recorder has seen its loop.
    """

    resource = EVENTS_RESOURCE

    def __init__(self, client: Any, component: str, *, instance: str | None = None, clock: Clock = REAL_CLOCK,
                 burst: int = 25, refill_interval: float = 300.0, max_pending: int = 1000,
                 max_cached: int = 4096, series_expiry: float = 360.0, max_tries: int = 12,
                 retry_interval: float = 10.0) -> None:
        super().__init__(client, component, clock=clock, max_pending=max_pending, max_tries=max_tries,
                         retry_interval=retry_interval)
        self.instance = instance or f"{component}-{socket.gethostname()}"
        self.max_cached = max_cached
        self.series_expiry = series_expiry
        self._cache: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
        self._buckets = TokenBuckets(burst, refill_interval, max_cached)

    # -- recording ------------------------------------------------------------------------------------

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, *,
              action: str | None = None, related: Mapping[str, Any] | None = None) -> None:
        """Record that ``reason`` happened to ``obj`` (``type`` "Normal" or "Warning"); returns at once.

        ``action`` (what was done, default: ``reason``) and ``related`` (a second object) are optional.
        """
        self._submit(reason, self._record, obj, type, reason, message, action or reason, related)

    def _record(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, action: str,
                related: Mapping[str, Any] | None) -> None:
        self._check_type(type_)
        if not reason or len(reason) > MAX_REASON_CHARS or len(action) > MAX_REASON_CHARS:
            raise ValueError(f"event reason/action must be 1-{MAX_REASON_CHARS} characters")
        regarding = object_reference(obj)
        if not regarding.get("name"):
            raise ValueError("the object has no metadata.name")
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
            return self._mark_dirty(entry)
        if not self._has_room(reason, regarding["name"]):
            return None
        if not self._buckets.take(_ref_key(regarding), now):
            b = self._buckets
            return self._drop("rate limited", f"event {reason!r} on {regarding['name']}: over the per-object "
                                              f"limit ({b.burst} per {b.refill_interval:.0f}s)")
        body = self._new_event(regarding, related_ref, type_, reason, action, message, wall)
        self._cache[key] = entry = _Entry(body, last_observed=wall, observed_at=now)
        while len(self._cache) > self.max_cached:
            self._cache.popitem(last=False)
        return self._mark_dirty(entry)

    def _new_event(self, regarding: dict[str, str], related: dict[str, str] | None, type_: str, reason: str,
                   action: str, message: str, wall: float) -> dict[str, Any]:
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": self.names.name(regarding["name"], wall),
                         "namespace": regarding.get("namespace") or "default"},
            "eventTime": micro_time(wall), "reportingController": self.component,
            "reportingInstance": self.instance, "action": action, "reason": reason, "type": type_,
            "regarding": regarding, "note": _truncate_utf8(message, MAX_NOTE_BYTES)}
        if related:
            body["related"] = related
        log.debug("event %s %s on %s/%s: %s", type_, reason, regarding.get("kind", ""), regarding["name"], message)
        return body

    def _expire(self, now: float) -> None:
        """Forget series (and single events) not observed for ``series_expiry`` seconds (oldest first)."""
        cache = self._cache
        while cache:
            key, entry = next(iter(cache.items()))
            if now - entry.observed_at < self.series_expiry or entry.dirty:
                return
            del cache[key]
