"""What the endpoints and endpointslice controllers share (kube's ``pkg/controller/util/endpoint`` and
``pkg/api/v1/pod``): which pods back a service, whether a pod is ready, and the port a service port reaches.

Invariants:

* a service backs onto pods only through a non-empty ``spec.selector`` (a label map); a pod matches when each
  pair is among its labels;
* a pod is an endpoint candidate when it has an IP and is not terminal (Succeeded or Failed), and, unless
  ``includeTerminating``, is not being deleted (``ShouldPodBeInEndpoints``);
* a ``targetPort`` number is the port; a name is the ``containerPort`` of the first container port of that name
  and the service port's protocol; an unresolvable name leaves the pod out of that port.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kinformer.controller import Request

__all__ = ["find_port", "pod_ip", "pod_ready", "selects", "services_selecting", "should_be_endpoint",
           "trigger_time"]

Obj = Mapping[str, Any]
TERMINAL = ("Succeeded", "Failed")


def selects(service: Obj, pod: Obj) -> bool:
    """Whether ``service``'s selector (non-empty) matches ``pod``'s labels."""
    selector = (service.get("spec") or {}).get("selector") or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def services_selecting(list_services: Callable[[str], Iterable[Obj]]) -> Callable[[Obj], list[Request]]:
    """A mapper from a pod to the services of its namespace whose selector matches it."""

    def mapper(pod: Obj) -> list[Request]:
        namespace = (pod.get("metadata") or {}).get("namespace") or ""
        return [Request.for_object(s) for s in list_services(namespace) if selects(s, pod)]

    return mapper


def pod_ip(pod: Obj) -> str:
    status = pod.get("status") or {}
    ips = [p.get("ip") for p in status.get("podIPs") or () if isinstance(p, Mapping) and p.get("ip")]
    return str(status.get("podIP") or (ips[0] if ips else ""))


def pod_ready(pod: Obj) -> bool:
    """The pod's Ready condition is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def should_be_endpoint(pod: Obj, include_terminating: bool) -> bool:
    """kube's ``ShouldPodBeInEndpoints``."""
    if (pod.get("status") or {}).get("phase") in TERMINAL or not pod_ip(pod):
        return False
    return include_terminating or not (pod.get("metadata") or {}).get("deletionTimestamp")


def find_port(pod: Obj, service_port: Obj) -> int | None:
    """The pod port ``service_port`` targets (``podutil.FindPort``); None when a named port is not found."""
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    protocol = service_port.get("protocol") or "TCP"
    for container in (pod.get("spec") or {}).get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("name") == target and (port.get("protocol") or "TCP") == protocol:
                return int(port["containerPort"])
    return None


def trigger_time(service: Obj, pods: Iterable[Obj]) -> str | None:
    """The time of the latest change among the service and its pods (creation, readiness, deletion), for the
    ``last-change-trigger-time`` annotation; timestamps are RFC 3339 UTC strings, so they compare as text."""
    times = [(service.get("metadata") or {}).get("creationTimestamp")]
    for pod in pods:
        meta = pod.get("metadata") or {}
        times += [meta.get("creationTimestamp"), meta.get("deletionTimestamp")]
        times += [c.get("lastTransitionTime") for c in (pod.get("status") or {}).get("conditions") or ()
                  if c.get("type") == "Ready"]
    found = [t for t in times if isinstance(t, str) and t]
    return max(found) if found else None
