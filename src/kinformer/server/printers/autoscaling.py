"""The HorizontalPodAutoscaler printer (autoscaling/v2, and v1 read the way kube converts it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..endpoints.table_cells import NONE, UNKNOWN, UNSET, age_of, as_int, as_map, field, mappings, name_of, quantity
from .table import AGE, NAME, Doc, Printer, col

_HPA = "api.autoscaling.v2.HorizontalPodAutoscaler"
_SOURCES = {"External": "external", "Pods": "pods", "Object": "object", "Resource": "resource",
            "ContainerResource": "containerResource"}


def _v2_metrics(obj: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(spec metrics, current metrics) in the v2 shape; a v1 object's CPU target becomes a Resource metric."""
    spec = as_map(obj.get("spec"))
    status = as_map(obj.get("status"))
    if obj.get("apiVersion") != "autoscaling/v1" and "targetCPUUtilizationPercentage" not in spec:
        return mappings(spec.get("metrics")), mappings(status.get("currentMetrics"))
    target = spec.get("targetCPUUtilizationPercentage")
    # The v1 object is stored as v2, whose defaulting gives a target-less autoscaler 80 % CPU.
    specs: list[Mapping[str, Any]] = [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 80 if target is None else as_int(target)}}}]
    current = status.get("currentCPUUtilizationPercentage")
    statuses: list[Mapping[str, Any]] = [] if current is None else [{"type": "Resource", "resource": {
        "name": "cpu", "current": {"averageUtilization": as_int(current)}}}]
    return specs, statuses


def _qty(value: Any) -> str:
    return quantity(value, missing="<nil>")


def _average_or_value(spec: Mapping[str, Any], current: Mapping[str, Any] | None) -> str:
    """``current/target (avg)`` for an AverageValue target, ``current/target`` for a Value target."""
    target = as_map(spec.get("target"))
    cur = as_map(as_map(current).get("current"))
    if target.get("averageValue") is not None:
        now = _qty(cur.get("averageValue")) if current is not None and cur.get("averageValue") is not None \
            else UNKNOWN
        return f"{now}/{_qty(target['averageValue'])} (avg)"
    now = _qty(cur.get("value")) if current is not None else UNKNOWN
    return f"{now}/{_qty(target.get('value'))}"


def _resource(spec: Mapping[str, Any], current: Mapping[str, Any] | None) -> str:
    """``name: current/target`` of a (container) resource metric: average values or utilization percentages."""
    target = as_map(spec.get("target"))
    cur = as_map(as_map(current).get("current"))
    name = str(spec.get("name") or "")
    if target.get("averageValue") is not None:
        now = _qty(cur.get("averageValue")) if current is not None else UNKNOWN
        return f"{name}: {now}/{_qty(target['averageValue'])}"
    now = f"{as_int(cur['averageUtilization'])}%" if cur.get("averageUtilization") is not None else UNKNOWN
    goal = f"{as_int(target['averageUtilization'])}%" if target.get("averageUtilization") is not None else "<auto>"
    return f"{name}: {now}/{goal}"


def _metric(spec: Mapping[str, Any], status: Mapping[str, Any] | None) -> str:
    key = _SOURCES.get(str(spec.get("type")))
    if key is None:
        return "<unknown type>"
    source = as_map(spec.get(key))
    current = status.get(key) if status is not None and isinstance(status.get(key), Mapping) else None
    if key == "pods":
        now = _qty(field(current, "current", "averageValue")) if current is not None else UNKNOWN
        return f"{now}/{_qty(field(source, 'target', 'averageValue'))}"
    if key in ("resource", "containerResource"):
        return _resource(source, current)
    return _average_or_value(source, current)


def hpa_targets(obj: Mapping[str, Any]) -> str:
    """TARGETS: ``current/target`` per metric (statuses matched by position), two shown and how many more."""
    specs, statuses = _v2_metrics(obj)
    if not specs:
        return NONE
    shown = [_metric(s, statuses[i] if i < len(statuses) else None) for i, s in enumerate(specs)]
    joined = ", ".join(shown[:2])
    return f"{joined} + {len(shown) - 2} more..." if len(shown) > 2 else joined


def _hpa_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    spec = as_map(obj.get("spec"))
    ref = as_map(spec.get("scaleTargetRef"))
    min_pods = spec.get("minReplicas")
    return [name_of(obj), f"{ref.get('kind') or ''}/{ref.get('name') or ''}", hpa_targets(obj),
            UNSET if min_pods is None else str(as_int(min_pods)), as_int(spec.get("maxReplicas")),
            as_int(field(obj, "status", "currentReplicas")), age_of(obj, now)]


HORIZONTALPODAUTOSCALER = Printer((
    NAME,
    col("Reference", description=Doc(_HPA + "Spec", "scaleTargetRef")),
    col("Targets", description=Doc(_HPA + "Spec", "metrics")),
    col("MinPods", description=Doc(_HPA + "Spec", "minReplicas")),
    col("MaxPods", description=Doc(_HPA + "Spec", "maxReplicas")),
    col("Replicas", description=Doc(_HPA + "Status", "currentReplicas")),
    AGE,
), _hpa_row)


# kube's Scale printer gives NAME no "name" format.
SCALE = Printer((
    col("Name", description=NAME.description),
    col("Desired", "integer", description=Doc("api.autoscaling.v1.ScaleSpec", "replicas")),
    col("Available", "integer", description=Doc("api.autoscaling.v1.ScaleStatus", "replicas")),
    AGE,
), lambda obj, now: [name_of(obj), as_int(field(obj, "spec", "replicas")), as_int(field(obj, "status", "replicas")),
                     age_of(obj, now)])
