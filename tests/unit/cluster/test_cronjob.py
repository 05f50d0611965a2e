"""The CronJob controller on a fake clock, named after what kube's e2e (test/e2e/apps/cronjob.go) and unit
tests assert. Only the cronjob controller runs: the tests finish Jobs by writing their status, as the Job
controller would."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cluster_helpers import wait_for
from kinformer.client import Client
from kinformer.clock import FakeClock
from kinformer.cluster.controllers.batch import format_time
from kinformer.cluster.controllers.cronjob import NEXT_SCHEDULE_DELTA
from kinformer.server import APIServer
from unit.cluster._hjobs_helpers import (
    NS,
    batch_cluster,
    controller_named,
    events_of,
    settle,
    wait_event,
)

START = 1_800_000_000.0  # 2027-01-15T08:00:00Z, on a minute


def cronjob_body(name: str, schedule: str = "*/1 * * * ?", **spec: Any) -> dict[str, Any]:
    template = {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                                               "containers": [{"name": "c", "image": "busybox"}]}}}}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule, "jobTemplate": template, **spec}}


async def jobs_of(client: Client, cronjob: str) -> list[Any]:
    jobs = (await client.list("jobs", NS)).items
    return sorted((j for j in jobs if any(r.get("name") == cronjob for r in j["metadata"].get("ownerReferences")
                                          or ())), key=lambda j: j["metadata"]["name"])


async def wait_jobs(client: Client, cronjob: str, count: int) -> list[Any]:
    async def probe() -> list[Any] | None:
        jobs = await jobs_of(client, cronjob)
        return jobs if len(jobs) == count else None

    return await wait_for(probe, what=f"{count} jobs of cronjob {cronjob}")


async def wait_cronjob(client: Client, name: str, check: Any, what: str) -> Any:
    async def probe() -> Any:
        cj = await client.get("cronjobs", name, NS)
        return cj if check(cj.get("status") or {}) else None

    return await wait_for(probe, what=f"cronjob {name}: {what}")


def active_names(status: Mapping[str, Any]) -> list[str]:
    return sorted(ref["name"] for ref in status.get("active") or ())


async def minute(server: APIServer, clock: FakeClock) -> None:
    """Let the controller register its next requeue, then move the clock to the next minute (plus the
    controller's 100 ms margin)."""
    await settle(server, "cronjob")
    elapsed = clock.wall() - START
    clock.step((elapsed // 60 + 1) * 60 + NEXT_SCHEDULE_DELTA - elapsed)


async def finish_job(client: Client, job: Mapping[str, Any], clock: FakeClock, kind: str = "Complete") -> None:
    """The Job controller's part: the Job finished (Complete or Failed)."""
    stamp = format_time(clock.wall())
    status: dict[str, Any] = {"startTime": job["metadata"]["creationTimestamp"],
                              "conditions": [{"type": kind, "status": "True", "lastTransitionTime": stamp,
                                              "lastProbeTime": stamp, "reason": "Test", "message": "done"}]}
    if kind == "Complete":
        status.update(succeeded=1, completionTime=stamp)
        status["conditions"].insert(0, {**status["conditions"][0], "type": "SuccessCriteriaMet"})
    else:
        status.update(failed=1)
        status["conditions"].insert(0, {**status["conditions"][0], "type": "FailureTarget"})
    await client.patch_status("jobs", job["metadata"]["name"], {"status": status}, namespace=NS)


async def test_cronjob_should_schedule_multiple_jobs_concurrently() -> None:
    async with batch_cluster("cronjob") as (server, client, clock):
        await client.create("cronjobs", cronjob_body("concurrent", concurrencyPolicy="Allow"), NS)
        await minute(server, clock)
        (first,) = await wait_jobs(client, "concurrent", 1)
        assert first["metadata"]["name"] == f"concurrent-{int(START) // 60 + 1}"
        await minute(server, clock)
        await wait_jobs(client, "concurrent", 2)
        cj = await wait_cronjob(client, "concurrent", lambda s: len(s.get("active") or ()) == 2, "2 active")
        assert cj["status"]["lastScheduleTime"] == format_time(START + 120)
        assert len(await wait_event(client, "concurrent", "SuccessfulCreate")) >= 1


async def test_jobs_are_named_annotated_and_owned_as_kube_makes_them() -> None:
    template_meta = {"labels": {"app": "report"}, "annotations": {"team": "data"}}
    async with batch_cluster("cronjob") as (server, client, clock):
        body = cronjob_body("shape", "0 9 * * *", timeZone="America/New_York")
        body["spec"]["jobTemplate"]["metadata"] = template_meta
        cj = await client.create("cronjobs", body, NS)
        # 08:00 UTC is 03:00 in New York: the next run is at 09:00 there, 14:00 UTC
        await settle(server, "cronjob")
        clock.step(6 * 3600 + NEXT_SCHEDULE_DELTA)
        (job,) = await wait_jobs(client, "shape", 1)
        meta = job["metadata"]
        assert meta["name"] == f"shape-{int(START + 6 * 3600) // 60}"
        assert meta["labels"] == {"app": "report"}
        assert meta["annotations"] == {"team": "data",
                                       "batch.kubernetes.io/cronjob-scheduled-timestamp": "2027-01-15T09:00:00-05:00"}
        assert meta["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "shape",
                                            "uid": cj["metadata"]["uid"], "controller": True,
                                            "blockOwnerDeletion": True}]
        cj = await wait_cronjob(client, "shape", lambda s: s.get("active"), "the job active")
        (ref,) = cj["status"]["active"]
        assert (ref["kind"], ref["apiVersion"], ref["name"], ref["uid"]) == ("Job", "batch/v1", meta["name"],
                                                                              meta["uid"])


async def _first_job_then_next_minute(server: APIServer, client: Client, clock: FakeClock, name: str,
                                      policy: str) -> Any:
    """A CronJob of ``policy`` ran its first Job, still active; the next minute has come. That Job."""
    await client.create("cronjobs", cronjob_body(name, concurrencyPolicy=policy), NS)
    await minute(server, clock)
    (first,) = await wait_jobs(client, name, 1)
    await wait_cronjob(client, name, lambda s: s.get("active"), "the job active")
    await minute(server, clock)
    return first


async def test_should_not_schedule_new_jobs_when_forbid_concurrent() -> None:
    async with batch_cluster("cronjob") as (server, client, clock):
        first = await _first_job_then_next_minute(server, client, clock, "forbid", "Forbid")
        await wait_event(client, "forbid", "JobAlreadyActive")
        assert [j["metadata"]["name"] for j in await jobs_of(client, "forbid")] == [first["metadata"]["name"]]
        await finish_job(client, first, clock)
        await wait_event(client, "forbid", "SawCompletedJob")
        # the run Forbid held back is still the most recent unmet time: it starts as soon as the first ends
        _, second = await wait_jobs(client, "forbid", 2)
        assert second["metadata"]["name"] == f"forbid-{int(START) // 60 + 2}"
        await wait_cronjob(client, "forbid", lambda s: active_names(s) == [second["metadata"]["name"]],
                           "only the second job active")


async def test_should_replace_jobs_when_replace_concurrent() -> None:
    async with batch_cluster("cronjob") as (server, client, clock):
        first = await _first_job_then_next_minute(server, client, clock, "replace", "Replace")

        async def replaced() -> list[Any] | None:
            jobs = [j for j in await jobs_of(client, "replace") if not j["metadata"].get("deletionTimestamp")]
            return jobs if [j["metadata"]["name"] for j in jobs] != [first["metadata"]["name"]] and jobs else None

        (second,) = await wait_for(replaced, what="the first job replaced by a second")
        cj = await wait_cronjob(client, "replace", lambda s: active_names(s) == [second["metadata"]["name"]],
                                "only the second job active")
        assert cj["status"]["active"][0]["uid"] == second["metadata"]["uid"]
        assert ("Normal", "SuccessfulDelete", f"Deleted job {first['metadata']['name']}") in \
            await wait_event(client, "replace", "SuccessfulDelete")


async def test_should_delete_successful_finished_jobs_with_limit_of_one_successful_job() -> None:
    await _history_limit("Complete", successfulJobsHistoryLimit=1)


async def test_should_delete_failed_finished_jobs_with_limit_of_one_job() -> None:
    await _history_limit("Failed", failedJobsHistoryLimit=1)


async def _history_limit(kind: str, **limits: int) -> None:
    name = "history"
    async with batch_cluster("cronjob") as (server, client, clock):
        await client.create("cronjobs", cronjob_body(name, "*/1 * * * ?", **limits), NS)
        for count in (1, 2):
            await minute(server, clock)
            jobs = await wait_jobs(client, name, count)
            await wait_cronjob(client, name, lambda s: s.get("active"), "a job active")
            await finish_job(client, jobs[-1], clock, kind)
            await wait_cronjob(client, name, lambda s: not s.get("active"), "no job active")

        async def one_left() -> list[Any] | None:
            jobs = [j for j in await jobs_of(client, name) if not j["metadata"].get("deletionTimestamp")]
            return jobs if len(jobs) == 1 else None

        (kept,) = await wait_for(one_left, what="the older finished job deleted")
        assert kept["metadata"]["name"] == f"{name}-{int(START) // 60 + 2}"
        await wait_event(client, name, "SuccessfulDelete")
        if kind == "Complete":
            cj = await wait_cronjob(client, name, lambda s: s.get("lastSuccessfulTime"), "lastSuccessfulTime")
            assert cj["status"]["lastSuccessfulTime"] == format_time(START + 120)


async def test_should_not_schedule_jobs_when_suspended() -> None:
    async with batch_cluster("cronjob") as (server, client, clock):
        await client.create("cronjobs", cronjob_body("suspended", suspend=True), NS)
        await wait_cronjob(client, "suspended", lambda s: True, "created")
        clock.step(180)
        await client.patch("cronjobs", "suspended", {"metadata": {"labels": {"touched": "yes"}}}, namespace=NS)
        # a sync ran at 3 minutes past (the label change) and created nothing
        await wait_for(lambda: _synced_suspended(server), what="a sync of the suspended cronjob")
        assert await jobs_of(client, "suspended") == []
        await client.patch("cronjobs", "suspended", {"spec": {"suspend": False}}, namespace=NS)
        # resumed: the most recent missed time runs, once
        (job,) = await wait_jobs(client, "suspended", 1)
        assert job["metadata"]["name"] == f"suspended-{int(START) // 60 + 3}"


async def _synced_suspended(server: APIServer) -> bool:
    ctrl = controller_named(server, "cronjob")
    return ctrl is not None and ctrl.stats.successes >= 2 and ctrl.stats.active == 0 and len(ctrl.queue) == 0


async def test_too_many_missed_start_times_warn_and_run_the_latest_only() -> None:
    async with batch_cluster("cronjob") as (_, client, clock):
        await client.create("cronjobs", cronjob_body("late", suspend=True), NS)
        clock.step(101 * 60 + 30)
        await client.patch("cronjobs", "late", {"spec": {"suspend": False}}, namespace=NS)
        (job,) = await wait_jobs(client, "late", 1)
        assert job["metadata"]["name"] == f"late-{int(START) // 60 + 101}"
        (event,) = await wait_event(client, "late", "TooManyMissedTimes")
        assert event == ("Warning", "TooManyMissedTimes", "too many missed start times. Set or decrease "
                                                          ".spec.startingDeadlineSeconds or check clock skew")


async def test_starting_deadline_skips_times_missed_beyond_it() -> None:
    async with batch_cluster("cronjob") as (server, client, clock):
        await client.create("cronjobs", cronjob_body("deadline", "0 * * * *", suspend=True,
                                                     startingDeadlineSeconds=120), NS)
        clock.step(3600 + 600)  # the 09:00 run is 10 minutes late: past its 2-minute deadline
        await client.patch("cronjobs", "deadline", {"spec": {"suspend": False}}, namespace=NS)
        await settle(server, "cronjob")  # suspended, it had no requeue pending: this one is the resumed sync's
        assert await jobs_of(client, "deadline") == []
        assert not [e for e in await events_of(client, "deadline") if e[1] == "SuccessfulCreate"]


async def test_an_active_job_that_went_missing_leaves_the_active_list() -> None:
    async with batch_cluster("cronjob") as (server, client, clock):
        await client.create("cronjobs", cronjob_body("missing"), NS)
        await minute(server, clock)
        (job,) = await wait_jobs(client, "missing", 1)
        await wait_cronjob(client, "missing", lambda s: s.get("active"), "the job active")
        await client.delete("jobs", job["metadata"]["name"], NS, propagation_policy="Background")
        await wait_cronjob(client, "missing", lambda s: not s.get("active"), "the deleted job no longer active")
        assert ("Normal", "MissingJob", f"Active job went missing: {job['metadata']['name']}") in \
            await wait_event(client, "missing", "MissingJob")


async def test_a_schedule_that_never_fires_is_reported_and_not_requeued() -> None:
    async with batch_cluster("cronjob") as (_, client, _clock):
        await client.create("cronjobs", cronjob_body("never", "0 0 30 2 *"), NS)
        (event,) = await wait_event(client, "never", "InvalidSchedule")
        assert event == ("Warning", "InvalidSchedule", "invalid schedule: 0 0 30 2 * : time difference between two "
                                                       "schedules is less than 1 second")


async def test_an_unknown_time_zone_is_reported() -> None:
    async with batch_cluster("cronjob") as (_, client, _clock):
        # kube-apiserver refuses such a zone; this server accepts it, and the controller reports it as kube's does
        await client.create("cronjobs", cronjob_body("mars", timeZone="Mars/Olympus"), NS)
        (event,) = await wait_event(client, "mars", "UnknownTimeZone")
        assert event[0] == "Warning" and event[2].startswith('invalid timeZone: "Mars/Olympus"')
