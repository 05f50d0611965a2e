"""Server-side printing: ``meta.k8s.io`` ``Table`` responses, as ``kubectl get`` asks for them.

Pure functions only (no I/O, no aiohttp): the request handlers negotiate a Table with
:func:`negotiate_table`, pick a :class:`Printer` with :func:`builtin_printer` or
:func:`custom_resource_printer` (from a CRD version's ``additionalPrinterColumns``) and convert a
served object or list with :func:`to_table`.

Invariants:

* A printer always yields exactly one cell per column, wide (priority > 0) columns included:
  the server prints "wide" and the client hides the priority columns it does not want.
* Column definitions are deterministic per printer, so a client can tell the header of a watch
  event from the one of the list before it by comparing them.
* Ages are computed from the ``now`` passed in (wall-clock seconds), never from the system clock.
* Cells are JSON values: strings, ints, floats, bools or ``None`` (printed empty).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from .accept import accept_clauses
from .jsonpath import JSONPathError, compile_jsonpath
from .table_cells import (
    NONE,
    UNKNOWN,
    age,
    age_of,
    as_int,
    as_list,
    containers_cells,
    field,
    format_labels,
    format_selector,
    human_duration,
    name_of,
    parse_time,
    rfc3339,
)

__all__ = [
    "INCLUDE_OBJECT_VALUES",
    "Column",
    "JSONPathError",
    "Printer",
    "age",
    "builtin_printer",
    "compile_jsonpath",
    "custom_resource_printer",
    "default_printer",
    "human_duration",
    "negotiate_table",
    "table_content_type",
    "table_row",
    "to_table",
]

TABLE_GROUP = "meta.k8s.io"
TABLE_VERSIONS = ("v1", "v1beta1")
INCLUDE_OBJECT_VALUES = ("Metadata", "Object", "None")

_NAME_DOC = ("Name must be unique within a namespace. Is required when creating resources, although some resources "
             "may allow a client to request the generation of an appropriate name automatically. Name is primarily "
             "intended for creation idempotence and configuration definition. Cannot be updated.")
_AGE_DOC = ("CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
            "guaranteed to be set in happens-before order across separate operations. Clients may not set this "
            "value. It is represented in RFC3339 form and is in UTC.")


@dataclass(frozen=True, slots=True)
class Column:
    """One ``TableColumnDefinition``: ``type`` is string | integer | number | boolean | date."""

    name: str
    type: str = "string"
    format: str = ""
    description: str = ""
    priority: int = 0

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "format": self.format, "description": self.description,
                "priority": self.priority}


RowFunc = Callable[[Mapping[str, Any], float], list[Any]]
ConditionsFunc = Callable[[Mapping[str, Any]], list[dict[str, Any]] | None]


@dataclass(frozen=True, slots=True)
class Printer:
    """Columns plus the function that renders one object into one cell per column."""

    columns: tuple[Column, ...]
    row: RowFunc
    conditions: ConditionsFunc | None = None

    def definitions(self) -> list[dict[str, Any]]:
        return [c.definition() for c in self.columns]


# ------------------------------------------------------------------------------------------ negotiation


def negotiate_table(accept: str) -> str | None:
    """The ``meta.k8s.io`` version of Table the ``Accept`` header prefers, or ``None`` for plain JSON.

    Clauses are tried by descending ``q`` (ties keep their order): the first JSON Table clause of a
    known version wins; a clause without ``as=`` (plain JSON, ``*/*``, anything else) means "no table";
    clauses asking for other ``as=`` kinds or unknown Table versions are skipped.
    """
    if "Table" not in accept:
        return None
    for media, params in accept_clauses(accept):
        kind = params.get("as")
        if kind is None:
            return None
        if (kind == "Table" and media in ("application/json", "application/*", "*/*")
                and params.get("g") == TABLE_GROUP and params.get("v") in TABLE_VERSIONS):
            return params["v"]
    return None


def table_content_type(version: str) -> str:
    """The ``Content-Type`` of a Table response of ``meta.k8s.io/<version>``."""
    return f"application/json;as=Table;v={version};g={TABLE_GROUP}"


# ------------------------------------------------------------------------------------------ tables


def to_table(printer: Printer, doc: Mapping[str, Any], *, now: float, version: str = "v1",
             include_object: str = "Metadata", headers: bool = True) -> dict[str, Any]:
    """The Table of a served list (``items``) or of one served object.

    The table's ``metadata`` carries the list's resourceVersion / continue / remainingItemCount, or
    the single object's resourceVersion. ``headers=False`` leaves ``columnDefinitions`` empty (watch
    events after the first one).
    """
    if include_object not in INCLUDE_OBJECT_VALUES:
        raise ValueError(f'unrecognized includeObject value: "{include_object}"')
    items = doc.get("items")
    is_list = isinstance(items, list) and str(doc.get("kind", "")).endswith("List")
    meta: dict[str, Any] = {}
    if is_list:
        lmeta = doc.get("metadata") or {}
        for key in ("resourceVersion", "continue", "remainingItemCount"):
            if lmeta.get(key) not in (None, ""):
                meta[key] = lmeta[key]
        objs: Sequence[Mapping[str, Any]] = items  # type: ignore[assignment]
    else:
        rv = (doc.get("metadata") or {}).get("resourceVersion")
        if rv:
            meta["resourceVersion"] = rv
        objs = (doc,)
    return {
        "kind": "Table",
        "apiVersion": f"{TABLE_GROUP}/{version}",
        "metadata": meta,
        "columnDefinitions": printer.definitions() if headers else [],
        "rows": [table_row(printer, obj, now=now, version=version, include_object=include_object) for obj in objs],
    }


def table_row(printer: Printer, obj: Mapping[str, Any], *, now: float, version: str = "v1",
              include_object: str = "Metadata") -> dict[str, Any]:
    """One ``TableRow``: cells, optional conditions and the object as ``include_object`` asks."""
    row: dict[str, Any] = {"cells": printer.row(obj, now)}
    if printer.conditions is not None:
        conds = printer.conditions(obj)
        if conds:
            row["conditions"] = conds
    if include_object == "Object":
        row["object"] = obj
    elif include_object == "None":
        row["object"] = None
    else:
        row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": f"{TABLE_GROUP}/{version}",
                         "metadata": obj.get("metadata") or {}}
    return row


# ------------------------------------------------------------------------------------------ column sets


def _col(name: str, type_: str = "string", *, priority: int = 0, description: str = "", fmt: str = "") -> Column:
    return Column(name, type_, fmt, description, priority)


NAME = Column("Name", "string", "name", _NAME_DOC)
AGE = Column("Age", "string", "", _AGE_DOC)
_CONTAINERS = _col("Containers", priority=1, description="Names of each container in the template.")
_IMAGES = _col("Images", priority=1, description="Images referenced by each container in the template.")
_SELECTOR = _col("Selector", priority=1, description="A label query over the objects this resource manages.")


# -- pods


_POD_SUCCEEDED = [{"type": "Completed", "status": "True", "reason": "Succeeded",
                   "message": "The pod has completed successfully."}]
_POD_FAILED = [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]


def _restartable(container: Any) -> bool:
    return isinstance(container, Mapping) and container.get("restartPolicy") == "Always"


def _terminated_reason(term: Mapping[str, Any], prefix: str = "") -> str:
    if term.get("reason"):
        return prefix + str(term["reason"])
    if as_int(term.get("signal")):
        return f"{prefix}Signal:{as_int(term.get('signal'))}"
    return f"{prefix}ExitCode:{as_int(term.get('exitCode'))}"


def _condition_true(conditions: Any, type_: str) -> bool:
    return any(isinstance(c, Mapping) and c.get("type") == type_ and c.get("status") == "True"
               for c in as_list(conditions))


class _PodState:
    """Running totals while a pod's container statuses are folded into its READY/STATUS/RESTARTS cells."""

    __slots__ = ("last_restart", "ready", "reason", "restarts")

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.ready = 0
        self.restarts = 0
        self.last_restart: float | None = None

    def count_restarts(self, status: Mapping[str, Any]) -> None:
        self.restarts += as_int(status.get("restartCount"))
        finished = parse_time(field(status, "lastState", "terminated", "finishedAt"))
        if finished is not None and (self.last_restart is None or finished > self.last_restart):
            self.last_restart = finished


def _pod_init(pod: Mapping[str, Any], state: _PodState) -> tuple[bool, _PodState]:
    """Fold init container statuses; returns (initializing, restartable-init-only totals)."""
    spec_init = {c.get("name"): c for c in as_list(field(pod, "spec", "initContainers")) if isinstance(c, Mapping)}
    sidecars = _PodState(state.reason)
    n_init = len(spec_init)
    for i, cs in enumerate(as_list(field(pod, "status", "initContainerStatuses"))):
        if not isinstance(cs, Mapping):
            continue
        state.count_restarts(cs)
        sidecar = _restartable(spec_init.get(cs.get("name")))
        if sidecar:
            sidecars.count_restarts(cs)
        term = field(cs, "state", "terminated")
        waiting = field(cs, "state", "waiting")
        if isinstance(term, Mapping) and as_int(term.get("exitCode")) == 0:
            continue
        if sidecar and cs.get("started") is True:
            if cs.get("ready"):
                state.ready += 1
                sidecars.ready += 1
            continue
        if isinstance(term, Mapping):
            state.reason = _terminated_reason(term, "Init:")
        elif isinstance(waiting, Mapping) and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            state.reason = "Init:" + str(waiting["reason"])
        else:
            state.reason = f"Init:{i}/{n_init}"
        return True, sidecars
    return False, sidecars


def _pod_containers(pod: Mapping[str, Any], state: _PodState) -> None:
    has_running = False
    for cs in reversed(as_list(field(pod, "status", "containerStatuses"))):
        if not isinstance(cs, Mapping):
            continue
        state.count_restarts(cs)
        waiting = field(cs, "state", "waiting")
        term = field(cs, "state", "terminated")
        if isinstance(waiting, Mapping) and waiting.get("reason"):
            state.reason = str(waiting["reason"])
        elif isinstance(term, Mapping):
            state.reason = _terminated_reason(term)
        elif cs.get("ready") and isinstance(field(cs, "state", "running"), Mapping):
            has_running = True
            state.ready += 1
    if state.reason == "Completed" and has_running:
        state.reason = "Running" if _condition_true(field(pod, "status", "conditions"), "Ready") else "NotReady"


def _pod_row(pod: Mapping[str, Any], now: float) -> list[Any]:
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    for cond in as_list(status.get("conditions")):
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    total = len(as_list(spec.get("containers")))
    total += sum(1 for c in as_list(spec.get("initContainers")) if _restartable(c))
    state = _PodState(reason)
    initializing, sidecars = _pod_init(pod, state)
    if not initializing or _condition_true(status.get("conditions"), "Initialized"):
        sidecars.reason = state.reason
        state = sidecars
        _pod_containers(pod, state)
    if field(pod, "metadata", "deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            state.reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            state.reason = "Terminating"
    restarts = str(state.restarts)
    if state.restarts and state.last_restart is not None:
        restarts = f"{state.restarts} ({human_duration(now - state.last_restart)} ago)"
    ips = as_list(status.get("podIPs"))
    ip = (ips[0].get("ip") if ips and isinstance(ips[0], Mapping) else None) or status.get("podIP") or NONE
    gates = as_list(spec.get("readinessGates"))
    gates_cell = NONE
    if gates:
        conds = {c.get("type"): c.get("status") for c in as_list(status.get("conditions")) if isinstance(c, Mapping)}
        ok = sum(1 for g in gates if isinstance(g, Mapping) and conds.get(g.get("conditionType")) == "True")
        gates_cell = f"{ok}/{len(gates)}"
    return [name_of(pod), f"{state.ready}/{total}", state.reason, restarts, age_of(pod, now), ip,
            spec.get("nodeName") or NONE, status.get("nominatedNodeName") or NONE, gates_cell]


def _pod_conditions(pod: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    phase = field(pod, "status", "phase")
    if phase == "Succeeded":
        return [dict(c) for c in _POD_SUCCEEDED]
    if phase == "Failed":
        return [dict(c) for c in _POD_FAILED]
    return None


POD = Printer((
    NAME,
    _col("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", description="The aggregate status of the containers in this pod."),
    _col("Restarts", description="The number of times the containers in this pod have been restarted and when the "
                                 "last container in this pod has restarted."),
    AGE,
    _col("IP", priority=1, description="IP address allocated to the pod."),
    _col("Node", priority=1, description="The node the pod is scheduled on."),
    _col("Nominated Node", priority=1, description="The node the scheduler nominated to run the pod."),
    _col("Readiness Gates", priority=1, description="Readiness gates of the pod that are true."),
), _pod_row, _pod_conditions)


# -- workloads


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
    _col("Ready", description="Number of the pod with ready state"),
    _col("Up-to-date", "integer", description="Total number of non-terminated pods targeted by this deployment that "
                                              "have the desired template spec."),
    _col("Available", "integer", description="Total number of available pods (ready for at least minReadySeconds) "
                                             "targeted by this deployment."),
    AGE, _CONTAINERS, _IMAGES, _SELECTOR,
), _deployment_row)


def _replicaset_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    st = obj.get("status") or {}
    return [name_of(obj), _replicas(obj), as_int(st.get("replicas")), as_int(st.get("readyReplicas")), age_of(obj, now),
            *containers_cells(field(obj, "spec", "template", "spec")), format_selector(field(obj, "spec", "selector"))]


REPLICASET = Printer((
    NAME,
    _col("Desired", "integer", description="Replicas is the number of desired replicas."),
    _col("Current", "integer", description="Replicas is the most recently observed number of replicas."),
    _col("Ready", "integer", description="The number of ready replicas for this replica set."),
    AGE, _CONTAINERS, _IMAGES, _SELECTOR,
), _replicaset_row)


def _statefulset_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    ready = as_int(field(obj, "status", "readyReplicas"))
    return [name_of(obj), f"{ready}/{_replicas(obj)}", age_of(obj, now),
            *containers_cells(field(obj, "spec", "template", "spec"))]


STATEFULSET = Printer((
    NAME, _col("Ready", description="Number of the pod with ready state"), AGE, _CONTAINERS, _IMAGES,
), _statefulset_row)


def _daemonset_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    st = obj.get("status") or {}
    return [name_of(obj), as_int(st.get("desiredNumberScheduled")), as_int(st.get("currentNumberScheduled")),
            as_int(st.get("numberReady")), as_int(st.get("updatedNumberScheduled")), as_int(st.get("numberAvailable")),
            format_labels(field(obj, "spec", "template", "spec", "nodeSelector")), age_of(obj, now),
            *containers_cells(field(obj, "spec", "template", "spec")), format_selector(field(obj, "spec", "selector"))]


DAEMONSET = Printer((
    NAME,
    _col("Desired", "integer", description="The total number of nodes that should be running the daemon pod."),
    _col("Current", "integer", description="The number of nodes running at least one daemon pod."),
    _col("Ready", "integer", description="The number of nodes running the daemon pod that are ready."),
    _col("Up-to-date", "integer", description="The number of nodes running the updated daemon pod."),
    _col("Available", "integer", description="The number of nodes running the daemon pod that are available."),
    _col("Node Selector", description="The node selector of the daemon pod template."),
    AGE, _CONTAINERS, _IMAGES, _SELECTOR,
), _daemonset_row)


# -- services and endpoints


def _lb_ingress(obj: Mapping[str, Any]) -> list[str]:
    out = []
    for ing in as_list(field(obj, "status", "loadBalancer", "ingress")):
        if isinstance(ing, Mapping) and (ing.get("ip") or ing.get("hostname")):
            out.append(str(ing.get("ip") or ing.get("hostname")))
    return out


def _external_ip(obj: Mapping[str, Any], svc_type: str) -> str:
    external = [str(x) for x in as_list(field(obj, "spec", "externalIPs"))]
    if svc_type in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else NONE
    if svc_type == "LoadBalancer":
        ips = _lb_ingress(obj) + external
        return ",".join(ips) if ips else "<pending>"
    if svc_type == "ExternalName":
        return str(field(obj, "spec", "externalName") or "")
    return UNKNOWN


def _ports(obj: Mapping[str, Any]) -> str:
    pieces = []
    for p in as_list(field(obj, "spec", "ports")):
        if not isinstance(p, Mapping):
            continue
        proto = p.get("protocol") or "TCP"
        node_port = as_int(p.get("nodePort"))
        port = as_int(p.get("port"))
        pieces.append(f"{port}:{node_port}/{proto}" if node_port > 0 else f"{port}/{proto}")
    return ",".join(pieces) if pieces else NONE


def _service_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    spec = obj.get("spec") or {}
    svc_type = str(spec.get("type") or "ClusterIP")
    ips = as_list(spec.get("clusterIPs"))
    cluster_ip = str(ips[0]) if ips else str(spec.get("clusterIP") or NONE)
    return [name_of(obj), svc_type, cluster_ip, _external_ip(obj, svc_type), _ports(obj), age_of(obj, now),
            format_labels(spec.get("selector"))]


SERVICE = Printer((
    NAME,
    _col("Type", description="type determines how the Service is exposed."),
    _col("Cluster-IP", description="clusterIP is the IP address of the service."),
    _col("External-IP", description="externalIPs is a list of IP addresses for which nodes in the cluster will also "
                                    "accept traffic for this service."),
    _col("Port(s)", description="The list of ports that are exposed by this service."),
    AGE,
    _col("Selector", priority=1, description="Route service traffic to pods with label keys and values matching "
                                             "this selector."),
), _service_row)


def _host_port(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _endpoints_cell(obj: Mapping[str, Any]) -> str:
    subsets = [s for s in as_list(obj.get("subsets")) if isinstance(s, Mapping)]
    if not subsets:
        return NONE
    shown: list[str] = []
    count = 0
    for ss in subsets:
        addrs = [str(a.get("ip", "")) for a in as_list(ss.get("addresses")) if isinstance(a, Mapping)]
        ports = [as_int(p.get("port")) for p in as_list(ss.get("ports")) if isinstance(p, Mapping)]
        pairs = addrs if not ports else [_host_port(a, p) for p in ports for a in addrs]
        count += len(pairs)
        shown.extend(pairs[:max(0, 3 - len(shown))])
    text = ",".join(shown)
    return f"{text} + {count - 3} more..." if count > 3 else text


ENDPOINTS = Printer((
    NAME, _col("Endpoints", description="The set of all endpoints is the union of all subsets."), AGE,
), lambda obj, now: [name_of(obj), _endpoints_cell(obj), age_of(obj, now)])


# -- nodes, namespaces and small kinds


def _node_address(obj: Mapping[str, Any], kind: str) -> str:
    for addr in as_list(field(obj, "status", "addresses")):
        if isinstance(addr, Mapping) and addr.get("type") == kind:
            return str(addr.get("address") or NONE)
    return NONE


def _node_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    ready = "Unknown"
    for cond in as_list(field(obj, "status", "conditions")):
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            ready = {"True": "Ready", "False": "NotReady"}.get(str(cond.get("status")), "Unknown")
    status = [ready, "SchedulingDisabled"] if field(obj, "spec", "unschedulable") else [ready]
    labels = field(obj, "metadata", "labels") or {}
    roles = set()
    for key, value in labels.items():
        if key.startswith("node-role.kubernetes.io/") and key != "node-role.kubernetes.io/":
            roles.add(key.removeprefix("node-role.kubernetes.io/"))
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    info = field(obj, "status", "nodeInfo") or {}
    return [name_of(obj), ",".join(status), ",".join(sorted(roles)) or NONE, age_of(obj, now),
            str(info.get("kubeletVersion") or ""), _node_address(obj, "InternalIP"), _node_address(obj, "ExternalIP"),
            str(info.get("osImage") or UNKNOWN), str(info.get("kernelVersion") or UNKNOWN),
            str(info.get("containerRuntimeVersion") or UNKNOWN)]


NODE = Printer((
    NAME,
    _col("Status", description="The status of the node"),
    _col("Roles", description="The roles of the node"),
    AGE,
    _col("Version", description="Kubelet Version reported by the node."),
    _col("Internal-IP", priority=1, description="List of addresses reachable to the node."),
    _col("External-IP", priority=1, description="List of addresses reachable to the node."),
    _col("OS-Image", priority=1, description="OS Image reported by the node from /etc/os-release."),
    _col("Kernel-Version", priority=1, description="Kernel Version reported by the node."),
    _col("Container-Runtime", priority=1, description="ContainerRuntime Version reported by the node."),
), _node_row)

NAMESPACE = Printer((NAME, _col("Status", description="The status of the namespace"), AGE),
                    lambda obj, now: [name_of(obj), str(field(obj, "status", "phase") or "Active"), age_of(obj, now)])


def _configmap_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    data = obj.get("data")
    binary = obj.get("binaryData")
    n = (len(data) if isinstance(data, Mapping) else 0) + (len(binary) if isinstance(binary, Mapping) else 0)
    return [name_of(obj), n, age_of(obj, now)]


CONFIGMAP = Printer((NAME, _col("Data", "integer", description="Number of user provided data entries."), AGE),
                    _configmap_row)


def _secret_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    data = obj.get("data")
    n = len(data) if isinstance(data, Mapping) else 0
    return [name_of(obj), str(obj.get("type") or "Opaque"), n, age_of(obj, now)]


SECRET = Printer((
    NAME, _col("Type", description="Used to facilitate programmatic handling of secret data."),
    _col("Data", "integer", description="Number of user provided data entries."), AGE,
), _secret_row)

SERVICEACCOUNT = Printer(
    (NAME, _col("Secrets", "integer", description="Secrets is a list of the secrets in the same namespace that pods "
                                                  "running using this ServiceAccount are allowed to use."), AGE),
    lambda obj, now: [name_of(obj), len(as_list(obj.get("secrets"))), age_of(obj, now)])

LEASE = Printer((NAME, _col("Holder", description="HolderIdentity contains the identity of the holder of a current "
                                                  "lease."), AGE),
                lambda obj, now: [name_of(obj), str(field(obj, "spec", "holderIdentity") or ""), age_of(obj, now)])


# -- events (core/v1 and events.k8s.io/v1 share one printer, as in kube)


def _event_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The core/v1 view of an Event of either API group."""
    if "regarding" in obj or "note" in obj or "deprecatedCount" in obj or "reportingController" in obj:
        return {"involvedObject": obj.get("regarding") or {}, "message": obj.get("note"),
                "firstTimestamp": obj.get("deprecatedFirstTimestamp"),
                "lastTimestamp": obj.get("deprecatedLastTimestamp"), "count": obj.get("deprecatedCount"),
                "source": obj.get("deprecatedSource") or {}, "reportingComponent": obj.get("reportingController"),
                "reportingInstance": obj.get("reportingInstance"), "series": obj.get("series"),
                "eventTime": obj.get("eventTime")}
    return dict(obj)


def _event_row(obj: Mapping[str, Any], now: float) -> list[Any]:
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
    inv = ev.get("involvedObject") or {}
    kind = str(inv.get("kind") or "").lower()
    target = f"{kind}/{inv['name']}" if inv.get("name") else kind
    src = ev.get("source") or {}
    component = src.get("component") or ev.get("reportingComponent") or ""
    instance = src.get("host") or ev.get("reportingInstance") or ""
    source = f"{component}, {instance}" if instance else str(component)
    return [last, str(obj.get("type") or ""), str(obj.get("reason") or ""), target, str(inv.get("fieldPath") or ""),
            source, str(ev.get("message") or "").strip(), first, count, name_of(obj)]


EVENT = Printer((
    _col("Last Seen", description="The time at which the most recent occurrence of this event was recorded."),
    _col("Type", description="Type of this event (Normal, Warning), new types could be added in the future."),
    _col("Reason", description="This should be a short, machine understandable string that gives the reason for "
                               "the transition into the object's current status."),
    _col("Object", description="The object this Event is about."),
    _col("Subobject", priority=1, description="The field of the object this Event is about."),
    _col("Source", priority=1, description="The component reporting this event."),
    _col("Message", description="A human-readable description of the status of this operation."),
    _col("First Seen", priority=1, description="The time at which the event was first recorded."),
    _col("Count", priority=1, description="The number of times this event has occurred."),
    Column("Name", "string", "name", _NAME_DOC, 1),
), _event_row)


# -- default (kube's generic convertor, also used for CustomResourceDefinitions)


DEFAULT = Printer((NAME, Column("Created At", "date", "", _AGE_DOC)),
                  lambda obj, now: [name_of(obj), rfc3339(field(obj, "metadata", "creationTimestamp"))])

_BUILTIN: dict[tuple[str, str], Printer] = {
    ("", "pods"): POD,
    ("", "services"): SERVICE,
    ("", "endpoints"): ENDPOINTS,
    ("", "nodes"): NODE,
    ("", "namespaces"): NAMESPACE,
    ("", "configmaps"): CONFIGMAP,
    ("", "secrets"): SECRET,
    ("", "serviceaccounts"): SERVICEACCOUNT,
    ("", "events"): EVENT,
    ("events.k8s.io", "events"): EVENT,
    ("apps", "deployments"): DEPLOYMENT,
    ("apps", "replicasets"): REPLICASET,
    ("apps", "statefulsets"): STATEFULSET,
    ("apps", "daemonsets"): DAEMONSET,
    ("coordination.k8s.io", "leases"): LEASE,
}


def builtin_printer(group: str, plural: str) -> Printer:
    """The printer kube uses for a built-in resource; the generic Name / Created At one otherwise."""
    return _BUILTIN.get((group, plural), DEFAULT)


def default_printer() -> Printer:
    """kube's generic table convertor: Name and Created At (RFC 3339)."""
    return DEFAULT


# ------------------------------------------------------------------------------------------ custom resources


def _go_text(value: Any) -> str:
    """A JSON value printed as kubectl's JSONPath printer does (strings verbatim)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return orjson.dumps(value).decode()


def _typed_cell(col_type: str, value: Any, now: float) -> Any:
    """A non-string column's cell: the value when it has the column's JSON type, else ``None``."""
    if col_type == "integer":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
        return None
    if col_type == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        return None
    if col_type == "boolean":
        return value if isinstance(value, bool) else None
    if col_type == "date":
        if not isinstance(value, str):
            return None
        ts = parse_time(value)
        return "<invalid>" if ts is None else human_duration(now - ts)
    return None


def custom_resource_printer(columns: Sequence[Mapping[str, Any]] | None) -> Printer:
    """The printer of a CRD version from its ``additionalPrinterColumns``, as apiextensions serves it.

    NAME always comes first; without printer columns the only other column is an AGE (type ``date``)
    of ``.metadata.creationTimestamp``. A column whose jsonPath cannot be parsed prints empty cells.
    """
    if not columns:
        columns = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": _AGE_DOC}]
    defs: list[Column] = [NAME]
    paths: list[tuple[str, Callable[[Any], list[Any]] | None]] = []
    for col in columns:
        json_path = str(col.get("jsonPath") or "")
        col_type = str(col.get("type") or "string")
        desc = str(col.get("description") or f"Custom resource definition column (in JSONPath format): {json_path}")
        defs.append(Column(str(col.get("name") or ""), col_type, str(col.get("format") or ""), desc,
                           as_int(col.get("priority"))))
        try:
            paths.append((col_type, compile_jsonpath(json_path)))
        except (JSONPathError, ValueError):
            paths.append((col_type, None))

    def row(obj: Mapping[str, Any], now: float) -> list[Any]:
        cells: list[Any] = [name_of(obj)]
        for col_type, evaluate in paths:
            found = evaluate(obj) if evaluate is not None else []
            if not found:
                cells.append(None)
            elif col_type == "string":
                cells.append(_go_text(found[0]))
            else:
                cells.append(_typed_cell(col_type, found[0], now))
        return cells

    return Printer(tuple(defs), row)


def crd_printer_columns(crd: Mapping[str, Any], version: str) -> list[Mapping[str, Any]]:
    """The ``additionalPrinterColumns`` of ``version`` in an apiextensions.k8s.io/v1 CRD object."""
    for ver in as_list(field(crd, "spec", "versions")):
        if isinstance(ver, Mapping) and ver.get("name") == version:
            return [c for c in as_list(ver.get("additionalPrinterColumns")) if isinstance(c, Mapping)]
    return []
