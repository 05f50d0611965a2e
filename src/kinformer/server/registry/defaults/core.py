"""Defaults of core/v1 kinds other than pods (SetDefaults_* of kube-apiserver 1.32's core/v1).

Only fields the client left out are filled in. Service defaults that depend on the cluster (cluster
IPs, IP families, node ports) are allocated by the Service strategy, not here.
"""

from __future__ import annotations

from typing import Any

from .pod import Obj, _dict, _items, default_pod_template

CLIENT_IP_AFFINITY_SECONDS = 10800


def default_service(svc: Obj) -> None:
    """SetDefaults_Service: type, session affinity, port protocol and target port, traffic policies."""
    spec = _dict(svc, "spec")
    if spec is None:
        spec = svc["spec"] = {}
    affinity = spec.setdefault("sessionAffinity", "None")
    if affinity == "None":
        spec.pop("sessionAffinityConfig", None)
    elif affinity == "ClientIP":
        config = _dict(spec, "sessionAffinityConfig") or {}
        client_ip = _dict(config, "clientIP") or {}
        client_ip.setdefault("timeoutSeconds", CLIENT_IP_AFFINITY_SECONDS)
        config["clientIP"] = client_ip
        spec["sessionAffinityConfig"] = config
    kind = spec.setdefault("type", "ClusterIP")
    for port in _items(spec, "ports"):
        port.setdefault("protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    if kind in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if kind in ("ClusterIP", "NodePort", "LoadBalancer"):
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)


def default_secret(secret: Obj) -> None:
    secret.setdefault("type", "Opaque")


def default_namespace(ns: Obj) -> None:
    """The ``kubernetes.io/metadata.name`` label and the Active phase."""
    meta = _dict(ns, "metadata")
    name = meta.get("name") if meta is not None else None
    if meta is not None and isinstance(name, str) and name:
        labels = _dict(meta, "labels")
        if labels is None:
            labels = meta["labels"] = {}
        labels["kubernetes.io/metadata.name"] = name
    status = _dict(ns, "status")
    if status is None:
        status = ns["status"] = {}
    status.setdefault("phase", "Active")


def default_endpoints(ep: Obj) -> None:
    for subset in _items(ep, "subsets"):
        for port in _items(subset, "ports"):
            port.setdefault("protocol", "TCP")


def _volume_mode(spec: Obj) -> None:
    spec.setdefault("volumeMode", "Filesystem")


def default_persistent_volume(pv: Obj) -> None:
    spec = _dict(pv, "spec")
    if spec is None:
        spec = pv["spec"] = {}
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    _volume_mode(spec)
    status = _dict(pv, "status")
    if status is None:
        status = pv["status"] = {}
    status.setdefault("phase", "Pending")


def default_persistent_volume_claim(pvc: Obj) -> None:
    spec = _dict(pvc, "spec")
    if spec is None:
        spec = pvc["spec"] = {}
    _volume_mode(spec)
    status = _dict(pvc, "status")
    if status is None:
        status = pvc["status"] = {}
    status.setdefault("phase", "Pending")


def default_replication_controller(rc: Obj) -> None:
    """Selector and labels from the template when missing; one replica."""
    spec = _dict(rc, "spec")
    if spec is None:
        spec = rc["spec"] = {}
    spec.setdefault("replicas", 1)
    spec.setdefault("minReadySeconds", 0)
    template = _dict(spec, "template")
    labels = _dict(_dict(template, "metadata") or {}, "labels") if template is not None else None
    if labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = _dict(rc, "metadata")
        if meta is not None and not meta.get("labels"):
            meta["labels"] = dict(labels)
    default_pod_template(template)


def default_pod_template_object(obj: Obj) -> None:
    """A core/v1 PodTemplate."""
    default_pod_template(obj.get("template"))


def default_limit_range(lr: Obj) -> None:
    """Container limits: default from max, default request from default, then from min."""
    for item in _items(_dict(lr, "spec") or {}, "limits"):
        if item.get("type") != "Container":
            continue
        default: dict[str, Any] = item.setdefault("default", {})
        request: dict[str, Any] = item.setdefault("defaultRequest", {})
        for name, value in (item.get("max") or {}).items():
            default.setdefault(name, value)
        for name, value in default.items():
            request.setdefault(name, value)
        for name, value in (item.get("min") or {}).items():
            request.setdefault(name, value)
