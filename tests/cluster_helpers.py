"""Helpers for tests of the moving cluster (:mod:`kinformer.cluster`), usable by every controller's tests.

* :func:`wait_for` — poll a probe (plain or async) until it returns something truthy (returned), bounded by
  ``asyncio.timeout``; the one bounded wait of the cluster's tests (``_h*_helpers`` use it too);
* :func:`wait_for_object` / :func:`wait_gone` — watch an object until a predicate holds (returned) / it is gone;
* :func:`pod` — a minimal pod body (optionally bound to a node);
* :func:`run_pod` — play the kubelet where none runs: bind a pod and write the status a kubelet would
  (Running, Ready, containerStatuses), as kube's controller unit tests use fake pods.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import orjson

from kinformer.client import Client
from kinformer.controller.wait import wait_for as ki_wait_for

T = TypeVar("T")

#: the polling period of :func:`wait_for` (real time; the condition, not the period, synchronizes).
POLL = 0.02


async def wait_for(probe: Callable[[], T | Awaitable[T]], what: str = "condition", timeout: float = 20.0, *,
                   message: str | None = None) -> T:
    """Poll ``probe()`` until it returns something truthy and return that; TimeoutError naming ``what`` (or
    ``message``) after ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                value = probe()
                if inspect.isawaitable(value):
                    value = await value
                if value:
                    return value  # type: ignore[return-value]
                await asyncio.sleep(POLL)
    except TimeoutError:
        raise TimeoutError(f"{message or what} did not hold within {timeout} s") from None


async def wait_for_object(client: Client, resource: str, name: str, predicate: Callable[[Any], bool],
                          namespace: str | None = None, timeout: float = 10.0) -> Any:
    """Watch ``resource/name`` until ``predicate(obj)`` holds (a missing object never does); returns it."""
    return await ki_wait_for(client, resource, name, lambda obj: obj is not None and predicate(obj),
                             namespace=namespace, timeout=timeout)


async def wait_gone(client: Client, resource: str, name: str, namespace: str | None = None,
                    timeout: float = 10.0) -> None:
    """Watch ``resource/name`` until it no longer exists."""
    await ki_wait_for(client, resource, name, lambda obj: obj is None, namespace=namespace, timeout=timeout)


def pod(name: str, *, node: str | None = None, containers: tuple[str, ...] = ("app",),
        restart_policy: str | None = None, annotations: Mapping[str, str] | None = None,
        **spec: Any) -> dict[str, Any]:
    """A pod body with one busybox container per name, bound to ``node`` when given."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                            "spec": {"containers": [{"name": c, "image": "busybox"} for c in containers], **spec}}
    if node:
        body["spec"]["nodeName"] = node
    if restart_policy:
        body["spec"]["restartPolicy"] = restart_policy
    if annotations:
        body["metadata"]["annotations"] = dict(annotations)
    return body


def phase_is(phase: str) -> Callable[[Any], bool]:
    return lambda obj: (obj.get("status") or {}).get("phase") == phase


def is_ready(obj: Any) -> bool:
    """The pod's Ready condition is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or ())


async def run_pod(client: Client, name: str, namespace: str, node: str = "node-1",
                  pod_ip: str = "10.244.1.10") -> Any:
    """Play the kubelet: bind pod ``name`` to ``node`` (when unbound) and mark it Running and Ready."""
    current = await client.get("pods", name, namespace)
    if not current["spec"].get("nodeName"):
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        await client.request_bytes("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
                                   data=orjson.dumps(binding), headers={"Content-Type": "application/json"})
    ready = [{"type": t, "status": "True"} for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]
    statuses = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True, "started": True,
                 "restartCount": 0, "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}}
                for c in current["spec"]["containers"]]
    return await client.patch_status("pods", name, {"status": {
        "phase": "Running", "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "conditions": ready,
        "containerStatuses": statuses}}, "strategic", namespace)
