"""Printers of core/v1 kinds other than Pod (and of events.k8s.io Events, which share kube's printer)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..table_cells import (
    NONE,
    UNKNOWN,
    age,
    age_of,
    as_int,
    as_list,
    field,
    format_labels,
    name_of,
    parse_time,
)
from .table import AGE, NAME, NAME_DOC, Column, Printer, col

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
    col("Type", description="type determines how the Service is exposed."),
    col("Cluster-IP", description="clusterIP is the IP address of the service."),
    col("External-IP", description="externalIPs is a list of IP addresses for which nodes in the cluster will also "
                                    "accept traffic for this service."),
    col("Port(s)", description="The list of ports that are exposed by this service."),
    AGE,
    col("Selector", priority=1, description="Route service traffic to pods with label keys and values matching "
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
    NAME, col("Endpoints", description="The set of all endpoints is the union of all subsets."), AGE,
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
    col("Status", description="The status of the node"),
    col("Roles", description="The roles of the node"),
    AGE,
    col("Version", description="Kubelet Version reported by the node."),
    col("Internal-IP", priority=1, description="List of addresses reachable to the node."),
    col("External-IP", priority=1, description="List of addresses reachable to the node."),
    col("OS-Image", priority=1, description="OS Image reported by the node from /etc/os-release."),
    col("Kernel-Version", priority=1, description="Kernel Version reported by the node."),
    col("Container-Runtime", priority=1, description="ContainerRuntime Version reported by the node."),
), _node_row)

NAMESPACE = Printer((NAME, col("Status", description="The status of the namespace"), AGE),
                    lambda obj, now: [name_of(obj), str(field(obj, "status", "phase") or "Active"), age_of(obj, now)])


def _configmap_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    data = obj.get("data")
    binary = obj.get("binaryData")
    n = (len(data) if isinstance(data, Mapping) else 0) + (len(binary) if isinstance(binary, Mapping) else 0)
    return [name_of(obj), n, age_of(obj, now)]


CONFIGMAP = Printer((NAME, col("Data", "integer", description="Number of user provided data entries."), AGE),
                    _configmap_row)


def _secret_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    data = obj.get("data")
    n = len(data) if isinstance(data, Mapping) else 0
    return [name_of(obj), str(obj.get("type") or "Opaque"), n, age_of(obj, now)]


SECRET = Printer((
    NAME, col("Type", description="Used to facilitate programmatic handling of secret data."),
    col("Data", "integer", description="Number of user provided data entries."), AGE,
), _secret_row)

SERVICEACCOUNT = Printer(
    (NAME, col("Secrets", "integer", description="Secrets is a list of the secrets in the same namespace that pods "
                                                  "running using this ServiceAccount are allowed to use."), AGE),
    lambda obj, now: [name_of(obj), len(as_list(obj.get("secrets"))), age_of(obj, now)])

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
    col("Last Seen", description="The time at which the most recent occurrence of this event was recorded."),
    col("Type", description="Type of this event (Normal, Warning), new types could be added in the future."),
    col("Reason", description="This should be a short, machine understandable string that gives the reason for "
                               "the transition into the object's current status."),
    col("Object", description="The object this Event is about."),
    col("Subobject", priority=1, description="The field of the object this Event is about."),
    col("Source", priority=1, description="The component reporting this event."),
    col("Message", description="A human-readable description of the status of this operation."),
    col("First Seen", priority=1, description="The time at which the event was first recorded."),
    col("Count", priority=1, description="The number of times this event has occurred."),
    Column("Name", "string", "name", NAME_DOC, 1),
), _event_row)




LEASE = Printer((NAME, col("Holder", description="HolderIdentity contains the identity of the holder of a current "
                                                  "lease."), AGE),
                lambda obj, now: [name_of(obj), str(field(obj, "spec", "holderIdentity") or ""), age_of(obj, now)])

