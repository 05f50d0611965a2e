"""The Event printer, shared by core/v1 and events.k8s.io/v1 Events as in kube (which prints both as core Events)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..endpoints.table_cells import age, as_int, as_map, name_of, parse_time
from .table import NAME_DOC, Column, Doc, Printer, col

_EVENT = "api.core.v1.Event"


def _event_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The core/v1 view of an Event of either API group."""
    if "regarding" in obj or "note" in obj or "deprecatedCount" in obj or "reportingController" in obj:
        return {"involvedObject": as_map(obj.get("regarding")), "message": obj.get("note"),
                "firstTimestamp": obj.get("deprecatedFirstTimestamp"),
                "lastTimestamp": obj.get("deprecatedLastTimestamp"), "count": obj.get("deprecatedCount"),
                "source": as_map(obj.get("deprecatedSource")), "reportingComponent": obj.get("reportingController"),
                "reportingInstance": obj.get("reportingInstance"), "series": obj.get("series"),
                "eventTime": obj.get("eventTime")}
    return dict(obj)


def _event_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """LAST SEEN (series or last timestamp, else first), OBJECT as kind/name, SOURCE as component, instance."""
    ev = _event_fields(obj)
    first = age(ev.get("firstTimestamp"), now)
    if parse_time(ev.get("firstTimestamp")) is None:
        first = age(ev.get("eventTime"), now)
    last = age(ev.get("lastTimestamp"), now) if parse_time(ev.get("lastTimestamp")) is not None else first
    count = as_int(ev.get("count"))
    series = ev.get("series")
    if isinstance(series, Mapping):
        last = age(series.get("lastObservedTime"), now)
        count = as_int(series.get("count"))
    elif count == 0:
        count = 1
    inv = as_map(ev.get("involvedObject"))
    kind = str(inv.get("kind") or "").lower()
    target = f"{kind}/{inv['name']}" if inv.get("name") else kind
    src = as_map(ev.get("source"))
    component = src.get("component") or ev.get("reportingComponent") or ""
    instance = src.get("host") or ev.get("reportingInstance") or ""
    source = f"{component}, {instance}" if instance else str(component)
    return [last, str(obj.get("type") or ""), str(obj.get("reason") or ""), target, str(inv.get("fieldPath") or ""),
            source, str(ev.get("message") or "").strip(), first, count, name_of(obj)]


EVENT = Printer((
    col("Last Seen", description=Doc(_EVENT, "lastTimestamp")),
    col("Type", description=Doc(_EVENT, "type")),
    col("Reason", description=Doc(_EVENT, "reason")),
    col("Object", description=Doc(_EVENT, "involvedObject")),
    col("Subobject", priority=1, description=Doc("api.core.v1.ObjectReference", "fieldPath")),
    col("Source", priority=1, description=Doc(_EVENT, "source")),
    col("Message", description=Doc(_EVENT, "message")),
    col("First Seen", priority=1, description=Doc(_EVENT, "firstTimestamp")),
    col("Count", priority=1, description=Doc(_EVENT, "count")),
    Column("Name", "string", "name", NAME_DOC, 1),
), _event_row)
