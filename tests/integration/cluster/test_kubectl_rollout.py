"""kubectl 1.32's rollout commands against the replicaset and deployment controllers: ``rollout status`` returns
once the pods are ready, ``set image`` never exceeds maxSurge nor drops below maxUnavailable, ``rollout
history`` lists the revisions, ``rollout undo`` (done client side by kubectl, by patching the template from the
old ReplicaSet) rolls back, ``scale`` scales. The test plays the kubelet: it marks pods Running and Ready."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import kinformer as ki
from cluster_helpers import in_background, is_ready
from kinformer.server import APIServer
from kinformer.server.cli import write_kubeconfig
from unit.cluster._hdeploy_helpers import NS, mark_ready, pods

KUBECTL = shutil.which("kubectl")
pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180),
              pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not found on PATH")]
CALL_TIMEOUT = 60.0


class Kubectl:
    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith("KUBE")},
                    "HOME": str(home), "KUBECONFIG": str(kubeconfig)}

    async def run(self, *args: str) -> tuple[int, str, str]:
        assert KUBECTL is not None
        proc = await asyncio.create_subprocess_exec(KUBECTL, *args, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE, env=self.env)
        out, err = await asyncio.wait_for(proc.communicate(), CALL_TIMEOUT)
        return proc.returncode or 0, out.decode(), err.decode()

    async def __call__(self, *args: str) -> str:
        code, out, err = await self.run(*args)
        if code:
            raise AssertionError(f"kubectl {' '.join(args)} exited {code}: {err}{out}")
        return out

    async def status(self, *args: str) -> tuple[int, str]:
        code, _, err = await self.run(*args)
        return code, err


@contextlib.asynccontextmanager
async def kubelet(client: ki.Client, selector: str, observe: Callable[[list[Any]], None] | None = None,
                  ) -> AsyncIterator[None]:
    """Mark one not-ready pod ready per round (as slow kubelets would), calling ``observe`` with the live pods
    before each step, until the block ends."""
    async def loop() -> None:
        while True:
            live = await pods(client, selector)
            if observe is not None:
                observe(live)
            pending = [p for p in live if not is_ready(p)]
            if pending:
                with contextlib.suppress(ki.NotFound, ki.Conflict):
                    await mark_ready(client, pending[0])
            await asyncio.sleep(0.05)

    async with in_background(loop, "test-kubelet"):
        yield


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[Kubectl, ki.Client]]:
    async with APIServer(storage="memory", controllers=["replicaset", "deployment"]) as server, \
            ki.Client(server.url) as client:
        yield Kubectl(write_kubeconfig(tmp_path / "kubeconfig", server.url, None, None), tmp_path), client


async def _images(client: ki.Client, selector: str) -> set[str]:
    return {p["spec"]["containers"][0]["image"] for p in await pods(client, selector)}


async def test_kubectl_rollout_status_set_image_history_undo_and_scale(cluster: tuple[Kubectl, ki.Client]) -> None:
    kubectl, client = cluster
    await kubectl("create", "deployment", "web", "--image=nginx:1.25", "--replicas=4")
    async with kubelet(client, "app=web"):
        out = await kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    assert 'deployment "web" successfully rolled out' in out

    counts: list[tuple[int, int]] = []  # (live pods, ready pods) seen during the rollout
    async with kubelet(client, "app=web", lambda live: counts.append((len(live), sum(map(is_ready, live))))):
        await kubectl("set", "image", "deployment/web", "nginx=nginx:1.26")
        out = await kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    assert 'deployment "web" successfully rolled out' in out
    assert await _images(client, "app=web") == {"nginx:1.26"}
    # 4 replicas, maxSurge 25% -> 1, maxUnavailable 25% -> 1: at most 5 pods, at least 3 ready
    assert max(live for live, _ in counts) <= 5
    assert min(ready for _, ready in counts) >= 3

    history = await kubectl("rollout", "history", "deployment/web")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
    described = await kubectl("describe", "deployment", "web")
    new_rs = next(line.split()[1] for line in described.splitlines() if line.startswith("NewReplicaSet:"))
    assert "(4/4 replicas created)" in described and "NewReplicaSetAvailable" in described
    assert f"Scaled up replica set {new_rs} from 0 to 1" in described

    async with kubelet(client, "app=web"):
        await kubectl("rollout", "undo", "deployment/web")
        out = await kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    assert 'deployment "web" successfully rolled out' in out
    assert await _images(client, "app=web") == {"nginx:1.25"}
    history = await kubectl("rollout", "history", "deployment/web")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]
    d = await client.get("deployments", "web", namespace=NS)
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    rss = (await client.list("replicasets", namespace=NS)).items
    back = next(rs for rs in rss if rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3")
    assert back["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"

    await kubectl("scale", "deployment/web", "--replicas=6")
    async with kubelet(client, "app=web"):
        out = await kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    assert len(await pods(client, "app=web")) == 6


async def test_kubectl_rollout_pause_resume_and_restart(cluster: tuple[Kubectl, ki.Client]) -> None:
    kubectl, client = cluster
    await kubectl("create", "deployment", "web", "--image=nginx:1.25", "--replicas=2")
    async with kubelet(client, "app=web"):
        await kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    await kubectl("rollout", "pause", "deployment/web")
    await kubectl("set", "image", "deployment/web", "nginx=nginx:1.26")
    code, _ = await kubectl.status("rollout", "status", "deployment/web", "--timeout=1s")
    assert code != 0  # paused: kubectl waits for the rollout, which does not start
    assert await _images(client, "app=web") == {"nginx:1.25"}
    await kubectl("rollout", "resume", "deployment/web")
    async with kubelet(client, "app=web"):
        await kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    assert await _images(client, "app=web") == {"nginx:1.26"}
    before = {p["metadata"]["name"] for p in await pods(client, "app=web")}
    await kubectl("rollout", "restart", "deployment/web")
    async with kubelet(client, "app=web"):
        await kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    after = {p["metadata"]["name"] for p in await pods(client, "app=web")}
    assert len(after) == 2 and not after & before
    history = await kubectl("rollout", "history", "deployment/web")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2", "3"]
    assert "nginx:1.26" in await kubectl("rollout", "history", "deployment/web", "--revision=2")
    async with kubelet(client, "app=web"):
        await kubectl("rollout", "undo", "deployment/web", "--to-revision=1")
        await kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    assert await _images(client, "app=web") == {"nginx:1.25"}
    history = await kubectl("rollout", "history", "deployment/web")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3", "4"]


async def test_kubectl_rollout_status_fails_once_the_progress_deadline_is_exceeded(
        cluster: tuple[Kubectl, ki.Client]) -> None:
    """No kubelet: the pod never becomes ready, Progressing turns False and ``rollout status`` gives up."""
    kubectl, _ = cluster
    await kubectl("create", "deployment", "stuck", "--image=nginx:1.25")
    await kubectl("patch", "deployment/stuck", "-p", '{"spec":{"progressDeadlineSeconds":1}}')
    code, err = await kubectl.status("rollout", "status", "deployment/stuck", "--timeout=60s")
    assert code != 0
    assert 'deployment "stuck" exceeded its progress deadline' in err
