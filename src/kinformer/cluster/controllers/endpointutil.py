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

__all__ = ["TriggerTimeTracker", "find_port", "pod_ip", "selects", "services_selecting",
           "should_be_endpoint"]

Obj = Mapping[str, Any]
TERMINAL = ("Succeeded", "Failed")


def selects(service: Obj, pod: Obj) -> bool:
    """Whether ``service``'s selector (non-empty) matches ``pod``'s labels."""
    selector = (service.get("spec") or {}).get("selector")
    if not selector:  # (such as the default "kubernetes" service: the pod's labels are not read)
        return False
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


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


class TriggerTimeTracker:
    """kube's ``TriggerTimeTracker``: the ``last-change-trigger-time`` of a service's next write is the earliest
    of the trigger times that changed since its previous sync (a pod's: its Ready condition's
    ``lastTransitionTime``; the service's: its ``creationTimestamp``); None when none changed.

    Times are RFC 3339 UTC strings, so they compare as text. One tracker per controller; a service's key is
    never synced by two workers at once, so its state needs no lock.
    """

    def __init__(self) -> None:
        self._pods: dict[tuple[str, str], dict[str, str]] = {}
        self._services: dict[tuple[str, str], str] = {}

    def compute(self, service: Obj, pods: Iterable[Obj]) -> str | None:
        meta = service["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        last_pods = self._pods.get(key, {})
        changed: list[str] = []
        seen: dict[str, str] = {}
        for pod in pods:
            ready = next((c for c in (pod.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"),
                         None)
            when = (ready or {}).get("lastTransitionTime")
            if isinstance(when, str) and when:
                name = pod["metadata"]["name"]
                seen[name] = when
                if when > last_pods.get(name, ""):
                    changed.append(when)
        created = str(meta.get("creationTimestamp") or "")
        if created > self._services.get(key, ""):
            changed.append(created)
        self._pods[key], self._services[key] = seen, created
        return min(changed) if changed else None

    def forget(self, namespace: str, name: str) -> None:
        """Drop a deleted service's state."""
        self._pods.pop((namespace, name), None)
        self._services.pop((namespace, name), None)
