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

import datetime as _dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import SelectorError
from ..selectors import label_selector_from_dict
from .accept import accept_clauses

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
NONE = "<none>"
UNKNOWN = "<unknown>"

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


# ------------------------------------------------------------------------------------------ formatting


def parse_time(value: Any) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp (``Time`` or ``MicroTime``); ``None`` when absent or invalid."""
    if not isinstance(value, str) or not value:
        return None
    try:
        ts = _dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=_dt.UTC)
    return ts.timestamp()


def human_duration(seconds: float) -> str:
    """A duration the way kubectl prints ages: ``45s``, ``3m20s``, ``25m``, ``5h10m``, ``3d4h``, ``2y30d``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        rest = days % 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{years}y"


def age(timestamp: Any, now: float) -> str:
    """The age of an RFC 3339 ``timestamp`` at ``now``; ``<unknown>`` when it is missing or malformed."""
    ts = parse_time(timestamp)
    return UNKNOWN if ts is None else human_duration(now - ts)


def _rfc3339(timestamp: Any) -> str:
    ts = parse_time(timestamp)
    if ts is None:
        return ""
    return _dt.datetime.fromtimestamp(int(ts), _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_labels(labels: Any) -> str:
    """``k=v,...`` sorted by key, ``<none>`` when empty (kube's labels.FormatLabels)."""
    if not isinstance(labels, Mapping) or not labels:
        return NONE
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_selector(selector: Any) -> str:
    """A metav1.LabelSelector in its string form (``""`` matches everything, ``<none>`` when unset)."""
    if not isinstance(selector, Mapping):
        return NONE
    try:
        return str(label_selector_from_dict(selector))
    except SelectorError:
        return "<error>"


def _get(obj: Any, *path: str) -> Any:
    cur = obj
    for part in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return default


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _name(obj: Mapping[str, Any]) -> str:
    return str(_get(obj, "metadata", "name") or "")


def _age(obj: Mapping[str, Any], now: float) -> str:
    return age(_get(obj, "metadata", "creationTimestamp"), now)


def _containers_cells(pod_spec: Any) -> list[str]:
    """[names, images] of a pod template's containers, comma-joined."""
    containers = [c for c in _list(_get(pod_spec, "containers")) if isinstance(c, Mapping)]
    return [",".join(str(c.get("name", "")) for c in containers), ",".join(str(c.get("image", "")) for c in containers)]


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
    if _int(term.get("signal")):
        return f"{prefix}Signal:{_int(term.get('signal'))}"
    return f"{prefix}ExitCode:{_int(term.get('exitCode'))}"


def _condition_true(conditions: Any, type_: str) -> bool:
    return any(isinstance(c, Mapping) and c.get("type") == type_ and c.get("status") == "True"
               for c in _list(conditions))


class _PodState:
    """Running totals while a pod's container statuses are folded into its READY/STATUS/RESTARTS cells."""

    __slots__ = ("last_restart", "ready", "reason", "restarts")

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.ready = 0
        self.restarts = 0
        self.last_restart: float | None = None

    def count_restarts(self, status: Mapping[str, Any]) -> None:
        self.restarts += _int(status.get("restartCount"))
        finished = parse_time(_get(status, "lastState", "terminated", "finishedAt"))
        if finished is not None and (self.last_restart is None or finished > self.last_restart):
            self.last_restart = finished


def _pod_init(pod: Mapping[str, Any], state: _PodState) -> tuple[bool, _PodState]:
    """Fold init container statuses; returns (initializing, restartable-init-only totals)."""
    spec_init = {c.get("name"): c for c in _list(_get(pod, "spec", "initContainers")) if isinstance(c, Mapping)}
    sidecars = _PodState(state.reason)
    n_init = len(spec_init)
    for i, cs in enumerate(_list(_get(pod, "status", "initContainerStatuses"))):
        if not isinstance(cs, Mapping):
            continue
        state.count_restarts(cs)
        sidecar = _restartable(spec_init.get(cs.get("name")))
        if sidecar:
            sidecars.count_restarts(cs)
        term = _get(cs, "state", "terminated")
        waiting = _get(cs, "state", "waiting")
        if isinstance(term, Mapping) and _int(term.get("exitCode")) == 0:
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
    for cs in reversed(_list(_get(pod, "status", "containerStatuses"))):
        if not isinstance(cs, Mapping):
            continue
        state.count_restarts(cs)
        waiting = _get(cs, "state", "waiting")
        term = _get(cs, "state", "terminated")
        if isinstance(waiting, Mapping) and waiting.get("reason"):
            state.reason = str(waiting["reason"])
        elif isinstance(term, Mapping):
            state.reason = _terminated_reason(term)
        elif cs.get("ready") and isinstance(_get(cs, "state", "running"), Mapping):
            has_running = True
            state.ready += 1
    if state.reason == "Completed" and has_running:
        state.reason = "Running" if _condition_true(_get(pod, "status", "conditions"), "Ready") else "NotReady"


def _pod_row(pod: Mapping[str, Any], now: float) -> list[Any]:
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    for cond in _list(status.get("conditions")):
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    total = len(_list(spec.get("containers"))) + sum(1 for c in _list(spec.get("initContainers")) if _restartable(c))
    state = _PodState(reason)
    initializing, sidecars = _pod_init(pod, state)
    if not initializing or _condition_true(status.get("conditions"), "Initialized"):
        sidecars.reason = state.reason
        state = sidecars
        _pod_containers(pod, state)
    if _get(pod, "metadata", "deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            state.reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            state.reason = "Terminating"
    restarts = str(state.restarts)
    if state.restarts and state.last_restart is not None:
        restarts = f"{state.restarts} ({human_duration(now - state.last_restart)} ago)"
    ips = _list(status.get("podIPs"))
    ip = (ips[0].get("ip") if ips and isinstance(ips[0], Mapping) else None) or status.get("podIP") or NONE
    gates = _list(spec.get("readinessGates"))
    gates_cell = NONE
    if gates:
        conds = {c.get("type"): c.get("status") for c in _list(status.get("conditions")) if isinstance(c, Mapping)}
        ok = sum(1 for g in gates if isinstance(g, Mapping) and conds.get(g.get("conditionType")) == "True")
        gates_cell = f"{ok}/{len(gates)}"
    return [_name(pod), f"{state.ready}/{total}", state.reason, restarts, _age(pod, now), ip,
            spec.get("nodeName") or NONE, status.get("nominatedNodeName") or NONE, gates_cell]


def _pod_conditions(pod: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    phase = _get(pod, "status", "phase")
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
    value = _get(obj, "spec", "replicas")
    return 1 if value is None else _int(value)


def _deployment_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    st = obj.get("status") or {}
    return [_name(obj), f"{_int(st.get('readyReplicas'))}/{_replicas(obj)}", _int(st.get("updatedReplicas")),
            _int(st.get("availableReplicas")), _age(obj, now),
            *_containers_cells(_get(obj, "spec", "template", "spec")), format_selector(_get(obj, "spec", "selector"))]


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
    return [_name(obj), _replicas(obj), _int(st.get("replicas")), _int(st.get("readyReplicas")), _age(obj, now),
            *_containers_cells(_get(obj, "spec", "template", "spec")), format_selector(_get(obj, "spec", "selector"))]


REPLICASET = Printer((
    NAME,
    _col("Desired", "integer", description="Replicas is the number of desired replicas."),
    _col("Current", "integer", description="Replicas is the most recently observed number of replicas."),
    _col("Ready", "integer", description="The number of ready replicas for this replica set."),
    AGE, _CONTAINERS, _IMAGES, _SELECTOR,
), _replicaset_row)


def _statefulset_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    ready = _int(_get(obj, "status", "readyReplicas"))
    return [_name(obj), f"{ready}/{_replicas(obj)}", _age(obj, now),
            *_containers_cells(_get(obj, "spec", "template", "spec"))]


STATEFULSET = Printer((
    NAME, _col("Ready", description="Number of the pod with ready state"), AGE, _CONTAINERS, _IMAGES,
), _statefulset_row)


def _daemonset_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    st = obj.get("status") or {}
    return [_name(obj), _int(st.get("desiredNumberScheduled")), _int(st.get("currentNumberScheduled")),
            _int(st.get("numberReady")), _int(st.get("updatedNumberScheduled")), _int(st.get("numberAvailable")),
            format_labels(_get(obj, "spec", "template", "spec", "nodeSelector")), _age(obj, now),
            *_containers_cells(_get(obj, "spec", "template", "spec")), format_selector(_get(obj, "spec", "selector"))]


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
    for ing in _list(_get(obj, "status", "loadBalancer", "ingress")):
        if isinstance(ing, Mapping) and (ing.get("ip") or ing.get("hostname")):
            out.append(str(ing.get("ip") or ing.get("hostname")))
    return out


def _external_ip(obj: Mapping[str, Any], svc_type: str) -> str:
    external = [str(x) for x in _list(_get(obj, "spec", "externalIPs"))]
    if svc_type in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else NONE
    if svc_type == "LoadBalancer":
        ips = _lb_ingress(obj) + external
        return ",".join(ips) if ips else "<pending>"
    if svc_type == "ExternalName":
        return str(_get(obj, "spec", "externalName") or "")
    return UNKNOWN


def _ports(obj: Mapping[str, Any]) -> str:
    pieces = []
    for p in _list(_get(obj, "spec", "ports")):
        if not isinstance(p, Mapping):
            continue
        proto = p.get("protocol") or "TCP"
        node_port = _int(p.get("nodePort"))
        port = _int(p.get("port"))
        pieces.append(f"{port}:{node_port}/{proto}" if node_port > 0 else f"{port}/{proto}")
    return ",".join(pieces) if pieces else NONE


def _service_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    spec = obj.get("spec") or {}
    svc_type = str(spec.get("type") or "ClusterIP")
    ips = _list(spec.get("clusterIPs"))
    cluster_ip = str(ips[0]) if ips else str(spec.get("clusterIP") or NONE)
    return [_name(obj), svc_type, cluster_ip, _external_ip(obj, svc_type), _ports(obj), _age(obj, now),
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
    subsets = [s for s in _list(obj.get("subsets")) if isinstance(s, Mapping)]
    if not subsets:
        return NONE
    shown: list[str] = []
    count = 0
    for ss in subsets:
        addrs = [str(a.get("ip", "")) for a in _list(ss.get("addresses")) if isinstance(a, Mapping)]
        ports = [_int(p.get("port")) for p in _list(ss.get("ports")) if isinstance(p, Mapping)]
        pairs = addrs if not ports else [_host_port(a, p) for p in ports for a in addrs]
        count += len(pairs)
        shown.extend(pairs[:max(0, 3 - len(shown))])
    text = ",".join(shown)
    return f"{text} + {count - 3} more..." if count > 3 else text


ENDPOINTS = Printer((
    NAME, _col("Endpoints", description="The set of all endpoints is the union of all subsets."), AGE,
), lambda obj, now: [_name(obj), _endpoints_cell(obj), _age(obj, now)])


# -- nodes, namespaces and small kinds


def _node_address(obj: Mapping[str, Any], kind: str) -> str:
    for addr in _list(_get(obj, "status", "addresses")):
        if isinstance(addr, Mapping) and addr.get("type") == kind:
            return str(addr.get("address") or NONE)
    return NONE


def _node_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    ready = "Unknown"
    for cond in _list(_get(obj, "status", "conditions")):
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            ready = {"True": "Ready", "False": "NotReady"}.get(str(cond.get("status")), "Unknown")
    status = [ready, "SchedulingDisabled"] if _get(obj, "spec", "unschedulable") else [ready]
    labels = _get(obj, "metadata", "labels") or {}
    roles = set()
    for key, value in labels.items():
        if key.startswith("node-role.kubernetes.io/") and key != "node-role.kubernetes.io/":
            roles.add(key.removeprefix("node-role.kubernetes.io/"))
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    info = _get(obj, "status", "nodeInfo") or {}
    return [_name(obj), ",".join(status), ",".join(sorted(roles)) or NONE, _age(obj, now),
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
                    lambda obj, now: [_name(obj), str(_get(obj, "status", "phase") or "Active"), _age(obj, now)])


def _configmap_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    data = obj.get("data")
    binary = obj.get("binaryData")
    n = (len(data) if isinstance(data, Mapping) else 0) + (len(binary) if isinstance(binary, Mapping) else 0)
    return [_name(obj), n, _age(obj, now)]


CONFIGMAP = Printer((NAME, _col("Data", "integer", description="Number of user provided data entries."), AGE),
                    _configmap_row)


def _secret_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    data = obj.get("data")
    n = len(data) if isinstance(data, Mapping) else 0
    return [_name(obj), str(obj.get("type") or "Opaque"), n, _age(obj, now)]


SECRET = Printer((
    NAME, _col("Type", description="Used to facilitate programmatic handling of secret data."),
    _col("Data", "integer", description="Number of user provided data entries."), AGE,
), _secret_row)

SERVICEACCOUNT = Printer(
    (NAME, _col("Secrets", "integer", description="Secrets is a list of the secrets in the same namespace that pods "
                                                  "running using this ServiceAccount are allowed to use."), AGE),
    lambda obj, now: [_name(obj), len(_list(obj.get("secrets"))), _age(obj, now)])

LEASE = Printer((NAME, _col("Holder", description="HolderIdentity contains the identity of the holder of a current "
                                                  "lease."), AGE),
                lambda obj, now: [_name(obj), str(_get(obj, "spec", "holderIdentity") or ""), _age(obj, now)])


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
    count = _int(ev.get("count"))
    series = ev.get("series")
    if isinstance(series, Mapping):
        last = age(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
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
            source, str(ev.get("message") or "").strip(), first, count, _name(obj)]


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
                  lambda obj, now: [_name(obj), _rfc3339(_get(obj, "metadata", "creationTimestamp"))])

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


class JSONPathError(ValueError):
    """A printer column's jsonPath that this evaluator cannot parse."""


Step = Callable[[Any], list[Any]]

_FILTER_RE = re.compile(r"""^\?\(\s*@((?:\.[^\s=!<>]+)*)\s*(?:(==|!=|<=|>=|<|>)\s*(.+?))?\s*\)$""")


def _field_step(name: str) -> Step:
    return lambda v: [v[name]] if isinstance(v, Mapping) and name in v else []


def _wildcard(v: Any) -> list[Any]:
    if isinstance(v, Mapping):
        return list(v.values())
    return list(v) if isinstance(v, list) else []


def _index_step(text: str) -> Step:
    if ":" in text:
        parts = [int(p) if p.strip() else None for p in text.split(":")[:3]]
        sl = slice(*parts)
        return lambda v: list(v[sl]) if isinstance(v, list) else []
    i = int(text)
    return lambda v: [v[i]] if isinstance(v, list) and -len(v) <= i < len(v) else []


def _literal(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _compare(left: Any, op: str, right: Any) -> bool:
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    if not isinstance(left, (int, float)) or not isinstance(right, (int, float)) or isinstance(left, bool):
        return False
    return {"<": left < right, ">": left > right, "<=": left <= right, ">=": left >= right}[op]


def _filter_step(expr: str) -> Step:
    m = _FILTER_RE.match(expr)
    if m is None:
        raise JSONPathError(f"unsupported filter: [{expr}]")
    sub = _compile_steps(m.group(1)) if m.group(1) else []
    op, rhs = m.group(2), m.group(3)
    right = _literal(rhs) if op else None

    def step(v: Any) -> list[Any]:
        out = []
        for item in _wildcard(v):
            found = _run(sub, item)
            if op is None:
                if found:
                    out.append(item)
            elif found and _compare(found[0], op, right):
                out.append(item)
        return out

    return step


def _read_name(path: str, i: int) -> tuple[str, int]:
    """A dotted field name starting at ``i`` (``\\.`` escapes a dot); returns (name, next index)."""
    buf = []
    while i < len(path) and path[i] not in ".[":
        if path[i] == "\\" and i + 1 < len(path):
            i += 1
        buf.append(path[i])
        i += 1
    return "".join(buf), i


def _bracket_step(inner: str) -> Step:
    inner = inner.strip()
    if inner == "*":
        return _wildcard
    if inner.startswith("?"):
        return _filter_step(inner)
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        return _field_step(inner[1:-1])
    try:
        return _index_step(inner)
    except ValueError:
        raise JSONPathError(f"unsupported subscript: [{inner}]") from None


def _compile_steps(path: str) -> list[Step]:
    steps: list[Step] = []
    i = 0
    while i < len(path):
        ch = path[i]
        if ch == ".":
            if path.startswith(".*", i):
                steps.append(_wildcard)
                i += 2
                continue
            name, i = _read_name(path, i + 1)
            if name:
                steps.append(_field_step(name))
        elif ch == "[":
            depth, j = 0, i
            while j < len(path):
                depth += {"[": 1, "]": -1}.get(path[j], 0)
                if depth == 0:
                    break
                j += 1
            if j >= len(path):
                raise JSONPathError(f"unclosed [ in {path!r}")
            steps.append(_bracket_step(path[i + 1:j]))
            i = j + 1
        else:
            name, i = _read_name(path, i)
            steps.append(_field_step(name))
    return steps


def _run(steps: Sequence[Step], value: Any) -> list[Any]:
    current = [value]
    for step in steps:
        nxt: list[Any] = []
        for v in current:
            nxt.extend(step(v))
        current = nxt
        if not current:
            break
    return current


def compile_jsonpath(path: str) -> Callable[[Any], list[Any]]:
    """A evaluator of the kubectl JSONPath subset used by printer columns: ``.a.b``, ``['k']``, ``[0]``,
    ``[*]``, ``[1:3]``, ``\\.``-escaped dots and ``[?(@.type=="Ready")]`` filters. Returns every match."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    text = text.removeprefix("$")
    steps = _compile_steps(text)
    return lambda obj: _run(steps, obj)


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
                           _int(col.get("priority"))))
        try:
            paths.append((col_type, compile_jsonpath(json_path)))
        except (JSONPathError, ValueError):
            paths.append((col_type, None))

    def row(obj: Mapping[str, Any], now: float) -> list[Any]:
        cells: list[Any] = [_name(obj)]
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
    for ver in _list(_get(crd, "spec", "versions")):
        if isinstance(ver, Mapping) and ver.get("name") == version:
            return [c for c in _list(ver.get("additionalPrinterColumns")) if isinstance(c, Mapping)]
    return []
