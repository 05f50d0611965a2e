"""Printers of the apps/v1 workloads: Deployments, ReplicaSets, StatefulSets and DaemonSets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..table_cells import (
    age_of,
    as_int,
    containers_cells,
    field,
    format_labels,
    format_selector,
    name_of,
)
from .table import AGE, CONTAINERS, IMAGES, NAME, SELECTOR, Printer, col


def _replicas(obj: Mapping[str, Any]) -> int:
    """``spec.replicas`` with the apps/v1 default of 1."""
    value = field(obj, "spec", "replicas")
    return 1 if value is None else as_int(value)


def _deployment_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    st = obj.get("status") or {}
    return [name_of(obj), f"{as_int(st.get('readyReplicas'))}/{_replicas(obj)}", as_int(st.get("updatedReplicas")),
            as_int(st.get("availableReplicas")), age_of(obj, now),
            *containers_cells(field(obj, "spec", "template", "spec")), format_selector(field(obj, "spec", "selector"))]


DEPLOYMENT = Printer((
    NAME,
    col("Ready", description="Number of the pod with ready state"),
    col("Up-to-date", "integer", description="Total number of non-terminated pods targeted by this deployment that "
                                              "have the desired template spec."),
    col("Available", "integer", description="Total number of available pods (ready for at least minReadySeconds) "
                                             "targeted by this deployment."),
    AGE, CONTAINERS, IMAGES, SELECTOR,
), _deployment_row)


def _replicaset_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    st = obj.get("status") or {}
    return [name_of(obj), _replicas(obj), as_int(st.get("replicas")), as_int(st.get("readyReplicas")), age_of(obj, now),
            *containers_cells(field(obj, "spec", "template", "spec")), format_selector(field(obj, "spec", "selector"))]


REPLICASET = Printer((
    NAME,
    col("Desired", "integer", description="Replicas is the number of desired replicas."),
    col("Current", "integer", description="Replicas is the most recently observed number of replicas."),
    col("Ready", "integer", description="The number of ready replicas for this replica set."),
    AGE, CONTAINERS, IMAGES, SELECTOR,
), _replicaset_row)


def _statefulset_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    ready = as_int(field(obj, "status", "readyReplicas"))
    return [name_of(obj), f"{ready}/{_replicas(obj)}", age_of(obj, now),
            *containers_cells(field(obj, "spec", "template", "spec"))]


STATEFULSET = Printer((
    NAME, col("Ready", description="Number of the pod with ready state"), AGE, CONTAINERS, IMAGES,
), _statefulset_row)


def _daemonset_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    st = obj.get("status") or {}
    return [name_of(obj), as_int(st.get("desiredNumberScheduled")), as_int(st.get("currentNumberScheduled")),
            as_int(st.get("numberReady")), as_int(st.get("updatedNumberScheduled")), as_int(st.get("numberAvailable")),
            format_labels(field(obj, "spec", "template", "spec", "nodeSelector")), age_of(obj, now),
            *containers_cells(field(obj, "spec", "template", "spec")), format_selector(field(obj, "spec", "selector"))]


DAEMONSET = Printer((
    NAME,
    col("Desired", "integer", description="The total number of nodes that should be running the daemon pod."),
    col("Current", "integer", description="The number of nodes running at least one daemon pod."),
    col("Ready", "integer", description="The number of nodes running the daemon pod that are ready."),
    col("Up-to-date", "integer", description="The number of nodes running the updated daemon pod."),
    col("Available", "integer", description="The number of nodes running the daemon pod that are available."),
    col("Node Selector", description="The node selector of the daemon pod template."),
    AGE, CONTAINERS, IMAGES, SELECTOR,
), _daemonset_row)

