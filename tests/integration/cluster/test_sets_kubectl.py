"""kubectl against the StatefulSet and DaemonSet controllers: ``rollout status``, ``set image``, ``rollout
history`` and ``rollout undo`` read and write the ControllerRevisions the controllers keep, as against
kube-controller-manager. The test plays the scheduler and the kubelet (see tests/unit/cluster/_hsets_helpers.py)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from kinformer.client import Client
from kinformer.server import APIServer
from kinformer.server.cli import write_kubeconfig
from unit.cluster._hsets_helpers import add_node, kubelet

KUBECTL = shutil.which("kubectl")
pytestmark = [pytest.mark.kubectl, pytest.mark.slow,
              pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not found on PATH")]
TIMEOUT = 90.0

STATEFULSET = {
    "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"},
    "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
             "template": {"metadata": {"labels": {"app": "db"}},
                          "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}}}}
DAEMONSET = {
    "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
    "spec": {"selector": {"matchLabels": {"app": "agent"}},
             "template": {"metadata": {"labels": {"app": "agent"}},
                          "spec": {"containers": [{"name": "agent", "image": "fluentd:1.16"}]}}}}


class Kubectl:
    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(kubeconfig)}

    async def __call__(self, *args: str, input: str | None = None) -> str:
        assert KUBECTL is not None
        proc = await asyncio.create_subprocess_exec(
            KUBECTL, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self.env)
        out, err = await asyncio.wait_for(proc.communicate(input.encode() if input else None), TIMEOUT)
        assert proc.returncode == 0, f"kubectl {' '.join(args)} exited {proc.returncode}: {err.decode()}"
        return out.decode()

    async def image(self, kind: str, name: str) -> str:
        obj = json.loads(await self(*("get", kind, name, "-o", "json")))
        return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


async def test_kubectl_rolls_a_statefulset_out_updates_and_undoes_it(tmp_path: Path) -> None:
    async with APIServer(controllers=["statefulset"]) as server, Client(server.url) as client:
        kubectl = Kubectl(write_kubeconfig(tmp_path / "kubeconfig", server.url, None, None), tmp_path)
        async with kubelet(client, "app=db"):
            await kubectl("apply", "-f", "-", input=yaml.safe_dump(STATEFULSET))
            out = await kubectl("rollout", "status", "statefulset/db", f"--timeout={TIMEOUT:.0f}s")
            assert "roll out complete: 3 new pods have been updated" in out  # partition 0 is defaulted
            names = (await kubectl("get", "pods", "-l", "app=db", "-o", "name")).split()
            assert names == ["pod/db-0", "pod/db-1", "pod/db-2"]
            await kubectl("set", "image", "statefulset/db", "db=postgres:17")
            await kubectl("rollout", "status", "statefulset/db", f"--timeout={TIMEOUT:.0f}s")
            history = await kubectl("rollout", "history", "statefulset/db")
            assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
            await kubectl("rollout", "undo", "statefulset/db")
            await kubectl("rollout", "status", "statefulset/db", f"--timeout={TIMEOUT:.0f}s")
            assert await kubectl.image("statefulset", "db") == "postgres:16"
            pods: Any = json.loads(await kubectl("get", "pods", "-l", "app=db", "-o", "json"))["items"]
            assert {p["spec"]["containers"][0]["image"] for p in pods} == {"postgres:16"}
        events = await kubectl("get", "events", "--field-selector", "reason=SuccessfulCreate")
        assert "create Pod db-0 in StatefulSet db successful" in events


async def test_kubectl_rolls_a_daemonset_out_on_every_node_updates_and_undoes_it(tmp_path: Path) -> None:
    async with APIServer(controllers=["daemonset"]) as server, Client(server.url) as client:
        kubectl = Kubectl(write_kubeconfig(tmp_path / "kubeconfig", server.url, None, None), tmp_path)
        for name in ("node-1", "node-2"):
            await add_node(client, name)
        async with kubelet(client, "app=agent", schedule=True):
            await kubectl("apply", "-f", "-", input=yaml.safe_dump(DAEMONSET))
            out = await kubectl("rollout", "status", "daemonset/agent", f"--timeout={TIMEOUT:.0f}s")
            assert 'daemon set "agent" successfully rolled out' in out
            pods = json.loads(await kubectl("get", "pods", "-l", "app=agent", "-o", "json"))["items"]
            assert sorted(p["spec"]["nodeName"] for p in pods) == ["node-1", "node-2"]
            await kubectl("set", "image", "daemonset/agent", "agent=fluentd:1.17")
            await kubectl("rollout", "status", "daemonset/agent", f"--timeout={TIMEOUT:.0f}s")
            await kubectl("rollout", "undo", "daemonset/agent")
            await kubectl("rollout", "status", "daemonset/agent", f"--timeout={TIMEOUT:.0f}s")
            assert await kubectl.image("daemonset", "agent") == "fluentd:1.16"
