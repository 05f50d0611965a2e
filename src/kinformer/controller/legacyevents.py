"""A core/v1 Event recorder (client-go's legacy ``tools/record``), the one kube-controller-manager's controllers use.

``recorder.event(obj, type, reason, message)`` (``eventf`` and ``annotated_eventf`` format the message, as
client-go's ``Eventf`` and ``AnnotatedEventf``) returns at once; the background writer of
:class:`~kinformer.controller.eventwriter.EventWriter` sends the Event. As client-go's recorder does:

* the Event is named ``<object name>.<hex nanoseconds>`` in the object's namespace (``default`` for a
  cluster-scoped object); it carries ``involvedObject`` (apiVersion, kind, namespace, name, uid,
  resourceVersion), ``source`` (``component``, and ``host`` when given), ``reportingComponent`` and
  ``reportingInstance`` (the source's component and host), ``firstTimestamp``, ``lastTimestamp``, ``count``;
* :class:`~kinformer.controller.eventcorrelator.EventCorrelator` decides what is written: the same message
  again bumps ``count`` and ``lastTimestamp`` of the first Event (a merge patch of ``count``,
  ``lastTimestamp`` and ``message``; a deleted Event is created again with its count); from the tenth
  distinct message of one reason on one object within ten minutes, one Event says
  ``(combined from similar events): <latest message>``; a source may write 25 events about an object, then
  one every five minutes.

So ``kubectl get events`` and ``kubectl describe`` show one line per distinct message with its count, as on a
cluster. Use :class:`~kinformer.controller.events.EventRecorder` (events.k8s.io/v1) for new controllers; this
one where the text must match what kube's legacy controllers write. Repeats of one Event coalesce: however
many arrive while its write is pending, the write carries the latest count.

Invariant: ``_inflight`` maps a correlation key to its entry only while that entry waits in the queue.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kinformer.clock import REAL_CLOCK, Clock

from .eventcorrelator import EventCorrelator, rfc3339
from .eventwriter import EventWriter, PendingEvent, object_reference

__all__ = ["CORE_EVENTS_RESOURCE", "LegacyEventRecorder"]

log = logging.getLogger("kinformer.controller.events")

CORE_EVENTS_RESOURCE = "v1/events"
_PATCHED = ("count", "lastTimestamp", "message")


@dataclass
class _LegacyEntry(PendingEvent):
    """A core/v1 Event to write under correlation ``key``; a repeat (count > 1) patches the fields a repeat
    changes."""

    key: tuple[str, ...] = ()

    def patch(self, body: dict[str, Any]) -> dict[str, Any] | None:
        return {f: body[f] for f in _PATCHED} if body["count"] > 1 else None


class LegacyEventRecorder(EventWriter):
    """Records core/v1 Events with source ``component`` (and ``host``) through ``client``, as client-go's
    ``record.EventRecorder`` (``EventBroadcaster.NewRecorder(scheme, v1.EventSource{Component: ...})``).

    ``async with LegacyEventRecorder(client, "deployment-controller") as recorder:`` flushes and stops on
    exit; otherwise call :meth:`close` (or :meth:`flush`) before the loop ends. :meth:`event` may be called
    from another thread once the recorder has seen its loop. The correlator's limits are client-go's defaults.
    """

    resource = CORE_EVENTS_RESOURCE

    def __init__(self, client: Any, component: str, *, host: str = "", clock: Clock = REAL_CLOCK,
                 burst: int = 25, refill_interval: float = 300.0, max_events: int = 10,
                 max_interval: float = 600.0, max_pending: int = 1000, max_cached: int = 4096,
                 max_tries: int = 12, retry_interval: float = 10.0) -> None:
        super().__init__(client, component, clock=clock, max_pending=max_pending, max_tries=max_tries,
                         retry_interval=retry_interval)
        self.host = host
        self.correlator = EventCorrelator(clock, self.names, burst=burst, refill_interval=refill_interval,
                                          max_events=max_events, max_interval=max_interval,
                                          max_cached=max_cached)
        self._inflight: dict[tuple[str, ...], _LegacyEntry] = {}

    # -- client-go's record.EventRecorder -----------------------------------------------------------------

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Record that ``reason`` happened to ``obj`` (``type`` "Normal" or "Warning"); returns at once."""
        self._submit(reason, self._record, obj, None, type, reason, message)

    def eventf(self, obj: Mapping[str, Any], type: str, reason: str, message_fmt: str, *args: Any) -> None:
        """:meth:`event` with the message ``message_fmt % args`` (formatted even without ``args``, as Go's
        ``Sprintf``: ``%%`` is ``%``)."""
        self.annotated_eventf(obj, None, type, reason, message_fmt, *args)

    def annotated_eventf(self, obj: Mapping[str, Any], annotations: Mapping[str, str] | None, type: str,
                         reason: str, message_fmt: str, *args: Any) -> None:
        """:meth:`eventf` with ``annotations`` on the Event's metadata."""
        self._submit(reason, self._record_formatted, obj, annotations, type, reason, message_fmt, args)

    # -- recording ------------------------------------------------------------------------------------

    def _record_formatted(self, obj: Mapping[str, Any], annotations: Mapping[str, str] | None, type_: str,
                          reason: str, message_fmt: str, args: tuple[Any, ...]) -> None:
        self._record(obj, annotations, type_, reason, message_fmt % args)

    def _record(self, obj: Mapping[str, Any], annotations: Mapping[str, str] | None, type_: str, reason: str,
                message: str) -> None:
        self._check_type(type_)
        ref = object_reference(obj)
        if not ref.get("name"):
            raise ValueError("the object has no metadata.name")
        event = self._make_event(ref, annotations, type_, reason, message, self.clock.wall())
        correlation = self.correlator.correlate(event)
        if correlation is None:
            return self._drop("rate limited", f"event {reason!r} on {ref['name']}: over the per-object limit "
                                              f"({self.correlator.spam_filter.burst} per "
                                              f"{self.correlator.spam_filter.refill_interval:.0f}s)")
        key, count = correlation.key, correlation.event["count"]
        entry = self._inflight.get(key)
        if entry is not None:  # its write has not started: it will carry this count
            entry.body, entry.count = correlation.event, count
        elif self._has_room(reason, ref["name"]):
            self._inflight[key] = entry = _LegacyEntry(correlation.event, count, created=count > 1, key=key)
            self._mark_dirty(entry)
        return None

    def _taken(self, entry: PendingEvent) -> None:
        if isinstance(entry, _LegacyEntry) and self._inflight.get(entry.key) is entry:
            del self._inflight[entry.key]

    def _make_event(self, ref: dict[str, str], annotations: Mapping[str, str] | None, type_: str, reason: str,
                    message: str, wall: float) -> dict[str, Any]:
        stamp = rfc3339(wall)
        metadata: dict[str, Any] = {"name": self.names.name(ref["name"], wall),
                                    "namespace": ref.get("namespace") or "default"}
        if annotations:
            metadata["annotations"] = dict(annotations)
        source = {"component": self.component, **({"host": self.host} if self.host else {})}
        log.debug("event %s %s on %s/%s: %s", type_, reason, ref.get("kind", ""), ref["name"], message)
        return {"apiVersion": "v1", "kind": "Event", "metadata": metadata, "involvedObject": ref,
                "reason": reason, "message": message, "source": source, "firstTimestamp": stamp,
                "lastTimestamp": stamp, "count": 1, "type": type_, "reportingComponent": self.component,
                "reportingInstance": self.host}
