"""client-go's ``EventCorrelator`` (``tools/record``) for core/v1 Events: aggregation, counting, spam filter.

Pure bookkeeping, no I/O: :meth:`EventCorrelator.correlate` takes a new core/v1 Event and says which Event
to write (and under which key), or that it must be skipped. In order, as client-go does:

1. *Aggregate*: events that differ only by message (same source, involved object, type, reason, reporting
   controller and instance) are tracked together; once ``max_events`` distinct messages were seen with no gap
   over ``max_interval`` seconds, the event is replaced by one whose message is
   ``"(combined from similar events): <message>"`` (no annotations, no reporting fields), keyed by the group,
   so later ones update that single Event. The set of messages never grows past ``max_events - 1``.
2. *Observe*: an event seen before under the same key (source, involved object incl. uid and fieldPath, type,
   reason, message) takes the first one's name and firstTimestamp and the next ``count``; the caller patches
   ``count``, ``lastTimestamp`` and ``message``.
3. *Filter*: every event, repeats included, takes a token from its source+object bucket (``burst``, one back
   every ``refill_interval`` seconds); an empty bucket skips it. A skipped repeat still counted, so the next
   written one carries the full count.

Every cache is an LRU of ``max_cached`` keys. Deliberate difference: a set full of messages evicts its oldest
one (client-go's ``PopAny`` evicts an arbitrary one), so the outcome is deterministic.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kinformer.clock import Clock
from kinformer.timestamps import rfc3339

from .eventwriter import EventNames, TokenBuckets

__all__ = ["COMBINED_PREFIX", "Correlation", "EventCorrelator", "rfc3339"]

COMBINED_PREFIX = "(combined from similar events): "
_OBJECT_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion")


def _source(event: Mapping[str, Any]) -> tuple[str, str]:
    source = event.get("source") or {}
    return source.get("component", ""), source.get("host", "")


def _object(event: Mapping[str, Any]) -> tuple[str, ...]:
    ref = event["involvedObject"]
    return tuple(ref.get(f, "") for f in _OBJECT_FIELDS)


def spam_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    """client-go's ``getSpamKey``: the source and the involved object."""
    return (*_source(event), *_object(event))


def event_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    """client-go's ``getEventKey``: source, involved object (with fieldPath), type, reason and message."""
    return (*spam_key(event), event["involvedObject"].get("fieldPath", ""), event["type"], event["reason"],
            event["message"])


def aggregate_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    """client-go's ``EventAggregatorByReasonFunc`` group: all but the message."""
    return (*spam_key(event), event["type"], event["reason"], event.get("reportingComponent", ""),
            event.get("reportingInstance", ""))


@dataclass
class _Aggregate:
    messages: dict[str, None] = field(default_factory=dict)  # an ordered set
    last_seen: float = 0.0  # monotonic seconds


@dataclass
class _Observation:
    count: int
    first_timestamp: str
    name: str


@dataclass(frozen=True)
class Correlation:
    """The Event to write for one ``event(...)`` call and the key its repeats share (``count`` > 1: a repeat)."""

    key: tuple[str, ...]
    event: dict[str, Any]


class EventCorrelator:
    """Aggregates, counts and rate-limits core/v1 Events as client-go's ``NewEventCorrelator`` does."""

    def __init__(self, clock: Clock, names: EventNames, *, burst: int = 25, refill_interval: float = 300.0,
                 max_events: int = 10, max_interval: float = 600.0, max_cached: int = 4096) -> None:
        if max_events < 1 or burst < 1 or max_cached < 1:
            raise ValueError("max_events, burst and max_cached must be >= 1")
        self.clock, self.names = clock, names
        self.max_events, self.max_interval, self.max_cached = max_events, max_interval, max_cached
        self.spam_filter = TokenBuckets(burst, refill_interval, max_cached)
        self._aggregates: OrderedDict[tuple[str, ...], _Aggregate] = OrderedDict()
        self._observed: OrderedDict[tuple[str, ...], _Observation] = OrderedDict()

    def correlate(self, event: dict[str, Any]) -> Correlation | None:
        """What to write for the new ``event`` (not modified), or None when the spam filter skips it."""
        now = self.clock.now()
        aggregated, key = self._aggregate(event, now)
        observed = self._observe(aggregated, key)
        if not self.spam_filter.take(spam_key(observed), now):
            return None
        return Correlation(key, observed)

    def _aggregate(self, event: dict[str, Any], now: float) -> tuple[dict[str, Any], tuple[str, ...]]:
        group = aggregate_key(event)
        record = self._aggregates.get(group)
        if record is None or now - record.last_seen > self.max_interval:
            record = _Aggregate()
        record.messages[event["message"]] = None
        record.last_seen = now
        _lru_put(self._aggregates, group, record, self.max_cached)
        if len(record.messages) < self.max_events:
            return event, event_key(event)
        del record.messages[next(iter(record.messages))]
        return self._combined(event), group

    def _combined(self, event: dict[str, Any]) -> dict[str, Any]:
        wall = self.clock.wall()
        ref = event["involvedObject"]
        stamp = rfc3339(wall)
        return {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": self.names.name(ref["name"], wall),
                             "namespace": event["metadata"]["namespace"]},
                "involvedObject": ref, "reason": event["reason"], "message": COMBINED_PREFIX + event["message"],
                "source": event["source"], "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
                "type": event["type"], "reportingComponent": "", "reportingInstance": ""}

    def _observe(self, event: dict[str, Any], key: tuple[str, ...]) -> dict[str, Any]:
        event = dict(event)
        last = self._observed.get(key)
        if last is not None:
            event["metadata"] = {**event["metadata"], "name": last.name}
            event["firstTimestamp"] = last.first_timestamp
            event["count"] = last.count + 1
        _lru_put(self._observed, key, _Observation(event["count"], event["firstTimestamp"],
                                                   event["metadata"]["name"]), self.max_cached)
        return event


def _lru_put(cache: OrderedDict[Any, Any], key: Any, value: Any, limit: int) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > limit:
        cache.popitem(last=False)
