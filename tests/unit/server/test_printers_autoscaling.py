"""kube's HorizontalPodAutoscaler columns for autoscaling/v2 and v1 objects
(``kinformer.server.printers.autoscaling``)."""

from __future__ import annotations

from typing import Any

from kinformer.server.endpoints.tables import scale_printer
from tablelib import NOW, cells, headers, meta

REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "php-apache"}


def hpa(spec: dict[str, Any], status: dict[str, Any] | None = None, version: str = "v2") -> dict[str, Any]:
    return {"apiVersion": f"autoscaling/{version}", "kind": "HorizontalPodAutoscaler", "metadata": meta("php-apache"),
            "spec": {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 10, **spec}, "status": status or {}}


def cpu(utilization: int) -> dict[str, Any]:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                       "averageUtilization": utilization}}}


def test_v2_cpu_utilization_row() -> None:
    assert headers("autoscaling", "horizontalpodautoscalers") == ["Name", "Reference", "Targets", "MinPods",
                                                                  "MaxPods", "Replicas", "Age"]
    current = {"currentReplicas": 1, "desiredReplicas": 1, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 0, "averageValue": "1m"}}}]}
    assert cells("autoscaling", "horizontalpodautoscalers", hpa({"metrics": [cpu(50)]}, current)) == [
        "php-apache", "Deployment/php-apache", "cpu: 0%/50%", "1", 10, 1, "5m"]
    assert cells("autoscaling", "horizontalpodautoscalers", hpa({"metrics": [cpu(50)]}))[2] == "cpu: <unknown>/50%"


def test_v2_several_metric_kinds_show_two_and_a_count() -> None:
    metrics = [
        {"type": "Resource", "resource": {"name": "memory",
                                          "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
        {"type": "Pods", "pods": {"metric": {"name": "packets-per-second"},
                                  "target": {"type": "AverageValue", "averageValue": "1k"}}},
        {"type": "Object", "object": {"metric": {"name": "requests-per-second"},
                                      "describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                                                          "name": "main-route"},
                                      "target": {"type": "Value", "value": "10k"}}},
    ]
    status = {"currentReplicas": 3, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "300Mi"}}},
        {"type": "Pods", "pods": {"metric": {"name": "packets-per-second"}, "current": {"averageValue": "900"}}}]}
    assert cells("autoscaling", "horizontalpodautoscalers", hpa({"metrics": metrics}, status))[2] == \
        "memory: 300Mi/500Mi, 900/1k + 1 more..."
    external = [{"type": "External", "external": {"metric": {"name": "queue_messages"},
                                                  "target": {"type": "AverageValue", "averageValue": "30"}}}]
    assert cells("autoscaling", "horizontalpodautoscalers", hpa({"metrics": external}))[2] == "<unknown>/30 (avg)"
    assert cells("autoscaling", "horizontalpodautoscalers", hpa({"metrics": []}))[2] == "<none>"


def test_v1_cpu_target_reads_as_a_resource_metric() -> None:
    v1 = hpa({"targetCPUUtilizationPercentage": 50}, {"currentReplicas": 2, "currentCPUUtilizationPercentage": 20},
             version="v1")
    assert cells("autoscaling", "horizontalpodautoscalers", v1)[2:6] == ["cpu: 20%/50%", "1", 10, 2]
    untargeted = hpa({"minReplicas": None}, version="v1")
    assert cells("autoscaling", "horizontalpodautoscalers", untargeted)[2:4] == ["cpu: <unknown>/80%", "<unset>"]


def test_scale_printer_row() -> None:
    printer = scale_printer()
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": meta("web"), "spec": {"replicas": 3},
             "status": {"replicas": 2, "selector": "app=web"}}
    assert [(c.name, c.type, c.format) for c in printer.columns] == [
        ("Name", "string", ""), ("Desired", "integer", ""), ("Available", "integer", ""), ("Age", "string", "")]
    assert printer.row(scale, NOW) == ["web", 3, 2, "5m"]
