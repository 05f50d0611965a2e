"""The real kubectl against a server with simulated nodes: ``kubectl logs`` answers what ``Client.logs`` does, and
``kubectl delete pod`` returns once the pod's kubelet stopped and deleted it (graceful deletion)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cluster_helpers import is_ready, pod, wait_for_object
from kinformer.client import Client
from kinformer.errors import NotFound
from kinformer.server import APIServer

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not found on PATH")
NS = "default"
CALL_TIMEOUT = 30.0


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[APIServer, Client, Path]]:
    from kinformer.server.cli import write_kubeconfig

    async with APIServer(nodes=1) as server, Client(server.url) as client:
        yield server, client, write_kubeconfig(tmp_path / "kubeconfig", server.url, None, None)


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
