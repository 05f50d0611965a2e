"""kube-controller-manager's ``endpointslice`` controller: discovery.k8s.io/v1 EndpointSlices for each Service
with a selector (``pkg/controller/endpointslice`` and ``staging/src/k8s.io/endpointslice``'s reconciler).

Rules carried over from kube 1.32:

* a slice is named from ``generateName: <service>-``, controlled by its service (``controller`` and
  ``blockOwnerDeletion``), labelled with the service's labels plus ``kubernetes.io/service-name``,
  ``endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io`` (and
  ``service.kubernetes.io/headless`` for a headless service), ``addressType: IPv4``, and carries the
  ``endpoints.kubernetes.io/last-change-trigger-time`` annotation when written (kube's trigger-time tracker:
  the earliest change since the previous sync);
* every pod the service selects that has an IP and is not terminal is an endpoint (terminating pods too):
  ``conditions.ready`` = Ready and not terminating (always true with ``publishNotReadyAddresses``),
  ``serving`` = Ready, ``terminating`` = being deleted; ``nodeName``, ``zone`` (the node's
  ``topology.kubernetes.io/zone``), ``targetRef`` and, when the pod's subdomain is the service, ``hostname``;
* endpoints are grouped by their resolved ports (a named ``targetPort`` through the pod's container ports), at
  most ``ClusterOptions.max_endpoints_per_slice`` per slice. An update keeps endpoints in the slice that holds
  them, drops the gone ones, puts new ones first into slices already being updated, then into other slices with
  room, then into new slices; a slice left empty is deleted; a service with no endpoint keeps one placeholder
  slice (no ports, no endpoints);
* a service's slices are deleted when it is deleted (kube leaves that to the garbage collector, through the
  owner reference), loses its selector or becomes ExternalName (kube 1.32 stops updating them then).
  A failed write is recorded as a Warning event ``FailedToUpdateEndpointSlices`` on the service and retried.

Writes go through the Manager's cache-reading client, so a service's next sync waits until its cache holds the
slices just written (kube's EndpointSliceTracker: never a duplicate slice from a stale cache).

Not carried over: dual-stack (IPv4 only), topology hints, the EndpointSlice mirroring controller, and kube's
rebalancing ("fill" of partially full slices beyond the placement order above).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from kinformer.controller import Request, maps_any
from kinformer.errors import NotFound

from ..cluster import ControllerContext
from ..podutil import is_pod_ready
from . import endpointutil as util
from .endpoints import HEADLESS, TRIGGER_TIME, is_headless
from .endpointutil import Obj

__all__ = ["MANAGED_BY", "SERVICE_NAME", "EndpointSliceReconciler", "setup"]

SLICES = "endpointslices.discovery.k8s.io"
SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
CONTROLLER_NAME = "endpointslice-controller.k8s.io"
ZONE = "topology.kubernetes.io/zone"

PortKey = tuple[tuple[str, int, str, str], ...]


def _ports(service: Obj, pod: Obj) -> list[dict[str, Any]]:
    out = []
    for sp in (service.get("spec") or {}).get("ports") or ():
        number = util.find_port(pod, sp)
        if number is None:
            continue
        port: dict[str, Any] = {"name": sp.get("name") or "", "port": number, "protocol": sp.get("protocol") or "TCP"}
        if sp.get("appProtocol"):
            port["appProtocol"] = sp["appProtocol"]
        out.append(port)
    return out


def port_key(ports: Sequence[Mapping[str, Any]]) -> PortKey:
    return tuple(sorted((p.get("name") or "", int(p.get("port") or 0), p.get("protocol") or "TCP",
                         p.get("appProtocol") or "") for p in ports))


def endpoint_key(endpoint: Mapping[str, Any]) -> tuple[Any, ...]:
    """Who an endpoint is (kube's endpoint hash: addresses, hostname and the pod), not its conditions."""
    ref = endpoint.get("targetRef") or {}
    return tuple(endpoint.get("addresses") or ()), endpoint.get("hostname"), ref.get("namespace"), ref.get("name")


def to_endpoint(service: Obj, pod: Obj, zone: str | None) -> dict[str, Any]:
    """kube's ``podToEndpoint``."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    serving = is_pod_ready(pod)
    terminating = bool(meta.get("deletionTimestamp"))
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    endpoint: dict[str, Any] = {
        "addresses": [util.pod_ip(pod)],
        "conditions": {"ready": publish or (serving and not terminating), "serving": serving,
                       "terminating": terminating},
        "targetRef": {"kind": "Pod", "namespace": meta.get("namespace", ""), "name": meta["name"],
                      "uid": meta.get("uid", "")}}
    if spec.get("hostname") and spec.get("subdomain") == service["metadata"]["name"]:
        endpoint["hostname"] = spec["hostname"]
    if spec.get("nodeName"):
        endpoint["nodeName"] = spec["nodeName"]
    if zone:
        endpoint["zone"] = zone
    return endpoint


class Plan:
    """The writes that bring one service's slices to the desired endpoints (computed, then applied)."""

    def __init__(self, max_per_slice: int) -> None:
        self.max = max_per_slice
        self.create: list[dict[str, Any]] = []
        self.update: list[dict[str, Any]] = []
        self.delete: list[dict[str, Any]] = []
        self.unchanged: list[dict[str, Any]] = []

    def place(self, ports: list[dict[str, Any]], existing: list[dict[str, Any]],
              desired: dict[tuple[Any, ...], dict[str, Any]]) -> None:
        """Plan the slices of one port set: keep, refresh or drop what each holds, then place the rest."""
        updated, kept = [], []
        for current in existing:
            endpoints = [desired.pop(endpoint_key(e)) for e in current.get("endpoints") or ()
                         if endpoint_key(e) in desired]
            if endpoints == (current.get("endpoints") or []):
                kept.append(current)
            elif endpoints:
                updated.append({**current, "endpoints": endpoints})
            else:
                self.delete.append(current)
        rest = list(desired.values())
        for target in updated:
            rest = self._fill(target, rest)
        for target in kept:
            before = len(rest)
            rest = self._fill(target, rest)
            (updated if len(rest) < before else self.unchanged).append(target)
        self.update += updated
        for start in range(0, len(rest), self.max):
            self.create.append({"ports": ports, "endpoints": rest[start:start + self.max]})

    def _fill(self, target: dict[str, Any], rest: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Add what fits of ``rest`` to ``target``'s endpoints; return what is left."""
        room = self.max - len(target.get("endpoints") or ())
        if room <= 0 or not rest:
            return rest
        target["endpoints"] = [*(target.get("endpoints") or []), *rest[:room]]
        return rest[room:]


class EndpointSliceReconciler:
    """Syncs the EndpointSlices of one Service (a Request: the service may be gone)."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.client = ctx.manager.client  # cache reads; writes waited for before the service's next sync
        self.recorder = ctx.recorder("endpoint-slice-controller")
        self.triggers = util.TriggerTimeTracker()

    async def reconcile(self, request: Request) -> None:
        try:
            service: Obj | None = await self.client.get("services", request.name, namespace=request.namespace)
        except NotFound:
            service = None
        slices = [dict(s) for s in (await self.client.list(
            SLICES, namespace=request.namespace,
            label_selector=f"{SERVICE_NAME}={request.name},{MANAGED_BY}={CONTROLLER_NAME}")).items]
        spec = (service or {}).get("spec") or {}
        if service is None or not spec.get("selector") or spec.get("type") == "ExternalName":
            self.triggers.forget(request.namespace, request.name)
            for s in slices:
                with contextlib.suppress(NotFound):
                    await self.client.delete(SLICES, s["metadata"]["name"], namespace=request.namespace)
            return
        try:
            await self._sync(service, slices)
        except Exception as e:
            self.recorder.event(service, "Warning", "FailedToUpdateEndpointSlices",
                                f"Error updating Endpoint Slices for Service {request.namespace}/{request.name}: {e}")
            raise

    async def _desired(self, service: Obj) -> tuple[dict[PortKey, tuple[list[dict[str, Any]], dict[Any, Any]]],
                                                    list[Obj]]:
        namespace = service["metadata"]["namespace"]
        pods = [p for p in (await self.client.list("pods", namespace=namespace)).items
                if util.selects(service, p) and util.should_be_endpoint(p, True)]
        groups: dict[PortKey, tuple[list[dict[str, Any]], dict[Any, Any]]] = {}
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            ports = _ports(service, pod)
            endpoint = to_endpoint(service, pod, await self._zone(pod))
            groups.setdefault(port_key(ports), (ports, {}))[1][endpoint_key(endpoint)] = endpoint
        return groups, pods

    async def _zone(self, pod: Obj) -> str | None:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return None
        try:
            return ((await self.client.get("nodes", node)).get("metadata", {}).get("labels") or {}).get(ZONE)
        except NotFound:
            return None

    async def _sync(self, service: Obj, slices: list[dict[str, Any]]) -> None:
        groups, pods = await self._desired(service)
        plan = Plan(self.ctx.options.max_endpoints_per_slice)
        by_ports: dict[PortKey, list[dict[str, Any]]] = {}
        for s in slices:
            by_ports.setdefault(port_key(s.get("ports") or []), []).append(s)
        for key, (ports, desired) in groups.items():
            plan.place(ports, by_ports.pop(key, []), desired)
        stale = [s for group in by_ports.values() for s in group]
        placeholder = not groups and not plan.update and not plan.create
        if placeholder:
            keep = next((s for s in stale if not s.get("ports") and not s.get("endpoints")), None)
            stale = [s for s in stale if s is not keep]
            if keep is None:
                plan.create.append({"ports": [], "endpoints": []})
            else:
                plan.unchanged.append(keep)
        plan.delete += stale
        await self._apply(service, plan, self.triggers.compute(service, pods))

    async def _apply(self, service: Obj, plan: Plan, trigger: str | None) -> None:
        namespace = service["metadata"]["namespace"]
        labels = _labels(service)
        for s in plan.delete:
            with contextlib.suppress(NotFound):
                await self.client.delete(SLICES, s["metadata"]["name"], namespace=namespace)
        for s in [*plan.update, *(u for u in plan.unchanged if _stale_labels(u, labels))]:
            await self.client.replace(SLICES, self._body(service, s, labels, trigger), namespace=namespace)
        for s in plan.create:
            await self.client.create(SLICES, self._body(service, s, labels, trigger), namespace=namespace)

    @staticmethod
    def _body(service: Obj, s: Mapping[str, Any], labels: dict[str, str], trigger: str | None) -> dict[str, Any]:
        meta = service["metadata"]
        current = s.get("metadata") or {}
        annotations = dict(current.get("annotations") or {})
        if trigger:
            annotations[TRIGGER_TIME] = trigger
        metadata: dict[str, Any] = {"namespace": meta["namespace"], "labels": labels, "annotations": annotations,
                                    "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": meta["name"],
                                                         "uid": meta["uid"], "controller": True,
                                                         "blockOwnerDeletion": True}]}
        if current.get("name"):
            metadata.update(name=current["name"], resourceVersion=current["resourceVersion"])
        else:
            metadata["generateName"] = f"{meta['name']}-"
        return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": metadata,
                "addressType": "IPv4", "ports": s.get("ports") or [], "endpoints": s.get("endpoints") or []}


def _labels(service: Obj) -> dict[str, str]:
    labels = {k: v for k, v in ((service.get("metadata") or {}).get("labels") or {}).items()
              if k not in (HEADLESS, SERVICE_NAME, MANAGED_BY)}
    labels[SERVICE_NAME] = service["metadata"]["name"]
    labels[MANAGED_BY] = CONTROLLER_NAME
    if is_headless(service):
        labels[HEADLESS] = ""
    return labels


def _stale_labels(s: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    return ((s.get("metadata") or {}).get("labels") or {}) != labels


def setup(ctx: ControllerContext) -> None:
    """Register the endpointslice controller on the shared Manager."""
    mgr = ctx.manager
    services = mgr.informer("services")
    mgr.informer("nodes")  # zones: read from the cache
    mapper = util.services_selecting(lambda ns: services.lister().list(namespace=ns))
    mgr.controller(EndpointSliceReconciler(ctx), "endpointslice").for_("services") \
        .watches("pods", mapper=mapper, accepts=maps_any(mapper)).owns(SLICES).workers(ctx.options.workers)
