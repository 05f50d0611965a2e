"""events.k8s.io/v1 create rules (``kinformer.server.registry.strategies.events``), as kube's ValidateEventCreate."""

from __future__ import annotations

from typing import Any

from kinformer.server.registry.strategies.events import v1_create_causes


def event(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "eventTime": "2024-05-01T10:00:00.000000Z", "reportingController": "example.com/copier",
            "reportingInstance": "copier-1", "action": "Copy", "reason": "Copied", "note": "done", "type": "Normal",
            "regarding": {"kind": "ConfigMap", "namespace": "team", "name": "cm"}, **fields}


def fields_of(obj: dict[str, Any], namespace: str = "team") -> list[tuple[str, str]]:
    return [(c["field"], c["reason"]) for c in v1_create_causes(obj, namespace)]


def test_a_complete_event_passes() -> None:
    assert fields_of(event()) == []
    assert fields_of(event(series={"count": 2, "lastObservedTime": "2024-05-01T10:01:00.000000Z"})) == []


def test_each_rule_names_the_core_field_kube_reports() -> None:
    assert fields_of(event(eventTime=None)) == [("eventTime", "FieldValueRequired")]
    assert fields_of(event(type="Info")) == [("type", "FieldValueInvalid")]
    assert fields_of(event(deprecatedCount=3, deprecatedFirstTimestamp="2024-05-01T10:00:00Z",
                           deprecatedSource={"component": "kubelet"})) == [
        ("firstTimestamp", "FieldValueInvalid"), ("count", "FieldValueInvalid"), ("source", "FieldValueInvalid")]
    assert fields_of(event(series={"count": 1})) == [("series.count", "FieldValueInvalid"),
                                                     ("series.lastObservedTime", "FieldValueRequired")]
    assert set(fields_of(event(reportingController="", reportingInstance="", action="", reason=""))) == {
        ("reportingController", "FieldValueRequired"), ("reportingController", "FieldValueInvalid"),
        ("reportingInstance", "FieldValueRequired"), ("action", "FieldValueRequired"),
        ("reason", "FieldValueRequired")}
    assert fields_of(event(reportingController="not a name")) == [("reportingController", "FieldValueInvalid")]
    assert fields_of(event(action="a" * 129, note="n" * 1025)) == [("action", "FieldValueInvalid"),
                                                                   ("message", "FieldValueInvalid")]


def test_an_event_about_a_cluster_object_lives_in_default_or_kube_system() -> None:
    node = event(regarding={"kind": "Node", "name": "n1"})
    assert fields_of(node, "default") == [] and fields_of(node, "kube-system") == []
    assert fields_of(node, "team") == [("involvedObject.namespace", "FieldValueInvalid")]


def test_a_reporting_controller_judged_again_gets_the_same_causes() -> None:
    """The check of a reporting controller is remembered by its name: a repeat answers as the first did, valid or
    not, with messages of its own (a list the caller may extend)."""
    for name in ("default-scheduler", "example.com/copier", "not a name", "a" * 64):
        first = v1_create_causes(event(reportingController=name), "team")
        again = v1_create_causes(event(reportingController=name), "team")
        assert first == again and (first == []) == (name in ("default-scheduler", "example.com/copier"))
        assert all(c is not d for c, d in zip(first, again, strict=True))
