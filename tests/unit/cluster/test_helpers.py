"""tests/cluster_helpers.py: ``run_pod`` plays the kubelet on a bare server, as controller tests need before the
simulated nodes run their pods."""

from __future__ import annotations

from cluster_helpers import is_ready, phase_is, pod, run_pod, wait_for_object
from kinformer.client import Client


async def test_run_pod_binds_and_marks_the_pod_running_and_ready(kube_client: Client) -> None:
    await kube_client.create("pods", pod("web"), "default")
    out = await run_pod(kube_client, "web", "default", node="node-2")
    assert out["spec"]["nodeName"] == "node-2"
    await wait_for_object(kube_client, "pods", "web", lambda o: phase_is("Running")(o) and is_ready(o), "default")
