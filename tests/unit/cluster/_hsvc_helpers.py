"""Test helpers of the endpoints, endpointslice, disruption and resourcequota tests: the test plays the kubelet
(no simulated node runs here), as kube's controller unit tests use fake pods."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import kinformer as ki
from cluster_helpers import bind
from kinformer.cluster import ClusterOptions
from kinformer.server import APIServer

NS = "default"
READY_AT = "2026-01-01T00:00:00Z"


@contextlib.asynccontextmanager
async def cluster_client(*controllers: str, **options: Any) -> AsyncIterator[ki.Client]:
    """A client of an in-memory server running ``controllers`` with ``ClusterOptions(**options)``."""
    async with APIServer(storage="memory", controllers=list(controllers),
                         cluster_options=ClusterOptions(**options)) as server, ki.Client(server.url) as client:
        yield client


def pod(name: str, labels: dict[str, str], *, ports: list[dict[str, Any]] | None = None,
        **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": "pause"}
    if ports:
        container["ports"] = ports
    return {"metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"containers": [container], **spec}}


async def run_pod(client: ki.Client, name: str, ip: str, *, node: str = "node-1", ready: bool = True) -> None:
    """What the scheduler and kubelet would do: bind ``name`` to ``node`` and report it Running with ``ip``."""
    await bind(client, name, NS, node)
    await set_ready(client, name, ready, ip=ip)


async def set_ready(client: ki.Client, name: str, ready: bool, *, ip: str | None = None) -> None:
    """Patch the pod's status as the kubelet reports it: Running, with the Ready condition ``ready``."""
    status: dict[str, Any] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": READY_AT}]}
    if ip is not None:
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    await client.patch_status("pods", name, {"status": status}, namespace=NS, patch_type="strategic")


async def evict(client: ki.Client, name: str) -> None:
    """POST a policy/v1 Eviction of the pod ``name`` (what ``kubectl drain`` does)."""
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}
    await client.create("pods", eviction, namespace=NS, subresource="eviction")


async def wait_object(client: ki.Client, resource: str, name: str,
                      condition: Callable[[Any], bool], timeout: float = 20) -> Any:
    """Wait (bounded) until ``resource/name`` in the test namespace satisfies ``condition`` (None: absent)."""
    return await ki.wait_for(client, resource, name, condition, namespace=NS, timeout=timeout)


async def wait_list(client: ki.Client, resource: str, check: Callable[[list[Any]], bool], *,
                    label_selector: str | None = None, timeout: float = 20) -> list[Any]:
    """Wait (bounded, woken by an informer's events, never polling) until ``check`` holds for the objects of
    ``resource`` in the test namespace; return them."""
    factory = ki.SharedInformerFactory(client)
    informer = factory.informer(resource, namespace=NS, label_selector=label_selector)
    changed = asyncio.Event()

    def touched(*_: Any, **__: Any) -> None:
        changed.set()

    informer.add_event_handler(on_add=touched, on_update=touched, on_delete=touched)
    factory.start()
    try:
        async with asyncio.timeout(timeout):
            await factory.wait_for_cache_sync()
            while True:
                changed.clear()
                objs = [dict(o) for o in informer.lister().list(namespace=NS)]
                if check(objs):
                    return objs
                await changed.wait()
    finally:
        await factory.shutdown()
