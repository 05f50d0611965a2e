"""Issue 24's "Done when" for jobs, through kubectl: ``kubectl create job`` then ``kubectl wait
--for=condition=complete`` on a server running the job controller. Until simulated kubelets run pods, the
test plays the kubelet (the pod exits 0)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from integration.test_security import _kubectl
from kinformer.client import Client
from kinformer.clock import REAL_CLOCK
from kinformer.server import APIServer
from kinformer.server.cli import write_kubeconfig
from unit.cluster._hjobs_helpers import NS, finish_pod, wait_pods

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


async def test_kubectl_create_job_then_wait_for_condition_complete(tmp_path: Path) -> None:
    async with APIServer(compaction_interval=0, controllers=["job"]) as server:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url, None, None)
        code, out, err = await _kubectl(kubeconfig, "create", "job", "x", "--image=busybox")
        assert code == 0, err
        assert out.strip() == "job.batch/x created"
        waiting = asyncio.create_task(_kubectl(kubeconfig, "wait", "--for=condition=complete", "job/x",
                                               "--timeout=50s"))
        async with Client(server.url) as client:
            (pod,) = await wait_pods(client, "x", 1)
            await finish_pod(client, pod, REAL_CLOCK)  # the kubelet's part: busybox exited 0
        code, out, err = await waiting
        assert code == 0, err
        assert out.strip() == "job.batch/x condition met"
        code, out, err = await _kubectl(kubeconfig, "get", "job", "x", "-o",
                                        "jsonpath={.status.succeeded} {.status.conditions[*].type}")
        assert (code, out) == (0, "1 SuccessCriteriaMet Complete"), err
        code, out, err = await _kubectl(kubeconfig, "get", "events", "-n", NS, "-o",
                                        "jsonpath={range .items[*]}{.reason}{'\\n'}{end}")
        assert code == 0, err
        assert {"SuccessfulCreate", "Completed"} <= set(out.split())
        code, out, err = await _kubectl(kubeconfig, "describe", "job", "x")
        assert code == 0, err
        assert "job-controller" in out and "Created pod: x-" in out and "Job completed" in out


async def test_kubectl_create_job_completes_on_simulated_nodes(tmp_path: Path) -> None:
    """Issue 24's "Done when", as it comes: the scheduler binds the pod, the simulated kubelet runs busybox to
    exit 0, the Job controller completes the Job; nothing is played by the test."""
    async with APIServer(compaction_interval=0, controllers=["job", "scheduler"], nodes=1) as server:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url, None, None)
        code, out, err = await _kubectl(kubeconfig, "create", "job", "x", "--image=busybox")
        assert code == 0, err
        code, out, err = await _kubectl(kubeconfig, "wait", "--for=condition=complete", "job/x", "--timeout=50s")
        assert (code, out.strip()) == (0, "job.batch/x condition met"), err
        code, out, err = await _kubectl(kubeconfig, "get", "job", "x", "-o",
                                        "jsonpath={.status.succeeded} {.status.uncountedTerminatedPods}")
        assert (code, out) == (0, "1 {}"), err
