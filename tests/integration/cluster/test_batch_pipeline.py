"""The three batch controllers together, as kube-controller-manager runs them, on a fake clock: a CronJob's
Job runs its pod (the test plays the kubelet), completes, is seen by the CronJob, and is deleted by its TTL."""

from __future__ import annotations

from cluster_helpers import wait_for
from kinformer.client import Client
from kinformer.cluster.controllers.batch import format_time
from kinformer.errors import NotFound
from kinformer.server import APIServer
from unit.cluster._hjobs_helpers import (
    NS,
    batch_cluster,
    finish_pod,
    has_condition,
    job_body,
    settle,
    wait_event,
    wait_job,
    wait_pods,
)
from unit.cluster.test_cronjob import START, cronjob_body, minute, wait_cronjob


async def test_a_cronjobs_job_runs_completes_is_recorded_and_expires() -> None:
    async with batch_cluster("job", "cronjob", "ttl-after-finished") as (server, client, clock):
        body = cronjob_body("nightly", "*/1 * * * *")
        body["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = 30
        await client.create("cronjobs", body, NS)
        await minute(server, clock)
        name = f"nightly-{int(START) // 60 + 1}"
        (pod,) = await wait_pods(client, name, 1)
        await finish_pod(client, pod, clock)
        job = await wait_job(client, name, has_condition("Complete"), "Complete")
        cj = await wait_cronjob(client, "nightly", lambda s: s.get("lastSuccessfulTime"), "lastSuccessfulTime")
        assert cj["status"]["lastSuccessfulTime"] == job["status"]["completionTime"] == format_time(START + 60.1)
        assert not cj["status"].get("active")
        await wait_event(client, "nightly", "SawCompletedJob")
        await settle(server, "ttl-after-finished")
        clock.step(30)

        async def expired() -> bool:
            try:
                await client.get("jobs", name, NS)
            except NotFound:
                return True
            return False

        await wait_for(expired, what="the job deleted 30 s after it finished")


async def test_a_job_whose_pods_exit_non_zero_fails_on_simulated_nodes() -> None:
    """The documented way to fail Job pods on simulated kubelets: the ``kinformer.io/exit-code`` annotation."""
    template = {"metadata": {"annotations": {"kinformer.io/exit-code": "3"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}}]}
    async with APIServer(compaction_interval=0, controllers=["job", "scheduler"], nodes=1) as server, \
            Client(server.url) as client:
        await client.create("jobs", job_body("exit3", template=template, podFailurePolicy=policy), NS)
        job = await wait_job(client, "exit3", has_condition("Failed"), "Failed")
        failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
        assert failed["reason"] == "PodFailurePolicy" and "failed with exit code 3" in failed["message"]
