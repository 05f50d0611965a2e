"""The TTL-after-finished controller on a fake clock, named after kube's e2e
(test/e2e/apps/ttl_after_finished.go: "job should be deleted once it finishes after TTL seconds")."""

from __future__ import annotations

from cluster_helpers import wait_for
from kinformer.client import Client
from kinformer.cluster.controllers.ttlafterfinished import time_left
from kinformer.errors import NotFound
from unit.cluster._hjobs_helpers import (
    NS,
    batch_cluster,
    controller_named,
    finish_pod,
    has_condition,
    job_body,
    settle,
    wait_job,
    wait_pods,
)


async def _gone(client: Client, name: str) -> bool:
    try:
        await client.get("jobs", name, NS)
    except NotFound:
        return True
    return False


async def test_job_should_be_deleted_once_it_finishes_after_ttl_seconds() -> None:
    async with batch_cluster("job", "ttl-after-finished") as (server, client, clock):
        await client.create("jobs", job_body("ttl", ttlSecondsAfterFinished=10), NS)
        (pod,) = await wait_pods(client, "ttl", 1)
        await finish_pod(client, pod, clock)
        await wait_job(client, "ttl", has_condition("Complete"), "Complete")
        await settle(server, "ttl-after-finished")
        clock.step(9)
        await settle(server, "ttl-after-finished")
        assert not await _gone(client, "ttl")
        clock.step(1)
        await wait_for(lambda: _gone(client, "ttl"), what="the job deleted after its TTL")
        assert not (await client.list("pods", NS)).items  # foreground: its pods went with it


async def test_unfinished_job_is_never_deleted() -> None:
    async with batch_cluster("job", "ttl-after-finished") as (server, client, clock):
        await client.create("jobs", job_body("running", ttlSecondsAfterFinished=0), NS)
        await wait_pods(client, "running", 1)
        await wait_job(client, "running", lambda j: j["status"].get("active") == 1, "1 active")
        async def looked_at_twice() -> bool:  # the job's creation and its status update
            ttl = controller_named(server, "ttl-after-finished")
            return ttl is not None and ttl.stats.successes >= 2 and ttl.stats.active == 0 and len(ttl.queue) == 0

        await wait_for(looked_at_twice, what="the TTL controller saw the running job")
        ttl = controller_named(server, "ttl-after-finished")
        assert ttl is not None and ttl.queue.waiting_count == 0  # nothing scheduled: it waits for the job to finish
        clock.step(3600)
        assert not await _gone(client, "running")


async def test_zero_ttl_deletes_as_soon_as_finished_and_a_changed_ttl_is_reread() -> None:
    async with batch_cluster("job", "ttl-after-finished") as (server, client, clock):
        await client.create("jobs", job_body("now", ttlSecondsAfterFinished=0), NS)
        (pod,) = await wait_pods(client, "now", 1)
        await finish_pod(client, pod, clock)
        await wait_for(lambda: _gone(client, "now"), what="the job deleted at once")
        await client.create("jobs", job_body("later", ttlSecondsAfterFinished=5), NS)
        (pod,) = await wait_pods(client, "later", 1)
        await finish_pod(client, pod, clock)
        await wait_job(client, "later", has_condition("Complete"), "Complete")
        await settle(server, "ttl-after-finished")
        await client.patch("jobs", "later", {"spec": {"ttlSecondsAfterFinished": 60}}, namespace=NS)
        clock.step(5)
        await settle(server, "ttl-after-finished")
        assert not await _gone(client, "later")


def test_time_left_counts_from_the_finished_condition() -> None:
    job = {"metadata": {"name": "j"}, "spec": {"ttlSecondsAfterFinished": 30},
           "status": {"conditions": [{"type": "Failed", "status": "True",
                                      "lastTransitionTime": "2027-01-15T08:00:00Z"}]}}
    assert time_left(job, 1_800_000_000.0 + 10) == 20
    assert time_left({**job, "spec": {}}, 0) is None
    assert time_left({**job, "status": {}}, 0) is None
    assert time_left({**job, "metadata": {"name": "j", "deletionTimestamp": "2027-01-15T08:00:00Z"}}, 0) is None
