"""The real kubectl against a server with simulated nodes: ``kubectl logs`` answers what ``Client.logs`` does,
``kubectl delete pod`` returns once the pod's kubelet stopped and deleted it (graceful deletion), and
``kubectl describe`` / ``kubectl get events`` show the controllers' events as on a cluster."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from _hdeploy_helpers import deployment

from cluster_helpers import events, is_ready, pod, wait_for, wait_for_object
from kinformer.client import Client
from kinformer.errors import NotFound
from kinformer.server import APIServer

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not found on PATH")
NS = "default"
CALL_TIMEOUT = 30.0


@contextlib.asynccontextmanager
async def _serve(tmp_path: Path, **options: Any) -> AsyncIterator[tuple[APIServer, Client, Path]]:
    from kinformer.server.cli import write_kubeconfig

    async with APIServer(nodes=1, **options) as server, Client(server.url) as client:
        yield server, client, write_kubeconfig(tmp_path / "kubeconfig", server.url, None, None)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[APIServer, Client, Path]]:
    async with _serve(tmp_path) as served:
        yield served


@pytest.fixture
async def deployments(tmp_path: Path) -> AsyncIterator[tuple[APIServer, Client, Path]]:
    """A server running the deployment and replicaset controllers."""
    async with _serve(tmp_path, controllers=("deployment", "replicaset")) as served:
        yield served


async def _kubectl(kubeconfig: Path, *args: str) -> str:
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(kubeconfig.parent), "KUBECONFIG": str(kubeconfig)})
    out, err = await asyncio.wait_for(proc.communicate(), CALL_TIMEOUT)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_kubectl_logs_equals_client_logs(served: tuple[APIServer, Client, Path]) -> None:
    _, client, kubeconfig = served
    await client.create("pods", pod("web", node="node-1"), NS)
    await wait_for_object(client, "pods", "web", is_ready, NS)
    assert await _kubectl(kubeconfig, "logs", "web", "-n", NS) == await client.logs("web", NS)


async def test_kubectl_delete_pod_returns_once_the_kubelet_deleted_it(served: tuple[APIServer, Client, Path]) -> None:
    _, client, kubeconfig = served
    await client.create("pods", pod("web", node="node-1", terminationGracePeriodSeconds=30), NS)
    await wait_for_object(client, "pods", "web", is_ready, NS)
    out = await _kubectl(kubeconfig, "delete", "pod", "web", "-n", NS)
    assert 'pod "web" deleted' in out
    with pytest.raises(NotFound):
        await client.get("pods", "web", NS)


async def _scaled(client: Client, message: str, count: int) -> None:
    async def seen() -> bool:
        return any(e["message"] == message and e.get("count", 1) == count
                   for e in await events(client, "web", "ScalingReplicaSet"))

    await wait_for(seen, timeout=20, what=f"event {message!r} x{count}")


async def test_kubectl_describe_deployment_shows_one_line_per_message_with_counts(
        deployments: tuple[APIServer, Client, Path]) -> None:
    _, client, kubeconfig = deployments
    await client.create("deployments", deployment("web", 1, {"app": "web"}), NS)
    await wait_for(lambda: _one_replicaset(client), timeout=20, what="the deployment's replica set")
    rs = await _one_replicaset(client)
    for replicas, scaled, count in ((1, "up replica set {} from 0 to 1", 1), (2, "up replica set {} from 1 to 2", 1),
                                    (1, "down replica set {} from 2 to 1", 1), (2, "up replica set {} from 1 to 2", 2)):
        await client.patch("deployments", "web", {"spec": {"replicas": replicas}}, namespace=NS)
        await _scaled(client, "Scaled " + scaled.format(rs), count)
    out = await _kubectl(kubeconfig, "describe", "deployment", "web", "-n", NS)
    lines = [line for line in out[out.index("Events:"):].splitlines() if "ScalingReplicaSet" in line]
    assert len(lines) == 3, out  # one line per distinct message; the repeat is counted on its line
    assert re.search(rf"Normal\s+ScalingReplicaSet\s+.*\(x2 over .*\)\s+deployment-controller\s+"
                     rf"Scaled up replica set {rs} from 1 to 2$", "\n".join(lines), re.MULTILINE), out
    got = await _kubectl(kubeconfig, "get", "events", "-n", NS, "--field-selector", "reason=SuccessfulCreate")
    assert re.search(rf"Normal\s+SuccessfulCreate\s+replicaset/{rs}\s+Created pod: {rs}-\w+", got), got


async def _one_replicaset(client: Client) -> str | None:
    items = (await client.list("replicasets", NS)).items
    return items[0]["metadata"]["name"] if len(items) == 1 else None
