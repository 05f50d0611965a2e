"""Built-in conversions (``kinformer.server.schema.builtin_conversion``): HorizontalPodAutoscaler autoscaling/v1 <-> v2,
Event events.k8s.io/v1 <-> core/v1."""

from __future__ import annotations

import copy
import json
from typing import Any

from kinformer.server.schema import builtin_catalog
from kinformer.server.schema.builtin_conversion import (
    BEHAVIOR_ANNOTATION,
    CONDITIONS_ANNOTATION,
    CONVERTERS,
    CURRENT_METRICS_ANNOTATION,
    METRICS_ANNOTATION,
    convert,
    drop_round_trip_annotations,
    event_core_to_v1,
    event_v1_to_core,
    field_labels,
    hpa_v1_to_v2,
    hpa_v2_to_v1,
    served_as,
    storage_of,
)

REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
SELECTOR = {"matchLabels": {"queue": "jobs"}}
CONDITIONS = [{"type": "AbleToScale", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
               "reason": "ReadyForNewScale", "message": "recommended size matches current size"},
              {"type": "ScalingActive", "status": "False", "reason": "FailedGetResourceMetric"}]


def cpu(utilization: int) -> dict[str, Any]:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                       "averageUtilization": utilization}}}


def v2(spec: dict[str, Any], status: dict[str, Any] | None = None, **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": "default", "uid": "u1", "resourceVersion": "7"}
    if annotations:
        meta["annotations"] = annotations
    obj = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta,
           "spec": {"scaleTargetRef": REF, "minReplicas": 2, "maxReplicas": 9, **spec}}
    if status is not None:
        obj["status"] = status
    return obj


# Every v2 metric source with the fields kube fills in (a v1 round trip keeps exactly these).
ALL_METRICS = [
    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}},
    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 70}}},
    {"type": "Pods", "pods": {"metric": {"name": "qps", "selector": SELECTOR},
                              "target": {"type": "AverageValue", "averageValue": "10"}}},
    {"type": "Object", "object": {"describedObject": {"kind": "Ingress", "name": "main",
                                                      "apiVersion": "networking.k8s.io/v1"},
                                  "target": {"type": "Value", "value": "2k"}, "metric": {"name": "requests"}}},
    {"type": "External", "external": {"metric": {"name": "queue", "selector": SELECTOR},
                                      "target": {"type": "AverageValue", "averageValue": "30"}}},
    {"type": "External", "external": {"metric": {"name": "lag"}, "target": {"type": "Value", "value": "5"}}},
    {"type": "ContainerResource", "containerResource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}, "container": "app"}},
]
ALL_CURRENT = [
    {"type": "Resource", "resource": {"name": "cpu", "current": {"averageValue": "250m", "averageUtilization": 41}}},
    {"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "12"}}},
    {"type": "Object", "object": {"metric": {"name": "requests"}, "current": {"value": "1500"},
                                  "describedObject": {"kind": "Ingress", "name": "main"}}},
    {"type": "External", "external": {"metric": {"name": "queue", "selector": SELECTOR},
                                      "current": {"value": "0", "averageValue": "28"}}},
    {"type": "ContainerResource", "containerResource": {
        "name": "cpu", "current": {"averageValue": "100m", "averageUtilization": 55}, "container": "app"}},
]
BEHAVIOR = {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                        "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]},
            "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Min",
                          "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}]}}


def test_the_cpu_utilization_metric_is_the_v1_target_and_nothing_else_is_annotated() -> None:
    obj = v2({"metrics": [cpu(55)]})
    out = hpa_v2_to_v1(obj)
    assert out["apiVersion"] == "autoscaling/v1"
    assert out["spec"] == {"scaleTargetRef": REF, "minReplicas": 2, "maxReplicas": 9,
                           "targetCPUUtilizationPercentage": 55}
    assert "annotations" not in out["metadata"]
    assert hpa_v1_to_v2(out) == obj


def test_a_v1_object_without_target_gets_80_percent_cpu_in_v2() -> None:
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
          "spec": {"scaleTargetRef": REF, "maxReplicas": 3}}
    assert hpa_v1_to_v2(v1)["spec"]["metrics"] == [cpu(80)]
    # ... but an apply configuration that does not name the target does not claim the metrics.
    assert "metrics" not in hpa_v1_to_v2(v1, partial=True)["spec"]


def test_other_metrics_behavior_current_metrics_and_conditions_go_to_annotations() -> None:
    obj = v2({"metrics": [*ALL_METRICS, cpu(75)], "behavior": BEHAVIOR},
             {"currentReplicas": 3, "desiredReplicas": 4, "currentMetrics": ALL_CURRENT, "conditions": CONDITIONS,
              "observedGeneration": 2, "lastScaleTime": "2026-01-01T00:00:00Z"}, team="a")
    out = hpa_v2_to_v1(obj)
    ann = out["metadata"]["annotations"]
    assert set(ann) == {"team", METRICS_ANNOTATION, CURRENT_METRICS_ANNOTATION, BEHAVIOR_ANNOTATION,
                        CONDITIONS_ANNOTATION}
    assert out["spec"]["targetCPUUtilizationPercentage"] == 75 and "metrics" not in out["spec"]
    assert out["status"] == {"currentReplicas": 3, "desiredReplicas": 4, "observedGeneration": 2,
                             "lastScaleTime": "2026-01-01T00:00:00Z", "currentCPUUtilizationPercentage": 41}
    metrics = json.loads(ann[METRICS_ANNOTATION])
    assert metrics[0] == {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "1Gi"}}
    assert metrics[2] == {"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "10",
                                                   "selector": SELECTOR}}
    assert metrics[3]["object"] == {"target": ALL_METRICS[3]["object"]["describedObject"], "metricName": "requests",
                                    "targetValue": "2k"}
    assert json.loads(ann[CONDITIONS_ANNOTATION]) == CONDITIONS
    # kube marshals its internal behavior type: Go field names.
    assert json.loads(ann[BEHAVIOR_ANNOTATION])["ScaleDown"] == {
        "StabilizationWindowSeconds": 300, "SelectPolicy": "Min",
        "Policies": [{"Type": "Percent", "Value": 10, "PeriodSeconds": 60}]}


def test_v2_to_v1_to_v2_keeps_every_field() -> None:
    obj = v2({"metrics": [*ALL_METRICS, cpu(75)], "behavior": BEHAVIOR},
             {"currentReplicas": 3, "desiredReplicas": 4, "currentMetrics": ALL_CURRENT, "conditions": CONDITIONS},
             team="a")
    before = copy.deepcopy(obj)
    assert hpa_v1_to_v2(hpa_v2_to_v1(obj)) == obj
    assert obj == before  # the input is never modified


def test_v1_to_v2_to_v1_keeps_every_field_annotations_included() -> None:
    rich = hpa_v2_to_v1(v2({"metrics": [*ALL_METRICS, cpu(75)], "behavior": BEHAVIOR},
                           {"currentReplicas": 3, "desiredReplicas": 4, "currentMetrics": ALL_CURRENT,
                            "conditions": CONDITIONS}, team="a"))
    plain = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
             "metadata": {"name": "web", "annotations": {"team": "a"}},
             "spec": {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 4, "targetCPUUtilizationPercentage": 50},
             "status": {"currentReplicas": 1, "desiredReplicas": 1}}
    for v1 in (rich, plain):
        assert hpa_v2_to_v1(hpa_v1_to_v2(v1)) == v1


def test_a_current_cpu_utilization_is_also_kept_raw_in_the_annotation_as_kube_does() -> None:
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
          "spec": {"maxReplicas": 4, "targetCPUUtilizationPercentage": 50},
          "status": {"currentReplicas": 1, "desiredReplicas": 1, "currentCPUUtilizationPercentage": 20}}
    there = hpa_v1_to_v2(v1)
    assert there["status"]["currentMetrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 20}}}]
    back = hpa_v2_to_v1(there)
    assert back["status"] == v1["status"]
    assert json.loads(back["metadata"]["annotations"][CURRENT_METRICS_ANNOTATION]) == [
        {"type": "Resource", "resource": {"name": "cpu", "currentAverageUtilization": 20, "currentAverageValue": "0"}}]


def test_round_trip_annotations_never_show_in_v2() -> None:
    stale = {METRICS_ANNOTATION: "not json", BEHAVIOR_ANNOTATION: "{}", CONDITIONS_ANNOTATION: "[]", "keep": "me"}
    out = hpa_v1_to_v2({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                        "metadata": {"name": "x", "annotations": stale}, "spec": {"maxReplicas": 2}})
    assert out["metadata"]["annotations"] == {"keep": "me"}
    assert out["spec"] == {"maxReplicas": 2, "metrics": [cpu(80)]}  # undecodable/empty annotations are ignored
    assert convert("autoscaling", "horizontalpodautoscalers", v2({}, None, **stale), "autoscaling/v2")[
        "metadata"]["annotations"] == {"keep": "me"}


def test_a_v1_answer_carries_only_the_annotations_its_conversion_made() -> None:
    obj = v2({"metrics": [cpu(60)]}, None, **{METRICS_ANNOTATION: "[]", "keep": "me"})
    assert hpa_v2_to_v1(obj)["metadata"]["annotations"] == {"keep": "me"}


def test_behavior_annotation_is_read_without_regard_to_case_as_go_decodes() -> None:
    ann = json.dumps({"scaleDown": {"stabilizationWindowSeconds": 30}})
    out = hpa_v1_to_v2({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                        "metadata": {"name": "x", "annotations": {BEHAVIOR_ANNOTATION: ann}},
                        "spec": {"maxReplicas": 2, "targetCPUUtilizationPercentage": 10}})
    assert out["spec"]["behavior"] == {"scaleDown": {"stabilizationWindowSeconds": 30}}


def test_the_table_serves_hpa_stored_as_v2_events_stored_as_core_and_nothing_else() -> None:
    assert storage_of("autoscaling", "horizontalpodautoscalers") == ("autoscaling", "v2")
    assert storage_of("events.k8s.io", "events") == ("", "v1")
    assert storage_of("", "events") is None and storage_of("apps", "deployments") is None
    # every built-in served at more than one version has a converter, and so has the Event of events.k8s.io
    versions: dict[tuple[str, str], set[str]] = {}
    for row in builtin_catalog.RESOURCES:
        versions.setdefault((row[0], row[3]), set()).add(row[1])
    assert {k for k, v in versions.items() if len(v) > 1} | {("events.k8s.io", "events")} == set(CONVERTERS)


CORE_EVENT = {"kind": "Event", "apiVersion": "v1", "metadata": {"name": "e", "namespace": "default"},
              "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default", "fieldPath": "spec.containers{a}"},
              "reason": "BackOff", "message": "restarting", "source": {"component": "kubelet", "host": "n1"},
              "firstTimestamp": "2024-05-01T10:00:00Z", "lastTimestamp": "2024-05-01T10:05:00Z", "count": 4,
              "type": "Warning", "eventTime": "2024-05-01T10:00:00.000000Z",
              "series": {"count": 3, "lastObservedTime": "2024-05-01T10:05:00.000000Z"}, "action": "Restart",
              "related": {"kind": "Node", "name": "n1"}, "reportingComponent": "kubelet", "reportingInstance": "n1"}


def test_events_convert_field_by_field_as_kube_does() -> None:
    v1 = event_core_to_v1(CORE_EVENT)
    assert v1 == {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": CORE_EVENT["metadata"],
                  "eventTime": "2024-05-01T10:00:00.000000Z", "series": CORE_EVENT["series"],
                  "reportingController": "kubelet", "reportingInstance": "n1", "action": "Restart",
                  "reason": "BackOff", "regarding": CORE_EVENT["involvedObject"], "related": CORE_EVENT["related"],
                  "note": "restarting", "type": "Warning", "deprecatedSource": CORE_EVENT["source"],
                  "deprecatedFirstTimestamp": "2024-05-01T10:00:00Z",
                  "deprecatedLastTimestamp": "2024-05-01T10:05:00Z", "deprecatedCount": 4}
    assert event_v1_to_core(v1) == CORE_EVENT and list(event_v1_to_core(v1)) == list(CORE_EVENT)  # Go's order
    assert convert("events.k8s.io", "events", v1, "v1") == CORE_EVENT
    assert convert("events.k8s.io", "events", CORE_EVENT, "events.k8s.io/v1") == v1


def test_unset_event_fields_read_as_go_writes_them_and_an_apply_configuration_gets_none() -> None:
    bare = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"}, "note": "hi"}
    assert event_v1_to_core(bare) == {"kind": "Event", "apiVersion": "v1", "metadata": {"name": "e"},
                                      "involvedObject": {}, "message": "hi", "source": {}, "firstTimestamp": None,
                                      "lastTimestamp": None, "eventTime": None}
    assert event_v1_to_core(bare, partial=True) == {"kind": "Event", "apiVersion": "v1", "metadata": {"name": "e"},
                                                    "message": "hi"}
    assert event_core_to_v1({"apiVersion": "v1", "kind": "Event", "metadata": {}, "count": 0}) == {
        "kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": {}, "eventTime": None, "regarding": {},
        "deprecatedSource": {}, "deprecatedFirstTimestamp": None, "deprecatedLastTimestamp": None}
    original = copy.deepcopy(CORE_EVENT)
    event_core_to_v1(CORE_EVENT)
    assert CORE_EVENT == original
    assert list(event_v1_to_core(bare)) == ["kind", "apiVersion", "metadata", "involvedObject", "message", "source",
                                            "firstTimestamp", "lastTimestamp", "eventTime"]  # Go's order
    empties = {**bare, "related": {}, "series": [], "deprecatedCount": 0, "reason": ""}  # {} and [] are set values
    assert list(event_v1_to_core(empties).items())[3:] == [
        ("involvedObject", {}), ("message", "hi"), ("source", {}), ("firstTimestamp", None), ("lastTimestamp", None),
        ("eventTime", None), ("series", []), ("related", {})]
    first, second = event_v1_to_core(bare), event_v1_to_core(bare)  # each unset object is an object of its own
    first["source"]["component"] = "x"
    assert second["source"] == {} and first["involvedObject"] is not second["involvedObject"]


def test_events_field_labels_name_the_core_fields() -> None:
    labels = field_labels("events.k8s.io", "events")
    assert labels is not None and labels["regarding.name"] == "involvedObject.name"
    assert labels["reportingController"] == "reportingComponent" and labels["reason"] == "reason"
    assert "source" not in labels and "involvedObject.name" not in labels
    assert field_labels("autoscaling", "horizontalpodautoscalers") is None and field_labels("", "events") is None


def test_convert_relabels_kinds_without_a_converter_and_keeps_same_version_objects() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    assert convert("", "configmaps", obj, "v1") is obj
    assert convert("x.io", "foos", {"apiVersion": "x.io/v1"}, "x.io/v2") == {"apiVersion": "x.io/v2"}


def test_served_as_converts_a_kind_stored_in_another_version_and_relabels_the_rest() -> None:
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "a"},
          "spec": {"maxReplicas": 2, "targetCPUUtilizationPercentage": 40}}
    assert served_as(v1, "autoscaling/v2")["spec"] == {"maxReplicas": 2, "metrics": [cpu(40)]}
    crd = {"apiVersion": "x.io/v1", "kind": "Foo", "spec": {"a": 1}}
    assert served_as(crd, "x.io/v2") == {"apiVersion": "x.io/v2", "kind": "Foo", "spec": {"a": 1}}


def test_drop_round_trip_annotations_in_place() -> None:
    obj = v2({}, None, **{METRICS_ANNOTATION: "[]", CONDITIONS_ANNOTATION: "[]"})
    drop_round_trip_annotations(obj)
    assert "annotations" not in obj["metadata"]
    obj = v2({}, None, **{BEHAVIOR_ANNOTATION: "{}", "keep": "me"})
    drop_round_trip_annotations(obj)
    assert obj["metadata"]["annotations"] == {"keep": "me"}


def test_malformed_parts_convert_without_failing() -> None:
    odd: list[Any] = [None, 1, "x", [1], [{"type": "Resource", "resource": "x"}], {"a": 1}]
    for value in odd:
        obj = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
               "metadata": {"name": "a", "annotations": {METRICS_ANNOTATION: json.dumps(value),
                                                         BEHAVIOR_ANNOTATION: json.dumps(value)}},
               "spec": {"metrics": value, "behavior": value, "targetCPUUtilizationPercentage": value},
               "status": {"currentMetrics": value, "conditions": value}}
        for out in (hpa_v2_to_v1(obj), hpa_v1_to_v2(obj), hpa_v1_to_v2(hpa_v2_to_v1(obj))):
            assert out["kind"] == "HorizontalPodAutoscaler"
