"""Conversion of built-in kinds served at more than one version, as kube-apiserver's scheme converts them.

kube-apiserver stores such a kind in one version and converts every request body to it and every answer
from it. :data:`CONVERTERS` is the table of those kinds, by the served (group, plural): the storage
apiVersion, one function per (from, to) apiVersion pair, and the field selector labels that name another
field in the storage version. :class:`~kinformer.server.schema.conversion.Conversion` serves a request for any
other version through the storage version's handlers, converting at the edges.

Two such kinds are in kube 1.32's default set. Events: events.k8s.io/v1 Events are stored as core/v1
Events (one storage, two views), converted as kube's ``pkg/apis/events/v1/conversion.go`` does: ``regarding``
is ``involvedObject``, ``note`` is ``message``, ``reportingController`` is ``reportingComponent``,
``deprecatedSource``/``deprecatedFirstTimestamp``/``deprecatedLastTimestamp``/``deprecatedCount`` are
``source``/``firstTimestamp``/``lastTimestamp``/``count``; ``eventTime``, ``series``, ``reportingInstance``,
``action``, ``reason``, ``related`` and ``type`` keep their names. Each view carries what Go's encoding of
its type always writes (the two object references, ``source`` and the timestamps, ``null`` when unset).

HorizontalPodAutoscaler (autoscaling/v1 and v2, stored as v2). Its conversions follow kube's
``pkg/apis/autoscaling/v1/conversion.go``:

* v1 ``spec.targetCPUUtilizationPercentage`` is the v2 Resource ``cpu`` metric of type Utilization;
  every other v2 metric is kept in v1 in the ``autoscaling.alpha.kubernetes.io/metrics`` annotation
  (v1 MetricSpec JSON), ``spec.behavior`` in ``autoscaling.alpha.kubernetes.io/behavior`` (the JSON of
  kube's internal type: Go field names), ``status.currentMetrics`` in
  ``autoscaling.alpha.kubernetes.io/current-metrics`` and ``status.conditions`` in
  ``autoscaling.alpha.kubernetes.io/conditions``; ``status.currentCPUUtilizationPercentage`` is the
  current CPU utilization.
* A v1 object that names no metric at all gets the 80 % CPU target v1 always implied (kube applies it in
  the conversion, where the annotation is at hand). An apply configuration is converted without it
  (``partial``), so a v1 apply that does not mention the target does not claim the metrics.
* The round-trip annotations never show in v2: they are dropped from any object converted to v2, and a
  v1 answer carries only the ones its conversion produced.

Functions take a mapping and return a new dict; their input is never modified.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["CONVERTERS", "BuiltinConverter", "convert", "drop_round_trip_annotations", "equivalent_versions",
           "event_core_to_v1", "event_v1_to_core", "field_labels", "hpa_v1_to_v2", "hpa_v2_to_v1", "served_as",
           "storage_of"]

METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
ROUND_TRIP_ANNOTATIONS = (METRICS_ANNOTATION, CURRENT_METRICS_ANNOTATION, CONDITIONS_ANNOTATION,
                          BEHAVIOR_ANNOTATION)
DEFAULT_CPU_UTILIZATION = 80
ZERO = "0"  # a Go resource.Quantity left unset, as v1's non-pointer quantities serialize it

Obj = dict[str, Any]
ConvertFn = Callable[[Mapping[str, Any], bool], Obj]


@dataclass(frozen=True, slots=True)
class BuiltinConverter:
    """How one multi-version built-in kind is stored and converted."""

    kind: str
    storage: str  #: the apiVersion objects are stored as
    #: (from apiVersion, to apiVersion) -> function(object, partial) -> converted object
    functions: Mapping[tuple[str, str], ConvertFn]
    #: field selector labels of the served resource -> the storage version's label (kube's field label
    #: conversion); empty: the storage version's labels are the served one's
    field_labels: Mapping[str, str] = field(default_factory=dict)


def _pick(**fields: Any) -> Obj:
    """The fields that are set, in the order given (Go's ``omitempty`` for pointers)."""
    return {k: v for k, v in fields.items() if v is not None}


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _loads_list(raw: Any) -> list[Any] | None:
    """An annotation's JSON list, or None when it is not one (kube ignores an annotation it cannot decode)."""
    if not isinstance(raw, str):
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None


# -- metric specs: v2 <-> the v1 shape the annotation carries ------------------------------------------------

def _metric_spec_v2_to_v1(m: Mapping[str, Any]) -> Obj:
    out: Obj = {"type": m.get("type", "")}
    if "object" in m:
        s = _map(m["object"])
        target, metric = _map(s.get("target")), _map(s.get("metric"))
        out["object"] = _pick(target=dict(_map(s.get("describedObject"))), metricName=metric.get("name", ""),
                              targetValue=target.get("value", ZERO), selector=metric.get("selector"),
                              averageValue=target.get("averageValue"))
    if "pods" in m:
        s = _map(m["pods"])
        target, metric = _map(s.get("target")), _map(s.get("metric"))
        out["pods"] = _pick(metricName=metric.get("name", ""), targetAverageValue=target.get("averageValue", ZERO),
                            selector=metric.get("selector"))
    for key in ("resource", "containerResource"):
        if key in m:
            s = _map(m[key])
            target = _map(s.get("target"))
            out[key] = _pick(name=s.get("name", ""), targetAverageUtilization=target.get("averageUtilization"),
                             targetAverageValue=target.get("averageValue"), container=s.get("container"))
    if "external" in m:
        s = _map(m["external"])
        target, metric = _map(s.get("target")), _map(s.get("metric"))
        out["external"] = _pick(metricName=metric.get("name", ""), metricSelector=metric.get("selector"),
                                targetValue=target.get("value"), targetAverageValue=target.get("averageValue"))
    return out


def _metric_spec_v1_to_v2(m: Mapping[str, Any]) -> Obj:
    out: Obj = {"type": m.get("type", "")}
    if "object" in m:
        s = _map(m["object"])
        kind = "Value" if s.get("averageValue") is None else "AverageValue"
        out["object"] = {"describedObject": dict(_map(s.get("target"))),
                         "target": _pick(type=kind, value=s.get("targetValue", ZERO),
                                         averageValue=s.get("averageValue")),
                         "metric": _pick(name=s.get("metricName", ""), selector=s.get("selector"))}
    if "pods" in m:
        s = _map(m["pods"])
        out["pods"] = {"metric": _pick(name=s.get("metricName", ""), selector=s.get("selector")),
                       "target": {"type": "AverageValue", "averageValue": s.get("targetAverageValue", ZERO)}}
    for key in ("resource", "containerResource"):
        if key in m:
            s = _map(m[key])
            utilization = s.get("targetAverageUtilization")
            kind = "AverageValue" if utilization is None else "Utilization"
            out[key] = _pick(name=s.get("name", ""), target=_pick(
                type=kind, averageValue=s.get("targetAverageValue"), averageUtilization=utilization),
                container=s.get("container"))
    if "external" in m:
        s = _map(m["external"])
        kind = "AverageValue" if s.get("targetValue") is None else "Value"
        out["external"] = {"metric": _pick(name=s.get("metricName", ""), selector=s.get("metricSelector")),
                           "target": _pick(type=kind, value=s.get("targetValue"),
                                           averageValue=s.get("targetAverageValue"))}
    return out


# -- metric statuses ------------------------------------------------------------------------------------------

def _metric_status_v2_to_v1(m: Mapping[str, Any]) -> Obj:
    out: Obj = {"type": m.get("type", "")}
    if "object" in m:
        s = _map(m["object"])
        cur, metric = _map(s.get("current")), _map(s.get("metric"))
        out["object"] = _pick(target=dict(_map(s.get("describedObject"))), metricName=metric.get("name", ""),
                              currentValue=cur.get("value", ZERO), selector=metric.get("selector"),
                              averageValue=cur.get("averageValue"))
    if "pods" in m:
        s = _map(m["pods"])
        cur, metric = _map(s.get("current")), _map(s.get("metric"))
        out["pods"] = _pick(metricName=metric.get("name", ""), currentAverageValue=cur.get("averageValue", ZERO),
                            selector=metric.get("selector"))
    for key in ("resource", "containerResource"):
        if key in m:
            s = _map(m[key])
            cur = _map(s.get("current"))
            out[key] = _pick(name=s.get("name", ""), currentAverageUtilization=cur.get("averageUtilization"),
                             currentAverageValue=cur.get("averageValue", ZERO), container=s.get("container"))
    if "external" in m:
        s = _map(m["external"])
        cur, metric = _map(s.get("current")), _map(s.get("metric"))
        out["external"] = _pick(metricName=metric.get("name", ""), metricSelector=metric.get("selector"),
                                currentValue=cur.get("value", ZERO), currentAverageValue=cur.get("averageValue"))
    return out


def _metric_status_v1_to_v2(m: Mapping[str, Any]) -> Obj:
    out: Obj = {"type": m.get("type", "")}
    if "object" in m:
        s = _map(m["object"])
        out["object"] = {"metric": _pick(name=s.get("metricName", ""), selector=s.get("selector")),
                         "current": _pick(value=s.get("currentValue", ZERO), averageValue=s.get("averageValue")),
                         "describedObject": dict(_map(s.get("target")))}
    if "pods" in m:
        s = _map(m["pods"])
        out["pods"] = {"metric": _pick(name=s.get("metricName", ""), selector=s.get("selector")),
                       "current": {"averageValue": s.get("currentAverageValue", ZERO)}}
    for key in ("resource", "containerResource"):
        if key in m:
            s = _map(m[key])
            out[key] = _pick(name=s.get("name", ""), current=_pick(
                averageValue=s.get("currentAverageValue", ZERO),
                averageUtilization=s.get("currentAverageUtilization")), container=s.get("container"))
    if "external" in m:
        s = _map(m["external"])
        out["external"] = {"metric": _pick(name=s.get("metricName", ""), selector=s.get("metricSelector")),
                           "current": _pick(value=s.get("currentValue", ZERO),
                                            averageValue=s.get("currentAverageValue"))}
    return out


# -- behavior: v2 <-> the internal type's JSON (Go field names, nil pointers as null) -------------------------

_RULE_FIELDS = (("stabilizationWindowSeconds", "StabilizationWindowSeconds"), ("selectPolicy", "SelectPolicy"),
                ("policies", "Policies"))
_POLICY_FIELDS = (("type", "Type"), ("value", "Value"), ("periodSeconds", "PeriodSeconds"))


def _behavior_to_internal(b: Mapping[str, Any]) -> Obj:
    def rules(r: Any) -> Obj | None:
        if not isinstance(r, Mapping):
            return None
        out: Obj = {go: r.get(js) for js, go in _RULE_FIELDS[:2]}
        policies = r.get("policies")
        out["Policies"] = None if policies is None else [
            {go: _map(p).get(js, "" if js == "type" else 0) for js, go in _POLICY_FIELDS} for p in _list(policies)]
        return out

    return {"ScaleUp": rules(b.get("scaleUp")), "ScaleDown": rules(b.get("scaleDown"))}


def _field_ci(m: Mapping[str, Any], name: str) -> Any:
    """``m[name]`` matched without regard to case, as Go's JSON decoder matches field names."""
    if name in m:
        return m[name]
    lower = name.lower()
    return next((v for k, v in m.items() if isinstance(k, str) and k.lower() == lower), None)


def _behavior_from_internal(raw: Any) -> Obj | None:
    """The v2 behavior an annotation holds; None when it cannot be decoded or sets no direction."""
    if not isinstance(raw, str):
        return None
    try:
        b = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(b, Mapping):
        return None

    def rules(r: Any) -> Obj | None:
        if not isinstance(r, Mapping):
            return None
        out = _pick(stabilizationWindowSeconds=_field_ci(r, "StabilizationWindowSeconds"),
                    selectPolicy=_field_ci(r, "SelectPolicy"))
        policies = _field_ci(r, "Policies")
        if isinstance(policies, list):
            out["policies"] = [{js: _field_ci(_map(p), go) for js, go in _POLICY_FIELDS} for p in policies]
        return out

    out = _pick(scaleUp=rules(_field_ci(b, "ScaleUp")), scaleDown=rules(_field_ci(b, "ScaleDown")))
    return out or None


# -- whole objects --------------------------------------------------------------------------------------------

def _is_cpu_utilization(m: Any) -> bool:
    res = _map(_map(m).get("resource"))
    return (_map(m).get("type") == "Resource" and res.get("name") == "cpu"
            and _map(res.get("target")).get("averageUtilization") is not None)


def _cpu_metric(utilization: Any) -> Obj:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": utilization}}}


def _with_annotations(obj: Mapping[str, Any], api_version: str, annotations: Mapping[str, str]) -> Obj:
    """A shallow copy of ``obj`` as ``api_version`` whose metadata carries exactly ``annotations``."""
    out = dict(obj)
    out["apiVersion"] = api_version
    meta = dict(_map(obj.get("metadata")))
    if annotations:
        meta["annotations"] = dict(annotations)
    else:
        meta.pop("annotations", None)
    out["metadata"] = meta
    return out


def _user_annotations(obj: Mapping[str, Any]) -> dict[str, Any]:
    annotations = _map(_map(obj.get("metadata")).get("annotations"))
    return {k: v for k, v in annotations.items() if k not in ROUND_TRIP_ANNOTATIONS}


def hpa_v2_to_v1(obj: Mapping[str, Any], partial: bool = False) -> Obj:
    """An autoscaling/v2 HorizontalPodAutoscaler as autoscaling/v1 (see the module docstring)."""
    annotations = _user_annotations(obj)
    spec_in = _map(obj.get("spec"))
    metrics = _list(spec_in.get("metrics"))
    spec = {k: v for k, v in spec_in.items() if k not in ("metrics", "behavior")}
    cpu = next((m for m in metrics if _is_cpu_utilization(m)), None)
    if cpu is not None:
        spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"]["averageUtilization"]
    others = [_metric_spec_v2_to_v1(_map(m)) for m in metrics if not _is_cpu_utilization(m)]
    if others:
        annotations[METRICS_ANNOTATION] = _dumps(others)
    status_in = _map(obj.get("status"))
    current = _list(status_in.get("currentMetrics"))
    if current:
        annotations[CURRENT_METRICS_ANNOTATION] = _dumps([_metric_status_v2_to_v1(_map(m)) for m in current])
    if isinstance(spec_in.get("behavior"), Mapping):
        annotations[BEHAVIOR_ANNOTATION] = _dumps(_behavior_to_internal(spec_in["behavior"]))
    conditions = _list(status_in.get("conditions"))
    if conditions:
        annotations[CONDITIONS_ANNOTATION] = _dumps(conditions)
    out = _with_annotations(obj, "autoscaling/v1", annotations)
    if "spec" in obj:
        out["spec"] = spec
    if "status" in obj:
        status = {k: v for k, v in status_in.items() if k not in ("currentMetrics", "conditions")}
        for m in current:
            res = _map(_map(m).get("resource"))
            utilization = _map(res.get("current")).get("averageUtilization")
            if _map(m).get("type") == "Resource" and res.get("name") == "cpu" and utilization is not None:
                status["currentCPUUtilizationPercentage"] = utilization
        out["status"] = status
    return out


def hpa_v1_to_v2(obj: Mapping[str, Any], partial: bool = False) -> Obj:
    """An autoscaling/v1 HorizontalPodAutoscaler as autoscaling/v2 (see the module docstring)."""
    annotations = _map(_map(obj.get("metadata")).get("annotations"))
    spec_in = _map(obj.get("spec"))
    spec = {k: v for k, v in spec_in.items() if k != "targetCPUUtilizationPercentage"}
    metrics = [_metric_spec_v1_to_v2(_map(m)) for m in _loads_list(annotations.get(METRICS_ANNOTATION)) or ()]
    if spec_in.get("targetCPUUtilizationPercentage") is not None:
        metrics.append(_cpu_metric(spec_in["targetCPUUtilizationPercentage"]))
    if not metrics and not partial:
        metrics.append(_cpu_metric(DEFAULT_CPU_UTILIZATION))
    if metrics:
        spec["metrics"] = metrics
    behavior = _behavior_from_internal(annotations.get(BEHAVIOR_ANNOTATION))
    if behavior is not None:
        spec["behavior"] = behavior
    status_in = _map(obj.get("status"))
    status = {k: v for k, v in status_in.items() if k != "currentCPUUtilizationPercentage"}
    if status_in.get("currentCPUUtilizationPercentage") is not None:
        status["currentMetrics"] = [{"type": "Resource", "resource": {"name": "cpu", "current": {
            "averageUtilization": status_in["currentCPUUtilizationPercentage"]}}}]
    current = _loads_list(annotations.get(CURRENT_METRICS_ANNOTATION))
    if current is not None:
        status["currentMetrics"] = [_metric_status_v1_to_v2(_map(m)) for m in current]
    conditions = _loads_list(annotations.get(CONDITIONS_ANNOTATION))
    if conditions is not None:
        status["conditions"] = conditions
    out = _with_annotations(obj, "autoscaling/v2", _user_annotations(obj))
    if "spec" in obj or spec:
        out["spec"] = spec
    if "status" in obj or status:
        out["status"] = status
    return out


def _hpa_v2_to_v2(obj: Mapping[str, Any], partial: bool = False) -> Obj:
    """A v2 object as v2: the round-trip annotations of v1 never show in (nor are stored with) v2."""
    return _with_annotations(obj, "autoscaling/v2", _user_annotations(obj))


# -- Event: events.k8s.io/v1 <-> core/v1 ----------------------------------------------------------------------

EVENTS_V1 = "events.k8s.io/v1"
# events.k8s.io/v1 field -> core/v1 field, where the names differ
_EVENT_RENAMES = {"regarding": "involvedObject", "note": "message", "reportingController": "reportingComponent",
                  "deprecatedSource": "source", "deprecatedFirstTimestamp": "firstTimestamp",
                  "deprecatedLastTimestamp": "lastTimestamp", "deprecatedCount": "count"}
_EVENT_NAMES_IN_V1 = {core: v1 for v1, core in _EVENT_RENAMES.items()}
# each type's fields in Go's order: (name, what Go writes when unset: a value, or _OMIT for omitempty)
_OMIT = object()
_Fields = tuple[tuple[str, Any], ...]
_EVENTS_V1_FIELDS: _Fields = (
    ("eventTime", None), ("series", _OMIT), ("reportingController", _OMIT), ("reportingInstance", _OMIT),
    ("action", _OMIT), ("reason", _OMIT), ("regarding", {}), ("related", _OMIT), ("note", _OMIT), ("type", _OMIT),
    ("deprecatedSource", {}), ("deprecatedFirstTimestamp", None), ("deprecatedLastTimestamp", None),
    ("deprecatedCount", _OMIT))
_CORE_EVENT_FIELDS: _Fields = (
    ("involvedObject", {}), ("reason", _OMIT), ("message", _OMIT), ("source", {}), ("firstTimestamp", None),
    ("lastTimestamp", None), ("count", _OMIT), ("type", _OMIT), ("eventTime", None), ("series", _OMIT),
    ("action", _OMIT), ("related", _OMIT), ("reportingComponent", _OMIT), ("reportingInstance", _OMIT))


#: a conversion's steps, (field, the field of the source version it is read from, its unset value), made once
_EventPlan = tuple[tuple[str, str, Any], ...]


def _event_plan(fields: _Fields, source_names: Mapping[str, str]) -> _EventPlan:
    assert all(unset is None or unset is _OMIT or unset == {} for _, unset in fields)  # what _event_as writes
    return tuple((name, source_names.get(name, name), unset) for name, unset in fields)


_TO_CORE_EVENT = _event_plan(_CORE_EVENT_FIELDS, _EVENT_NAMES_IN_V1)
_TO_EVENTS_V1 = _event_plan(_EVENTS_V1_FIELDS, _EVENT_RENAMES)


def _event_as(obj: Mapping[str, Any], api_version: str, plan: _EventPlan, partial: bool) -> Obj:
    """``obj`` relabelled ``api_version`` with each field of ``plan`` read from its source field; unset fields as
    Go writes them, null or a new empty object (a ``partial`` object, an apply configuration, gets only the fields
    it names)."""
    out: Obj = {"kind": "Event", "apiVersion": api_version}
    if "metadata" in obj:
        out["metadata"] = obj["metadata"]
    get = obj.get
    for name, source, unset in plan:
        value = get(source)
        if value or (value is not None and value != "" and value != 0):  # a set value: truthy, or {} / []
            out[name] = value
        elif not partial and unset is not _OMIT:
            out[name] = None if unset is None else {}
    return out


def event_v1_to_core(obj: Mapping[str, Any], partial: bool = False) -> Obj:
    """An events.k8s.io/v1 Event as the core/v1 Event it is stored as."""
    return _event_as(obj, "v1", _TO_CORE_EVENT, partial)


def event_core_to_v1(obj: Mapping[str, Any], partial: bool = False) -> Obj:
    """A stored core/v1 Event as events.k8s.io/v1 shows it."""
    return _event_as(obj, EVENTS_V1, _TO_EVENTS_V1, partial)


CONVERTERS: dict[tuple[str, str], BuiltinConverter] = {
    ("autoscaling", "horizontalpodautoscalers"): BuiltinConverter("HorizontalPodAutoscaler", "autoscaling/v2", {
        ("autoscaling/v1", "autoscaling/v2"): hpa_v1_to_v2, ("autoscaling/v2", "autoscaling/v1"): hpa_v2_to_v1,
        ("autoscaling/v2", "autoscaling/v2"): _hpa_v2_to_v2}),
    ("events.k8s.io", "events"): BuiltinConverter("Event", "v1", {
        (EVENTS_V1, "v1"): event_v1_to_core, ("v1", EVENTS_V1): event_core_to_v1},
        {**{f"regarding.{f}": f"involvedObject.{f}"
            for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
         "reportingController": "reportingComponent", "reason": "reason", "type": "type"}),
}


_BY_KIND = {(group, c.kind): (group, plural) for (group, plural), c in CONVERTERS.items()}


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def storage_of(group: str, plural: str) -> tuple[str, str] | None:
    """The (group, version) a built-in resource served in several versions (or groups) is stored in; None for
    every other resource."""
    converter = CONVERTERS.get((group, plural))
    return _split(converter.storage) if converter is not None else None


def field_labels(group: str, plural: str) -> Mapping[str, str] | None:
    """The resource's field selector labels -> its storage version's, when they differ (None: the same)."""
    converter = CONVERTERS.get((group, plural))
    return converter.field_labels or None if converter is not None else None


def equivalent_versions(group: str, plural: str) -> tuple[str, ...]:
    """Every version of ``group`` the resource converts between (empty for a resource without a converter)."""
    converter = CONVERTERS.get((group, plural))
    if converter is None:
        return ()
    return tuple(sorted({_split(v)[1] for pair in converter.functions for v in pair if _split(v)[0] == group}))


def convert(group: str, plural: str, obj: Obj, desired: str, *, partial: bool = False) -> Obj:
    """``obj`` (any served or the storage version of the resource) as ``desired`` (an apiVersion); a copy, or
    ``obj`` as is.

    An object already in ``desired`` is returned unchanged, except that a storage-version object is
    passed through the storage version's own normalization when the table has one.
    """
    converter = CONVERTERS.get((group, plural))
    src = str(obj.get("apiVersion", ""))
    fn = converter.functions.get((src, desired)) if converter is not None else None
    if fn is None:
        return obj if src == desired else {**obj, "apiVersion": desired}
    return fn(obj, partial)


def served_as(obj: Obj, api_version: str) -> Obj:
    """``obj`` served as ``api_version`` of its own resource: converted when its kind has a converter (an
    object stored, before conversion existed, in another version), else relabelled as CRD "None" conversion does."""
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    resource = _BY_KIND.get((group, str(obj.get("kind", ""))))
    if resource is None:
        return {**obj, "apiVersion": api_version}
    return convert(resource[0], resource[1], obj, api_version)


def drop_round_trip_annotations(obj: MutableMapping[str, Any]) -> None:
    """Remove, in place, the annotations in which v1 keeps v2-only fields (kube drops them decoding v2)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict) or not any(k in annotations for k in ROUND_TRIP_ANNOTATIONS):
        return
    kept = {k: v for k, v in annotations.items() if k not in ROUND_TRIP_ANNOTATIONS}
    if kept:
        meta["annotations"] = kept
    else:
        del meta["annotations"]
