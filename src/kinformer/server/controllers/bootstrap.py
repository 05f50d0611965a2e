"""The cluster objects clients expect to find, kept by the server as kube's control plane keeps them.

* ``default/kubernetes``: a ClusterIP Service on the first address of the service range (port 443,
  named ``https``, target = the server's port) with an Endpoints and (when discovery.k8s.io is
  served) an EndpointSlice pointing at the server's own address. Written at start; then every
  :data:`KUBERNETES_SERVICE_INTERVAL` seconds on the server's clock (kube's bootstrap controller's endpoint
  reconciler interval) each of the three that is missing is created again, pointing at this server. With
  several replicas the last one started is the endpoint (there is no lease-based endpoint reconciler), and a
  deleted one comes back from the replica that passes first; a present one is left as it is.
* In every namespace that is not terminating: the ``default`` ServiceAccount (kube's serviceaccount
  controller) and the ``kube-root-ca.crt`` ConfigMap holding the server's CA (kube's root-ca-cert
  publisher); both are re-created when deleted and the ConfigMap is put back when changed. A server
  without TLS publishes a generated CA; it never overwrites a CA another replica published.

The namespace content is driven by the watch cache's events, one worker task owning its writes;
``default/kubernetes`` by its own loop (:meth:`ClusterBootstrap.keep_kubernetes_service`, a task the API server
owns). Every write is an ordinary create or compare-and-swap update through the ObjectStore (so strategies and
defaulting apply).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..machinery import status as st
from ..registry.ipallocator import ServiceAllocator
from ..registry.objects import ObjectStore
from ..registry.resources import Registry, ResourceInfo
from ..storage.watchcache import CachedEvent, WatchCache
from .cachecontroller import create_as

log = logging.getLogger(__name__)

SERVICES_PREFIX = "/registry/core/services/"
NAMESPACES_PREFIX = "/registry/core/namespaces/"
SA_PREFIX = "/registry/core/serviceaccounts/"
CM_PREFIX = "/registry/core/configmaps/"
ROOT_CA = "kube-root-ca.crt"
DEFAULT_SA = "default"
CONTROLLER_MANAGER = "kube-controller-manager"
APISERVER_MANAGER = "kube-apiserver"
KUBERNETES_SERVICE_INTERVAL = 10.0  # kube-apiserver's --endpoint-reconciler interval
ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as "
    "the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of "
    "Kubernetes clusters.")


def used_cluster_ips(cache: WatchCache) -> Callable[[], set[str]]:
    """A reader of every ClusterIP held by a Service in the cache."""
    def read() -> set[str]:
        bucket = cache.buckets.get(SERVICES_PREFIX)
        out: set[str] = set()
        for co in bucket.objects.values() if bucket is not None else ():
            spec = co.obj.get("spec") or {}
            out.update(ip for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if ip and ip != "None")
        return out
    return read


def used_node_ports(cache: WatchCache) -> Callable[[], set[int]]:
    """A reader of every node port (and health check node port) held by a Service in the cache."""
    def read() -> set[int]:
        bucket = cache.buckets.get(SERVICES_PREFIX)
        out: set[int] = set()
        for co in bucket.objects.values() if bucket is not None else ():
            spec = co.obj.get("spec") or {}
            out.update(p["nodePort"] for p in spec.get("ports") or () if isinstance(p, Mapping) and p.get("nodePort"))
            if spec.get("healthCheckNodePort"):
                out.add(spec["healthCheckNodePort"])
        return out
    return read


def endpoint_address(host: str) -> str:
    """The address other clients reach the server on: ``host`` when it is a specific IP, else loopback."""
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return "127.0.0.1"
    return "127.0.0.1" if addr.is_unspecified else str(addr)


class ClusterBootstrap:
    """Keeps the objects listed in the module docstring; :meth:`start` and :meth:`stop` own the worker."""

    def __init__(self, store: ObjectStore, cache: WatchCache, registry: Registry, allocator: ServiceAllocator,
                 ca_pem: Callable[[], str], *, ca_authoritative: bool, namespace_defaults: bool = True) -> None:
        self.store = store
        self.cache = cache
        self.registry = registry
        self.allocator = allocator
        self._ca_pem = ca_pem
        self._ca: str | None = None
        self.ca_authoritative = ca_authoritative
        self.namespace_defaults = namespace_defaults
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._pending: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self.idle = asyncio.Event()
        self.idle.set()

    # ------------------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Follow the cache and keep every namespace's objects (a no-op without ``namespace_defaults``)."""
        if not self.namespace_defaults:
            return
        self.cache.add_listener(self.on_event, (NAMESPACES_PREFIX, SA_PREFIX, CM_PREFIX), on_reset=self.resync)
        self.resync()
        self._task = asyncio.create_task(self._run(), name="kinformer-bootstrap")

    async def stop(self) -> None:
        self.cache.remove_listener(self.on_event)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def wait_idle(self, timeout: float = 5.0) -> None:
        """Wait until every queued namespace has been looked at."""
        await asyncio.wait_for(self.idle.wait(), timeout)

    def resync(self) -> None:
        bucket = self.cache.buckets.get(NAMESPACES_PREFIX)
        for co in list(bucket.objects.values()) if bucket is not None else ():
            self.enqueue(co.name)

    def enqueue(self, namespace: str) -> None:
        if namespace not in self._pending:
            self._pending.add(namespace)
            self.idle.clear()
            self._queue.put_nowait(namespace)

    def on_event(self, prefix: str, ev: CachedEvent) -> None:
        """A new namespace, or a change to what this keeps in one, queues the namespace."""
        if prefix == NAMESPACES_PREFIX and ev.type != "DELETED":
            self.enqueue(ev.cur.name)
        elif prefix == SA_PREFIX and ev.type == "DELETED" and ev.cur.name == DEFAULT_SA:
            self.enqueue(ev.cur.namespace)
        elif prefix == CM_PREFIX and ev.cur.name == ROOT_CA and ev.type != "ADDED":
            self.enqueue(ev.cur.namespace)

    async def _run(self) -> None:
        while True:
            namespace = await self._queue.get()
            self._pending.discard(namespace)
            try:
                await self.sync_namespace(namespace)
            except asyncio.CancelledError:
                raise
            except st.StatusError as e:
                if e.code not in (403, 404, 409):
                    log.warning("cluster bootstrap: namespace %s: %s", namespace, e.message)
            except Exception:
                log.exception("cluster bootstrap failed on namespace %s", namespace)
            if self._queue.empty():
                self.idle.set()

    # ------------------------------------------------------------------------------ namespace content

    def _cached(self, prefix: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        bucket = self.cache.buckets.get(prefix)
        key = f"{prefix}{namespace}/{name}" if namespace else f"{prefix}{name}"
        co = bucket.objects.get(key) if bucket is not None else None
        return co.obj if co is not None else None

    def ca(self) -> str:
        if self._ca is None:
            self._ca = self._ca_pem()
        return self._ca

    async def sync_namespace(self, namespace: str) -> None:
        ns = self._cached(NAMESPACES_PREFIX, "", namespace)
        if ns is None or (ns.get("metadata") or {}).get("deletionTimestamp"):
            return
        if self._cached(SA_PREFIX, namespace, DEFAULT_SA) is None:
            await self.create("serviceaccounts", namespace, {"metadata": {"name": DEFAULT_SA}})
        cm = self._cached(CM_PREFIX, namespace, ROOT_CA)
        if cm is None:
            await self.create("configmaps", namespace, self._root_ca_configmap())
        elif self.ca_authoritative and (cm.get("data") or {}) != {"ca.crt": self.ca()}:
            await self._restore_root_ca(namespace)

    def _root_ca_configmap(self) -> dict[str, Any]:
        return {"metadata": {"name": ROOT_CA, "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION}},
                "data": {"ca.crt": self.ca()}}

    async def _restore_root_ca(self, namespace: str) -> None:
        info = self._info("", "configmaps")

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            if cur.get("data") == {"ca.crt": self.ca()}:
                return None
            cur["data"] = {"ca.crt": self.ca()}
            cur.pop("binaryData", None)
            return cur

        await self.store.mutate(info, namespace, ROOT_CA, fn)

    def _info(self, group: str, plural: str, version: str = "v1") -> ResourceInfo:
        info = self.registry.get(group, version, plural)
        if info is None:
            raise st.route_not_found()
        return info

    async def create(self, plural: str, namespace: str, obj: dict[str, Any], *, group: str = "",
                     manager: str = CONTROLLER_MANAGER) -> dict[str, Any] | None:
        """Create ``obj`` as a controller would (None when it exists already)."""
        return await create_as(self.store, self._info(group, plural), namespace, obj, manager)

    # ------------------------------------------------------------------------------ default/kubernetes

    async def keep_kubernetes_service(self, host: str, port: int,
                                      interval: float = KUBERNETES_SERVICE_INTERVAL) -> None:
        """Every ``interval`` seconds on the store's clock, create whichever of ``default/kubernetes``'s Service,
        Endpoints and EndpointSlice is missing (a failed pass is logged and tried again at the next one).
        Never returns (cancel it)."""
        while True:
            await self.store.clock.sleep(interval)
            try:
                await self.ensure_kubernetes_service(host, port, refresh=False)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("cluster bootstrap: default/kubernetes; trying again in %.0fs", interval)

    async def ensure_kubernetes_service(self, host: str, port: int, *, refresh: bool = True) -> None:
        """Create ``default/kubernetes`` with its Endpoints and EndpointSlice where missing; with ``refresh``,
        also point the present ones at this server."""
        address = endpoint_address(host)
        ports = [{"name": "https", "port": port, "protocol": "TCP"}]
        await self._upsert("services", {
            "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": self.allocator.first_ip, "sessionAffinity": "None",
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]},
        }, "spec", lambda cur: {**cur, "ports": [{**(cur.get("ports") or [{}])[0], "targetPort": port}]},
            refresh=refresh)
        await self._upsert("endpoints", {
            "metadata": {"name": "kubernetes", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": address}], "ports": ports}],
        }, "subsets", lambda cur: [{"addresses": [{"ip": address}], "ports": ports}], refresh=refresh)
        if self.registry.get("discovery.k8s.io", "v1", "endpointslices") is not None:
            family = "IPv6" if ":" in address else "IPv4"
            await self._upsert("endpointslices", {
                "metadata": {"name": "kubernetes", "labels": {"kubernetes.io/service-name": "kubernetes"}},
                "addressType": family,
                "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
                "ports": ports,
            }, "endpoints", lambda cur: [{"addresses": [address], "conditions": {"ready": True}}],
                group="discovery.k8s.io", refresh=refresh)

    async def _upsert(self, plural: str, obj: dict[str, Any], field: str,
                      wanted: Callable[[Any], Any], *, group: str = "", refresh: bool = True) -> None:
        """Create ``obj`` in ``default``, or (``refresh``) set its ``field`` to ``wanted(current value)`` when it
        differs."""
        info = self._info(group, plural)
        name = obj["metadata"]["name"]
        if self._cached(info.storage_prefix, "default", name) is None and \
                await self.create(plural, "default", obj, group=group, manager=APISERVER_MANAGER) is not None:
            return
        if not refresh:
            return

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            value = wanted(cur.get(field) or {})
            if cur.get(field) == value:
                return None
            cur[field] = value
            return cur

        await self.store.mutate(info, "default", name, fn)
