"""kube-controller-manager's ``endpoint`` controller: one core/v1 Endpoints per Service with a selector
(``pkg/controller/endpoint``).

Rules carried over from kube 1.32:

* the Endpoints has the service's name, its labels (plus ``service.kubernetes.io/headless: ""`` for a headless
  service) and one address per pod that :func:`~.endpointutil.should_be_endpoint` admits (being deleted is
  admitted only with ``publishNotReadyAddresses``): ready pods (or every pod, with ``publishNotReadyAddresses``)
  under ``addresses``, the others under ``notReadyAddresses``; each address has the pod's IP, ``nodeName``,
  a ``targetRef`` to the pod and, when the pod's ``subdomain`` is the service's name, its ``hostname``;
* each service port is resolved per pod (:func:`~.endpointutil.find_port`: a named ``targetPort`` through the
  pod's container ports); pods are grouped in subsets by their resolved ports (kube's ``RepackSubsets``),
  addresses sorted by IP; a headless service without ports lists its pods with no ports;
* at most :data:`MAX_CAPACITY` addresses: beyond, kube's proportional truncation (ready addresses first) and
  the ``endpoints.kubernetes.io/over-capacity: truncated`` annotation;
* ``endpoints.kubernetes.io/last-change-trigger-time`` carries the time of the earliest change since the previous
  sync that led to the write (:class:`~.endpointutil.TriggerTimeTracker`), and is removed when none is known;
* the Endpoints is written only when its subsets, labels or capacity annotation differ, and deleted with its
  service; a service without a selector is left alone (its Endpoints are the user's). A failed write is
  recorded as a Warning event ``FailedToCreateEndpoint`` / ``FailedToUpdateEndpoint`` and retried with backoff.

Not carried over: dual-stack address families (IPv4 only) and the batching of pod updates
(``--endpoint-updates-batch-period``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from typing import Any

from kinformer.controller import Request, maps_any
from kinformer.errors import NotFound

from ..cluster import ControllerContext
from ..podutil import is_pod_ready
from .endpointutil import (
    Obj,
    TriggerTimeTracker,
    find_port,
    pod_ip,
    selects,
    services_selecting,
    should_be_endpoint,
)

__all__ = ["MAX_CAPACITY", "EndpointsReconciler", "setup"]

MAX_CAPACITY = 1000
OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
HEADLESS = "service.kubernetes.io/headless"


def is_headless(service: Obj) -> bool:
    return (service.get("spec") or {}).get("clusterIP") == "None"


def _address(service: Obj, pod: Obj) -> dict[str, Any]:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    address: dict[str, Any] = {"ip": pod_ip(pod)}
    if spec.get("nodeName"):
        address["nodeName"] = spec["nodeName"]
    address["targetRef"] = {"kind": "Pod", "namespace": meta.get("namespace", ""), "name": meta["name"],
                            "uid": meta.get("uid", "")}
    svc_meta = service["metadata"]
    if spec.get("hostname") and spec.get("subdomain") == svc_meta["name"] and \
            meta.get("namespace") == svc_meta.get("namespace"):
        address["hostname"] = spec["hostname"]
    return address


def _ports(service: Obj, pod: Obj) -> list[dict[str, Any]] | None:
    """The pod's endpoint ports for ``service`` ([] for a port-less headless service; None: no port resolves)."""
    out = []
    for sp in (service.get("spec") or {}).get("ports") or ():
        number = find_port(pod, sp)
        if number is None:
            continue
        port: dict[str, Any] = {"port": number, "protocol": sp.get("protocol") or "TCP"}
        if sp.get("name"):
            port["name"] = sp["name"]
        if sp.get("appProtocol"):
            port["appProtocol"] = sp["appProtocol"]
        out.append(port)
    if not (service.get("spec") or {}).get("ports"):
        return [] if is_headless(service) else None
    return out or None


def _port_key(ports: list[dict[str, Any]]) -> tuple[tuple[str, int, str, str], ...]:
    return tuple(sorted((p.get("name", ""), p["port"], p["protocol"], p.get("appProtocol", "")) for p in ports))


def desired_subsets(service: Obj, pods: list[Obj]) -> list[dict[str, Any]]:
    """The service's subsets: addresses grouped by their resolved ports, sorted (kube's ``RepackSubsets``)."""
    tolerate = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for pod in pods:
        if not should_be_endpoint(pod, tolerate):
            continue
        ports = _ports(service, pod)
        if ports is None:
            continue
        subset = groups.setdefault(_port_key(ports), {"addresses": [], "notReadyAddresses": [], "ports": ports})
        subset["addresses" if tolerate or is_pod_ready(pod) else "notReadyAddresses"].append(_address(service, pod))
    out = []
    for key in sorted(groups):
        subset = groups[key]
        for kind in ("addresses", "notReadyAddresses"):
            subset[kind].sort(key=lambda a: (a["ip"], a["targetRef"]["uid"]))
        out.append({k: v for k, v in subset.items() if v})
    return out


def truncate(subsets: list[dict[str, Any]]) -> bool:
    """Cut ``subsets`` to :data:`MAX_CAPACITY` addresses as kube does (in place); True when it had to."""
    ready = sum(len(s.get("addresses") or ()) for s in subsets)
    not_ready = sum(len(s.get("notReadyAddresses") or ()) for s in subsets)
    if ready + not_ready <= MAX_CAPACITY:
        return False
    truncate_ready = ready > MAX_CAPACITY
    limit, total = (MAX_CAPACITY, ready) if truncate_ready else (MAX_CAPACITY - ready, not_ready)
    room = limit
    kind = "addresses" if truncate_ready else "notReadyAddresses"
    for subset in subsets:
        share = min(math.ceil(len(subset.get(kind) or ()) / total * limit), room)
        subset[kind] = (subset.get(kind) or [])[:share]
        if truncate_ready:
            subset.pop("notReadyAddresses", None)
        room -= len(subset[kind])
        if not subset[kind]:
            del subset[kind]
    return True


def _labels(service: Obj) -> dict[str, str]:
    labels = {k: v for k, v in ((service.get("metadata") or {}).get("labels") or {}).items() if k != HEADLESS}
    if is_headless(service):
        labels[HEADLESS] = ""
    return labels


class EndpointsReconciler:
    """Syncs the Endpoints of one Service (a Request: the service may be gone)."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.client = ctx.manager.client  # cache reads; writes waited for before the service's next sync
        self.recorder = ctx.recorder("endpoint-controller")
        self.triggers = TriggerTimeTracker()

    async def _cached(self, resource: str, request: Request) -> dict[str, Any] | None:
        try:
            return dict(await self.client.get(resource, request.name, namespace=request.namespace))
        except NotFound:
            return None

    async def reconcile(self, request: Request) -> None:
        service = await self._cached("services", request)
        if service is None:
            self.triggers.forget(request.namespace, request.name)
            with contextlib.suppress(NotFound):
                await self.client.delete("endpoints", request.name, namespace=request.namespace)
            return
        if not (service.get("spec") or {}).get("selector"):
            return
        pods = [p for p in (await self.client.list("pods", namespace=request.namespace)).items
                if selects(service, p)]
        trigger = self.triggers.compute(service, pods)
        subsets = desired_subsets(service, pods)
        over = truncate(subsets)
        current = await self._cached("endpoints", request)
        if current is not None and self._unchanged(current, service, subsets, over):
            return
        await self._write(service, current, subsets, over, trigger)

    @staticmethod
    def _unchanged(current: Obj, service: Obj, subsets: list[dict[str, Any]], over: bool) -> bool:
        meta = current.get("metadata") or {}
        return (current.get("subsets") or []) == subsets and (meta.get("labels") or {}) == _labels(service) and \
            (OVER_CAPACITY in (meta.get("annotations") or {})) == over

    async def _write(self, service: Obj, current: Mapping[str, Any] | None, subsets: list[dict[str, Any]],
                     over: bool, trigger: str | None) -> None:
        meta = service["metadata"]
        annotations = dict(((current or {}).get("metadata") or {}).get("annotations") or {})
        annotations.pop(OVER_CAPACITY, None)
        annotations.pop(TRIGGER_TIME, None)
        if over:
            annotations[OVER_CAPACITY] = "truncated"
        if trigger:
            annotations[TRIGGER_TIME] = trigger
        metadata = {"name": meta["name"], "namespace": meta["namespace"], "labels": _labels(service),
                    "annotations": annotations}
        if current is not None:
            metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "Endpoints", "metadata": metadata, "subsets": subsets}
        verb = "Create" if current is None else "Update"
        try:
            if current is None:
                await self.client.create("endpoints", body, namespace=meta["namespace"])
            else:
                await self.client.replace("endpoints", body, namespace=meta["namespace"])
        except Exception as e:
            self.recorder.event(body, "Warning", f"FailedTo{verb}Endpoint", f"Failed to {verb.lower()} endpoint "
                                f"for service {meta['namespace']}/{meta['name']}: {e}")
            raise


def setup(ctx: ControllerContext) -> None:
    """Register the endpoint controller on the shared Manager."""
    mgr = ctx.manager
    services = mgr.informer("services")
    mapper = services_selecting(lambda ns: services.lister().list(namespace=ns))
    mgr.controller(EndpointsReconciler(ctx), "endpoint").for_("services") \
        .watches("pods", mapper=mapper, accepts=maps_any(mapper)).watches("endpoints").workers(ctx.options.workers)
