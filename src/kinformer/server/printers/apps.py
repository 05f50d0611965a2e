"""Printers of the apps/v1 kinds: Deployments, ReplicaSets, StatefulSets, DaemonSets and ControllerRevisions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..endpoints.table_cells import (
    NONE,
    age_of,
    as_int,
    as_map,
    containers_cells,
    field,
    format_labels,
    format_selector,
    mappings,
    name_of,
    selector_string,
)
from .table import AGE, CONTAINERS, IMAGES, NAME, Doc, Printer, col, selector_column

_APPS = "api.apps.v1."
_READY = col("Ready", description="Number of the pod with ready state")


def replicas(obj: Mapping[str, Any]) -> int:
    """``spec.replicas`` with the API's default of 1."""
    value = field(obj, "spec", "replicas")
    return 1 if value is None else as_int(value)


def template_cells(obj: Mapping[str, Any]) -> list[str]:
    """[container names, images] of ``spec.template``."""
    return containers_cells(field(obj, "spec", "template", "spec"))


def _deployment_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """READY ready/desired, UP-TO-DATE and AVAILABLE replica counts; the selector as a plain selector string."""
    st = as_map(obj.get("status"))
    return [name_of(obj), f"{as_int(st.get('readyReplicas'))}/{replicas(obj)}", as_int(st.get("updatedReplicas")),
            as_int(st.get("availableReplicas")), age_of(obj, now), *template_cells(obj),
            selector_string(field(obj, "spec", "selector"))]


DEPLOYMENT = Printer((
    NAME, _READY,
    col("Up-to-date", description=Doc(_APPS + "DeploymentStatus", "updatedReplicas")),
    col("Available", description=Doc(_APPS + "DeploymentStatus", "availableReplicas")),
    AGE, CONTAINERS, IMAGES, selector_column(_APPS + "DeploymentSpec"),
), _deployment_row)


def _replicaset_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """DESIRED (spec), CURRENT and READY (status) replica counts."""
    st = as_map(obj.get("status"))
    return [name_of(obj), replicas(obj), as_int(st.get("replicas")), as_int(st.get("readyReplicas")),
            age_of(obj, now), *template_cells(obj), format_selector(field(obj, "spec", "selector"))]


REPLICASET = Printer((
    NAME,
    col("Desired", "integer", description=Doc(_APPS + "ReplicaSetSpec", "replicas")),
    col("Current", "integer", description=Doc(_APPS + "ReplicaSetStatus", "replicas")),
    col("Ready", "integer", description=Doc(_APPS + "ReplicaSetStatus", "readyReplicas")),
    AGE, CONTAINERS, IMAGES, selector_column(_APPS + "ReplicaSetSpec"),
), _replicaset_row)


def _statefulset_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """READY as ready/desired replicas."""
    ready = as_int(field(obj, "status", "readyReplicas"))
    return [name_of(obj), f"{ready}/{replicas(obj)}", age_of(obj, now), *template_cells(obj)]


STATEFULSET = Printer((NAME, _READY, AGE, CONTAINERS, IMAGES), _statefulset_row)


def _daemonset_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """The scheduling counts of the status and the template's node selector."""
    st = as_map(obj.get("status"))
    counts = [as_int(st.get(k)) for k in ("desiredNumberScheduled", "currentNumberScheduled", "numberReady",
                                          "updatedNumberScheduled", "numberAvailable")]
    return [name_of(obj), *counts, format_labels(field(obj, "spec", "template", "spec", "nodeSelector")),
            age_of(obj, now), *template_cells(obj), format_selector(field(obj, "spec", "selector"))]


def _ds_count(name: str, status_field: str) -> Any:
    return col(name, "integer", description=Doc(_APPS + "DaemonSetStatus", status_field))


DAEMONSET = Printer((
    NAME,
    _ds_count("Desired", "desiredNumberScheduled"), _ds_count("Current", "currentNumberScheduled"),
    _ds_count("Ready", "numberReady"), _ds_count("Up-to-date", "updatedNumberScheduled"),
    _ds_count("Available", "numberAvailable"),
    col("Node Selector", description=Doc("api.core.v1.PodSpec", "nodeSelector")),
    AGE, CONTAINERS, IMAGES, selector_column(_APPS + "DaemonSetSpec"),
), _daemonset_row)


def controller_ref(obj: Mapping[str, Any]) -> str:
    """The controlling owner as ``kind.group/name`` (lower-case kind), ``<none>`` without one."""
    for ref in mappings(field(obj, "metadata", "ownerReferences")):
        if ref.get("controller") is True:
            api_version = str(ref.get("apiVersion") or "")
            group = api_version.split("/", 1)[0] if "/" in api_version else ""
            kind = str(ref.get("kind") or "")
            if not kind and not group:
                return str(ref.get("name") or "")
            qualified = f"{kind}.{group}" if group else kind
            return f"{qualified.lower()}/{ref.get('name') or ''}"
    return NONE


CONTROLLERREVISION = Printer((
    NAME, col("Controller", description="Controller of the object"),
    col("Revision", description=Doc(_APPS + "ControllerRevision", "revision")), AGE,
), lambda obj, now: [name_of(obj), controller_ref(obj), as_int(obj.get("revision")), age_of(obj, now)])
