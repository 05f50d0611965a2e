"""Printers of the core/v1 kinds other than Pods, Events and volumes (:mod:`.pods`, :mod:`.events`, :mod:`.storage`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..endpoints.table_cells import (
    NONE,
    UNKNOWN,
    age_of,
    as_int,
    as_list,
    as_map,
    containers_cells,
    field,
    find_condition,
    format_labels,
    load_balancer_ingress,
    mappings,
    name_of,
    quantity,
    text,
)
from .apps import replicas
from .table import AGE, CONTAINERS, IMAGES, NAME, Doc, Printer, col

_CORE = "api.core.v1."
_SVC = _CORE + "ServiceSpec"

# -- services and endpoints


def _external_ip(obj: Mapping[str, Any], svc_type: str) -> str:
    """EXTERNAL-IP: external IPs; for a LoadBalancer its ingress points first (``<pending>`` while it has none)."""
    external = [str(x) for x in as_list(field(obj, "spec", "externalIPs"))]
    if svc_type in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else NONE
    if svc_type == "LoadBalancer":
        ips = load_balancer_ingress(obj) + external
        return ",".join(ips) if ips else "<pending>"
    if svc_type == "ExternalName":
        return str(field(obj, "spec", "externalName") or "")
    return UNKNOWN


def _ports(obj: Mapping[str, Any]) -> str:
    """PORT(S): ``port[:nodePort]/protocol`` for each port."""
    pieces = []
    for p in mappings(field(obj, "spec", "ports")):
        proto = p.get("protocol") or "TCP"
        node_port = as_int(p.get("nodePort"))
        port = as_int(p.get("port"))
        pieces.append(f"{port}:{node_port}/{proto}" if node_port > 0 else f"{port}/{proto}")
    return ",".join(pieces) if pieces else NONE


def _service_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    spec = as_map(obj.get("spec"))
    svc_type = str(spec.get("type") or "ClusterIP")
    ips = as_list(spec.get("clusterIPs"))
    cluster_ip = str(ips[0]) if ips else str(spec.get("clusterIP") or NONE)
    return [name_of(obj), svc_type, cluster_ip, _external_ip(obj, svc_type), _ports(obj), age_of(obj, now),
            format_labels(spec.get("selector"))]


SERVICE = Printer((
    NAME,
    col("Type", description=Doc(_SVC, "type")),
    col("Cluster-IP", description=Doc(_SVC, "clusterIP")),
    col("External-IP", description=Doc(_SVC, "externalIPs")),
    col("Port(s)", description=Doc(_SVC, "ports")),
    AGE,
    col("Selector", priority=1, description=Doc(_SVC, "selector")),
), _service_row)


def _host_port(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _endpoints_cell(obj: Mapping[str, Any]) -> str:
    """ENDPOINTS: the first three ip:port pairs (per port, each address) and how many more there are."""
    subsets = mappings(obj.get("subsets"))
    if not subsets:
        return NONE
    shown: list[str] = []
    count = 0
    for ss in subsets:
        addrs = [str(a.get("ip", "")) for a in mappings(ss.get("addresses"))]
        ports = [as_int(p.get("port")) for p in mappings(ss.get("ports"))]
        pairs = addrs if not ports else [_host_port(a, p) for p in ports for a in addrs]
        count += len(pairs)
        shown.extend(pairs[:max(0, 3 - len(shown))])
    joined = ",".join(shown)
    return f"{joined} + {count - 3} more..." if count > 3 else joined


ENDPOINTS = Printer((
    NAME, col("Endpoints", description=Doc(_CORE + "Endpoints", "subsets")), AGE,
), lambda obj, now: [name_of(obj), _endpoints_cell(obj), age_of(obj, now)])


# -- nodes and namespaces


def _node_address(obj: Mapping[str, Any], kind: str) -> str:
    for addr in mappings(field(obj, "status", "addresses")):
        if addr.get("type") == kind:
            return str(addr.get("address") or "")
    return NONE


def _node_roles(obj: Mapping[str, Any]) -> str:
    """ROLES: from ``node-role.kubernetes.io/<role>`` labels and a non-empty ``kubernetes.io/role``, sorted."""
    roles = set()
    for key, value in as_map(field(obj, "metadata", "labels")).items():
        if key.startswith("node-role.kubernetes.io/") and key != "node-role.kubernetes.io/":
            roles.add(key.removeprefix("node-role.kubernetes.io/"))
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    return ",".join(sorted(roles)) or NONE


def _node_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """STATUS: Ready / NotReady from the Ready condition (Unknown without one), plus SchedulingDisabled."""
    cond = find_condition(field(obj, "status", "conditions"), "Ready")
    ready = "Unknown" if cond is None else ("Ready" if cond.get("status") == "True" else "NotReady")
    status = [ready, "SchedulingDisabled"] if field(obj, "spec", "unschedulable") else [ready]
    info = as_map(field(obj, "status", "nodeInfo"))
    return [name_of(obj), ",".join(status), _node_roles(obj), age_of(obj, now),
            str(info.get("kubeletVersion") or ""), _node_address(obj, "InternalIP"), _node_address(obj, "ExternalIP"),
            str(info.get("osImage") or UNKNOWN), str(info.get("kernelVersion") or UNKNOWN),
            str(info.get("containerRuntimeVersion") or UNKNOWN)]


_NODE_INFO = _CORE + "NodeSystemInfo"
NODE = Printer((
    NAME,
    col("Status", description="The status of the node"),
    col("Roles", description="The roles of the node"),
    AGE,
    col("Version", description=Doc(_NODE_INFO, "kubeletVersion")),
    col("Internal-IP", priority=1, description=Doc(_CORE + "NodeStatus", "addresses")),
    col("External-IP", priority=1, description=Doc(_CORE + "NodeStatus", "addresses")),
    col("OS-Image", priority=1, description=Doc(_NODE_INFO, "osImage")),
    col("Kernel-Version", priority=1, description=Doc(_NODE_INFO, "kernelVersion")),
    col("Container-Runtime", priority=1, description=Doc(_NODE_INFO, "containerRuntimeVersion")),
), _node_row)

NAMESPACE = Printer((NAME, col("Status", description="The status of the namespace"), AGE),
                    lambda obj, now: [name_of(obj), str(field(obj, "status", "phase") or "Active"), age_of(obj, now)])


# -- configuration


def _entries(value: Any) -> int:
    return len(value) if isinstance(value, Mapping) else 0


CONFIGMAP = Printer(
    (NAME, col("Data", description=Doc(_CORE + "ConfigMap", "data")), AGE),
    lambda obj, now: [name_of(obj), _entries(obj.get("data")) + _entries(obj.get("binaryData")), age_of(obj, now)])

SECRET = Printer(
    (NAME, col("Type", description=Doc(_CORE + "Secret", "type")),
     col("Data", description=Doc(_CORE + "Secret", "data")), AGE),
    lambda obj, now: [name_of(obj), str(obj.get("type") or "Opaque"), _entries(obj.get("data")), age_of(obj, now)])

SERVICEACCOUNT = Printer(
    (NAME, col("Secrets", description=Doc(_CORE + "ServiceAccount", "secrets")), AGE),
    lambda obj, now: [name_of(obj), len(as_list(obj.get("secrets"))), age_of(obj, now)])


# -- replication controllers and pod templates


def _rc_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """DESIRED (spec), CURRENT and READY (status) replicas; the selector is a plain label map."""
    st = as_map(obj.get("status"))
    return [name_of(obj), replicas(obj), as_int(st.get("replicas")), as_int(st.get("readyReplicas")),
            age_of(obj, now), *containers_cells(field(obj, "spec", "template", "spec")),
            format_labels(field(obj, "spec", "selector"))]


REPLICATIONCONTROLLER = Printer((
    NAME,
    col("Desired", "integer", description=Doc(_CORE + "ReplicationControllerSpec", "replicas")),
    col("Current", "integer", description=Doc(_CORE + "ReplicationControllerStatus", "replicas")),
    col("Ready", "integer", description=Doc(_CORE + "ReplicationControllerStatus", "readyReplicas")),
    AGE, CONTAINERS, IMAGES,
    col("Selector", priority=1, description=Doc(_CORE + "ReplicationControllerSpec", "selector")),
), _rc_row)

PODTEMPLATE = Printer((
    NAME,
    col("Containers", description=CONTAINERS.description),
    col("Images", description=IMAGES.description),
    col("Pod Labels", description="The labels for the pod template."),
), lambda obj, now: [name_of(obj), *containers_cells(field(obj, "template", "spec")),
                     format_labels(field(obj, "template", "metadata", "labels"))])


# -- component statuses and resource quotas


def _component_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """STATUS Healthy / Unhealthy from the Healthy condition (Unknown without one), with its message and error."""
    cond = find_condition(obj.get("conditions"), "Healthy")
    if cond is None:
        return [name_of(obj), "Unknown", "", ""]
    status = "Healthy" if cond.get("status") == "True" else "Unhealthy"
    return [name_of(obj), status, text(cond.get("message")), text(cond.get("error"))]


COMPONENTSTATUS = Printer((
    NAME,
    col("Status", description="Status of the component conditions"),
    col("Message", description="Message of the component conditions"),
    col("Error", description="Error of the component conditions"),
), _component_row)


def _quota_cells(obj: Mapping[str, Any]) -> list[str]:
    """[REQUEST, LIMIT]: ``resource: used/hard`` per hard limit, sorted; ``limits.*`` resources go to LIMIT."""
    hard = as_map(field(obj, "status", "hard"))
    used = as_map(field(obj, "status", "used"))
    requests: list[str] = []
    limits: list[str] = []
    for name in sorted(hard):
        target = limits if name.split(".", 1)[0] == "limits" and "." in name else requests
        target.append(f"{name}: {quantity(used.get(name))}/{quantity(hard[name])}")
    return [", ".join(requests), ", ".join(limits)]


RESOURCEQUOTA = Printer((
    NAME,
    col("Request", description="Request represents a minimum amount of cpu/memory that a container may consume."),
    col("Limit", description="Limits control the maximum amount of cpu/memory that a container may use independent "
                             "of contention on the node."),
    AGE,
), lambda obj, now: [name_of(obj), *_quota_cells(obj), age_of(obj, now)])
