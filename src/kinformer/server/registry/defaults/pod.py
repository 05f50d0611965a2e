"""Defaults of pod specs, wherever a pod spec is embedded (Pods, templates of workloads, Jobs, CronJobs).

The rules are kube-apiserver 1.32's SetDefaults functions of core/v1 (plus the declarative ``+default``
markers), applied to the unstructured JSON form: a value is only filled in where the client left it out,
never replaced. Go serialises some empty structs (``resources: {}``, ``securityContext: {}``) and a
template's zero ``creationTimestamp`` as ``null``; the same shapes are produced here so an object reads
back exactly as a cluster returns it.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

Obj = MutableMapping[str, Any]

DEFAULT_SCHEDULER = "default-scheduler"
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
TERMINATION_GRACE_SECONDS = 30
VOLUME_DEFAULT_MODE = 420  # 0644, the defaultMode of secret, configMap, downwardAPI and projected volumes
TOKEN_EXPIRATION_SECONDS = 3600
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def _dict(parent: Obj, key: str) -> Obj | None:
    value = parent.get(key)
    return value if isinstance(value, dict) else None


def _items(parent: Obj, key: str) -> list[Obj]:
    value = parent.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def image_tag(image: str) -> str:
    """The tag of an image reference ("" with a digest and no tag, "latest" when neither is given)."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        return last.rsplit(":", 1)[1]
    return "" if digest else "latest"


def default_pull_policy(image: Any) -> str:
    """``Always`` for a ``:latest`` (or untagged) image, ``IfNotPresent`` otherwise."""
    return "Always" if isinstance(image, str) and image_tag(image) == "latest" else "IfNotPresent"


def _default_handler(handler: Obj) -> None:
    """Probe and lifecycle handlers: httpGet path and scheme; a gRPC probe's empty service name."""
    action = handler.get("httpGet")
    if isinstance(action, dict):
        action.setdefault("path", "/")
        action.setdefault("scheme", "HTTP")
    grpc = handler.get("grpc")
    if isinstance(grpc, dict):
        grpc.setdefault("service", "")


def default_probe(probe: Obj) -> None:
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    _default_handler(probe)


def _default_env(envs: list[Any]) -> None:
    for env in envs:
        source = env.get("valueFrom") if isinstance(env, dict) else None
        if source is None:  # the common case: a plain value
            continue
        field_ref = source.get("fieldRef") if isinstance(source, dict) else None
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")


def default_container(container: Obj) -> None:
    """SetDefaults_Container plus the defaults of its ports, probes, lifecycle hooks and env sources."""
    if "imagePullPolicy" not in container:
        container["imagePullPolicy"] = default_pull_policy(container.get("image"))
    if "terminationMessagePath" not in container:
        container["terminationMessagePath"] = TERMINATION_MESSAGE_PATH
    if "terminationMessagePolicy" not in container:
        container["terminationMessagePolicy"] = "File"
    if not isinstance(container.get("resources"), dict):
        container["resources"] = {}
    ports = container.get("ports")
    if isinstance(ports, list):
        for port in ports:
            if isinstance(port, dict) and "protocol" not in port:
                port["protocol"] = "TCP"
    for name in _PROBES:
        probe = container.get(name)
        if isinstance(probe, dict):
            default_probe(probe)
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            handler = lifecycle.get(hook)
            if isinstance(handler, dict):
                _default_handler(handler)
    envs = container.get("env")
    if isinstance(envs, list):
        _default_env(envs)


def _mode(source: Obj) -> None:
    source.setdefault("defaultMode", VOLUME_DEFAULT_MODE)


def _downward_items(source: Obj) -> None:
    for item in _items(source, "items"):
        ref = _dict(item, "fieldRef")
        if ref is not None:
            ref.setdefault("apiVersion", "v1")


def _projected(source: Obj) -> None:
    _mode(source)
    projections = source.get("sources")
    if not isinstance(projections, list):
        return
    for projection in projections:
        if not isinstance(projection, dict):
            continue
        token = projection.get("serviceAccountToken")
        if isinstance(token, dict):
            token.setdefault("expirationSeconds", TOKEN_EXPIRATION_SECONDS)
        downward = projection.get("downwardAPI")
        if isinstance(downward, dict):
            _downward_items(downward)


def _downward(source: Obj) -> None:
    _mode(source)
    _downward_items(source)


def _host_path(source: Obj) -> None:
    source.setdefault("type", "")


def _iscsi(source: Obj) -> None:
    source.setdefault("iscsiInterface", "default")


def _rbd(source: Obj) -> None:
    source.setdefault("pool", "rbd")
    source.setdefault("user", "admin")
    source.setdefault("keyring", "/etc/ceph/keyring")


def _azure_disk(source: Obj) -> None:
    source.setdefault("cachingMode", "ReadWrite")
    source.setdefault("fsType", "ext4")
    source.setdefault("readOnly", False)
    source.setdefault("kind", "Shared")


def _scale_io(source: Obj) -> None:
    source.setdefault("storageMode", "ThinProvisioned")
    source.setdefault("fsType", "xfs")


_VOLUME_SOURCES: dict[str, Callable[[Obj], None]] = {
    "secret": _mode, "configMap": _mode, "downwardAPI": _downward, "projected": _projected,
    "hostPath": _host_path, "iscsi": _iscsi, "rbd": _rbd, "azureDisk": _azure_disk, "scaleIO": _scale_io,
}


def default_volume(volume: Obj) -> None:
    """A volume without any source is an emptyDir; each source gets its own defaults."""
    empty = True
    for key, source in volume.items():  # the fills change sources, never the volume
        if key == "name":
            continue
        empty = False
        fill = _VOLUME_SOURCES.get(key)
        if fill is not None and isinstance(source, dict):
            fill(source)
    if empty:
        volume["emptyDir"] = {}


def default_pod_spec(spec: Obj, pod: bool = False) -> None:
    """SetDefaults_PodSpec and the defaults of everything a pod spec contains (with ``pod``, a Pod's own: also
    its containers' requests from their limits)."""
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    if not isinstance(spec.get("securityContext"), dict):
        spec["securityContext"] = {}
    spec.setdefault("terminationGracePeriodSeconds", TERMINATION_GRACE_SECONDS)
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    for key in _CONTAINER_LISTS:
        containers = spec.get(key)
        if isinstance(containers, list):
            for container in containers:
                if isinstance(container, dict):
                    default_container(container)
                    if pod and key != "ephemeralContainers":
                        _requests_from_limits(container)
    volumes = spec.get("volumes")
    if isinstance(volumes, list):
        for volume in volumes:
            if isinstance(volume, dict):
                default_volume(volume)
    # The v1 wire form mirrors serviceAccountName into the deprecated serviceAccount field.
    if spec.get("serviceAccountName") and "serviceAccount" not in spec:
        spec["serviceAccount"] = spec["serviceAccountName"]


def default_pod_template(template: Any) -> None:
    """A PodTemplateSpec: its spec's defaults and the ``creationTimestamp: null`` Go always writes."""
    if not isinstance(template, dict):
        return
    meta = template.get("metadata")
    if not isinstance(meta, dict):
        meta = template["metadata"] = {}
    meta.setdefault("creationTimestamp", None)
    spec = template.get("spec")
    if isinstance(spec, dict):
        default_pod_spec(spec)


def _requests_from_limits(container: Obj) -> None:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return
    limits = resources.get("limits")
    if not isinstance(limits, dict) or not limits:
        return
    requests = resources.get("requests")
    if not isinstance(requests, dict):
        requests = resources["requests"] = {}
    for name, value in limits.items():
        if name not in requests:
            requests[name] = value


def default_pod(pod: Obj) -> None:
    """SetDefaults_Pod: pod spec defaults plus the Pod-only ones (requests from limits, service links, host ports)."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    default_pod_spec(spec, pod=True)
    spec.setdefault("enableServiceLinks", True)
    if spec.get("hostNetwork") is True:
        for key in ("containers", "initContainers"):
            for container in _items(spec, key):
                for port in _items(container, "ports"):
                    if not port.get("hostPort"):
                        port["hostPort"] = port.get("containerPort")
