"""Helpers for tests of the moving cluster (:mod:`kinformer.cluster`), usable by every controller's tests.

* :func:`wait_for` — poll a probe (plain or async) until it returns something truthy (returned), bounded by
  ``asyncio.timeout``; the one bounded wait of the cluster's tests (``_h*_helpers`` use it too);
* :func:`in_background` — a loop run as a task while a block runs, cancelled and awaited after it;
* :func:`wait_for_object` / :func:`wait_gone` — watch an object until a predicate holds (returned) / it is gone;
* :func:`events` — the core/v1 Events about an object (optionally of one reason), as ``kubectl get events``
  lists them;
* :func:`condition` / :func:`is_ready` — a status condition by type / a pod's Ready condition is True;
* :func:`pod` — a minimal pod body (optionally bound to a node);
* :func:`bind` — play the scheduler: POST the pod's ``pods/binding``;
* :func:`running_status` — the status a kubelet writes for a running pod (ready or not), the one body every
  test that plays the kubelet patches in (the ``_h*_helpers`` too);
* :func:`run_pod` — play the kubelet where none runs: bind a pod and write that status, as kube's
  controller unit tests use fake pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

from kinformer.client import Client
from kinformer.controller.wait import wait_for as ki_wait_for

T = TypeVar("T")

#: the polling period of :func:`wait_for` (real time; the condition, not the period, synchronizes).
POLL = 0.02


async def wait_for(probe: Callable[[], T | Awaitable[T]], timeout: float = 20.0, what: str = "condition") -> T:
    """Poll ``probe()`` until it returns something truthy and return that; TimeoutError naming ``what`` after
    ``timeout`` seconds."""
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
        raise TimeoutError(f"{what} did not hold within {timeout} s") from None


@contextlib.asynccontextmanager
async def in_background(loop: Callable[[], Awaitable[None]], name: str) -> AsyncIterator[None]:
    """Run ``loop()`` as a task while the block runs (a test playing the kubelet or the scheduler), then cancel
    it and wait for it: the task never outlives the block, and an error it raised surfaces here."""
    task = asyncio.create_task(loop(), name=name)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def wait_for_object(client: Client, resource: str, name: str, predicate: Callable[[Any], bool],
                          namespace: str | None = None, timeout: float = 10.0) -> Any:
    """Watch ``resource/name`` until ``predicate(obj)`` holds (a missing object never does); returns it."""
    return await ki_wait_for(client, resource, name, lambda obj: obj is not None and predicate(obj),
                             namespace=namespace, timeout=timeout)


async def wait_gone(client: Client, resource: str, name: str, namespace: str | None = None,
                    timeout: float = 10.0) -> None:
    """Watch ``resource/name`` until it no longer exists."""
    await ki_wait_for(client, resource, name, lambda obj: obj is None, namespace=namespace, timeout=timeout)


async def events(client: Client, name: str, reason: str | None = None, namespace: str = "default") -> list[Any]:
    """The core/v1 Events about the object ``name`` (of ``reason`` when given), as ``kubectl get events``
    lists them."""
    items = (await client.list("events", namespace=namespace)).items
    return [e for e in items if (e.get("involvedObject") or {}).get("name") == name
            and (reason is None or e.get("reason") == reason)]


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


def condition(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    """The condition of ``type_`` in ``obj``'s status, or None."""
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c.get("type") == type_), None)


def is_ready(obj: Any) -> bool:
    """The pod's Ready condition is True."""
    return (condition(obj, "Ready") or {}).get("status") == "True"


async def bind(client: Client, name: str, namespace: str, node: str) -> None:
    """Play the scheduler: bind pod ``name`` to ``node`` through ``pods/binding``."""
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace},
               "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    await client.create("pods", binding, namespace=namespace, subresource="binding")


def running_status(pod: Mapping[str, Any], *, ready: bool = True, since: str = "2024-01-01T00:00:00Z",
                   ip: str | None = None, host_ip: str | None = None) -> dict[str, Any]:
    """The status a kubelet writes for ``pod`` running since ``since`` (RFC 3339): phase Running, every
    container started (ready as asked), the Ready and ContainersReady conditions ``ready`` (Initialized and
    PodScheduled True), and the pod's IP and host IP when given."""
    flag = "True" if ready else "False"
    conditions = [{"type": t, "status": "True", "lastTransitionTime": since} for t in ("Initialized", "PodScheduled")]
    conditions += [{"type": t, "status": flag, "lastTransitionTime": since} for t in ("Ready", "ContainersReady")]
    status: dict[str, Any] = {
        "phase": "Running", "startTime": since, "conditions": conditions,
        "containerStatuses": [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": ready,
                               "started": True, "restartCount": 0, "state": {"running": {"startedAt": since}}}
                              for c in pod["spec"].get("containers") or ()]}
    if ip is not None:
        status["podIP"], status["podIPs"] = ip, [{"ip": ip}]
    if host_ip is not None:
        status["hostIP"] = host_ip
    return status


async def run_pod(client: Client, name: str, namespace: str, node: str = "node-1",
                  pod_ip: str = "10.244.1.10") -> Any:
    """Play the kubelet: bind pod ``name`` to ``node`` (when unbound) and mark it Running and Ready."""
    current = await client.get("pods", name, namespace)
    if not current["spec"].get("nodeName"):
        await bind(client, name, namespace, node)
    return await client.patch_status("pods", name, {"status": running_status(current, ip=pod_ip)}, "strategic",
                                     namespace)
