"""The Job controller, named after what kube's e2e (test/e2e/apps/job.go) and unit tests assert; the tests
play the kubelet (pods patched to Running / Succeeded / Failed)."""

from __future__ import annotations

from unit.cluster._hjobs_helpers import (
    NS,
    batch_cluster,
    finish_pod,
    has_condition,
    job_body,
    run_pod,
    wait_event,
    wait_job,
    wait_pods,
)

COMPLETE = has_condition("Complete")


async def test_should_run_a_job_to_completion_when_tasks_succeed() -> None:
    async with batch_cluster("job") as (_, client, clock):
        await client.create("jobs", job_body("all-succeed", completions=4, parallelism=2), NS)
        for _ in range(2):
            pods = await wait_pods(client, "all-succeed", 2)
            for pod in pods:
                await run_pod(client, pod, clock)
            for pod in pods:
                await finish_pod(client, pod, clock)
        job = await wait_job(client, "all-succeed", COMPLETE, "Complete")
        status = job["status"]
        assert status["succeeded"] == 4 and "failed" not in status and status["ready"] == 0
        assert status["completionTime"] and status["startTime"]
        assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
        assert status["uncountedTerminatedPods"] == {}
        await wait_event(client, "all-succeed", "Completed")
