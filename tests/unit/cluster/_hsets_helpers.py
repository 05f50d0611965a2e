"""Test helpers for the StatefulSet and DaemonSet controller tests: the tests play the kubelet (and, for
DaemonSet pods, the scheduler) themselves, as kube's controller unit tests use fake pods."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any

from cluster_helpers import bind, in_background, running_status
from kinformer.client import Client
from kinformer.cluster.controllers.daemonset_nodes import target_node
from kinformer.cluster.metatime import rfc3339
from kinformer.errors import Conflict, NotFound
from unit.cluster._hsched_helpers import add_node

NS = "default"
__all__ = ["NS", "add_node", "kubelet", "live_pod_names", "pods", "set_phase", "set_running"]


async def pods(client: Client, selector: str, namespace: str = NS) -> list[Mapping[str, Any]]:
    """The pods matching ``selector``, by name."""
    items = (await client.list("pods", namespace=namespace, label_selector=selector)).items
    return sorted(items, key=lambda p: p["metadata"]["name"])


async def live_pod_names(client: Client, selector: str) -> list[str]:
    return [p["metadata"]["name"] for p in await pods(client, selector) if not p["metadata"].get("deletionTimestamp")]


async def set_running(client: Client, pod: Mapping[str, Any], *, ready: bool = True, wall: float | None = None,
                      node: str | None = None) -> None:
    """Play the kubelet: the pod Running, its Ready condition ``ready``, its containers started."""
    meta = pod["metadata"]
    now = rfc3339(wall if wall is not None else datetime.now(UTC).timestamp())
    status = running_status(pod, ready=ready, since=now, ip="10.244.0.9", host_ip="10.0.0.1")
    await client.patch_status("pods", meta["name"], {"status": status}, namespace=meta["namespace"])


async def set_phase(client: Client, pod: Mapping[str, Any], phase: str) -> None:
    meta = pod["metadata"]
    await client.patch_status("pods", meta["name"], {"status": {"phase": phase}}, namespace=meta["namespace"])


async def _play(client: Client, pod: Mapping[str, Any], schedule: bool, bound_only: bool,
                unready: tuple[str, ...]) -> None:
    """One look at one pod: finish its deletion, bind it to the node its affinity names, or run it."""
    meta, spec = pod["metadata"], pod["spec"]
    if meta.get("deletionTimestamp"):
        await client.delete("pods", meta["name"], namespace=meta["namespace"], grace_period_seconds=0,
                            preconditions={"uid": meta["uid"]})
        return
    if schedule and not spec.get("nodeName"):
        node = target_node(pod)
        if node is not None:
            await bind(client, pod["metadata"]["name"], pod["metadata"]["namespace"], node)
        return
    pending = (pod.get("status") or {}).get("phase") in (None, "", "Pending")
    if pending and (spec.get("nodeName") or not (schedule or bound_only)):
        ready = not any(c["image"] in unready for c in spec["containers"])
        await set_running(client, pod, ready=ready)


@contextlib.asynccontextmanager
async def kubelet(client: Client, selector: str, *, schedule: bool = False, bound_only: bool = False,
                  unready_images: tuple[str, ...] = ()) -> AsyncIterator[None]:
    """Play the kubelet (and, with ``schedule``, the scheduler) while the block runs, for the pods matching
    ``selector``: pods being deleted are removed, pods aimed at a node by their affinity are bound to it, and
    Pending pods (with ``schedule`` or ``bound_only``: bound ones only) become Running and Ready (Running but
    not Ready when a container has one of ``unready_images``)."""

    async def run() -> None:
        while True:
            for pod in await pods(client, selector):
                with contextlib.suppress(NotFound, Conflict):
                    await _play(client, pod, schedule, bound_only, unready_images)
            await asyncio.sleep(0.02)

    async with in_background(run, "test-kubelet"):
        yield
