"""Test helpers for the replicaset and deployment controllers: play the kubelet (mark pods Running and Ready)
and build ReplicaSets and Deployments (waits: _hsched_helpers.wait_for)."""

from __future__ import annotations

import time
from typing import Any

import kinformer as ki
from cluster_helpers import running_status
from kinformer.cluster.metatime import rfc3339

NS = "default"


async def pods(client: ki.Client, selector: str = "", namespace: str = NS) -> list[Any]:
    result = await client.list("pods", namespace=namespace, label_selector=selector or None)
    return [p for p in result.items if not p["metadata"].get("deletionTimestamp")]


async def mark_ready(client: ki.Client, pod: Any, *, ready: bool = True) -> None:
    """The kubelet's part: the pod Running with its Ready condition (and containers) as asked."""
    status = running_status(pod, ready=ready, since=rfc3339(time.time()))
    await client.patch_status("pods", pod["metadata"]["name"], {"status": status},
                              namespace=pod["metadata"]["namespace"])


async def mark_all_ready(client: ki.Client, selector: str, namespace: str = NS) -> int:
    """Mark every live pod matching ``selector`` that is not ready yet; return how many were marked."""
    count = 0
    for pod in await pods(client, selector, namespace):
        conds = (pod.get("status") or {}).get("conditions") or []
        if not any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
            await mark_ready(client, pod)
            count += 1
    return count


def pod_template(labels: dict[str, str], image: str = "nginx:1.25") -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "web", "image": image}]}}


def replicaset(name: str, replicas: int, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": pod_template(labels),
                     **spec}}


def deployment(name: str, replicas: int, labels: dict[str, str], image: str = "nginx:1.25",
               **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": pod_template(labels, image), **spec}}
