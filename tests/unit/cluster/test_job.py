"""The Job controller, named after what kube's e2e (test/e2e/apps/job.go) and unit tests assert; the tests
play the kubelet (pods patched to Running / Succeeded / Failed)."""

from __future__ import annotations

from typing import Any

import pytest

from cluster_helpers import condition, wait_for
from kinformer.cluster import ClusterOptions
from kinformer.cluster.controllers.job_perindex import INDEX_FAILURE_COUNT as FAILURES
from kinformer.cluster.controllers.job_pods import COMPLETION_INDEX as INDEX
from kinformer.cluster.controllers.job_pods import TRACKING_FINALIZER as TRACKING
from unit.cluster._hjobs_helpers import (
    NS,
    batch_cluster,
    finish_pod,
    has_condition,
    job_body,
    job_pods,
    run_pod,
    settle,
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


async def test_should_run_a_job_to_completion_with_cpu_requests() -> None:
    template = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "100m"}}}]}}
    async with batch_cluster("job") as (_, client, clock):
        await client.create("jobs", job_body("cpu", completions=2, parallelism=2, template=template), NS)
        pods = await wait_pods(client, "cpu", 2)
        assert all(p["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m" for p in pods)
        for pod in pods:
            await finish_pod(client, pod, clock)
        job = await wait_job(client, "cpu", COMPLETE, "Complete")
        assert job["status"]["succeeded"] == 2


async def test_job_pods_are_controlled_tracked_and_labelled_as_kube_makes_them() -> None:
    async with batch_cluster("job") as (_, client, clock):
        job = await client.create("jobs", job_body("shape"), NS)
        (pod,) = await wait_pods(client, "shape", 1)
        meta = pod["metadata"]
        assert meta["generateName"] == "shape-" and meta["finalizers"] == [TRACKING]
        assert meta["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "shape",
                                            "uid": job["metadata"]["uid"], "controller": True,
                                            "blockOwnerDeletion": True}]
        uid = job["metadata"]["uid"]
        for key in ("controller-uid", "batch.kubernetes.io/controller-uid"):
            assert meta["labels"][key] == uid
        for key in ("job-name", "batch.kubernetes.io/job-name"):
            assert meta["labels"][key] == "shape"
        await wait_event(client, "shape", "SuccessfulCreate")
        await finish_pod(client, pod, clock)
        await wait_job(client, "shape", COMPLETE, "Complete")
        (done,) = await job_pods(client, "shape")
        assert not done["metadata"].get("finalizers")  # counted, then released


async def test_should_fail_when_exceeds_active_deadline() -> None:
    async with batch_cluster("job") as (server, client, clock):
        await client.create("jobs", job_body("deadline", parallelism=2, completions=4, activeDeadlineSeconds=10), NS)
        await wait_pods(client, "deadline", 2)
        await wait_job(client, "deadline", lambda j: j["status"].get("active") == 2, "2 active")
        await settle(server, "job")
        clock.step(9)
        await settle(server, "job")
        job = await client.get("jobs", "deadline", NS)
        assert not has_condition("FailureTarget")(job) and job["status"]["active"] == 2
        clock.step(1)
        job = await wait_job(client, "deadline", has_condition("Failed"), "Failed")
        failed = condition(job, "Failed")
        assert (failed["reason"], failed["message"]) == ("DeadlineExceeded",
                                                         "Job was active longer than specified deadline")
        assert has_condition("FailureTarget")(job)
        assert job["status"]["failed"] == 2 and "active" not in job["status"]
        assert await job_pods(client, "deadline") == []  # unscheduled pods go as soon as they are released
        assert ("Warning", "DeadlineExceeded", "Job was active longer than specified deadline") in \
            await wait_event(client, "deadline", "DeadlineExceeded")


async def test_should_not_create_pods_when_created_in_suspend_state() -> None:
    async with batch_cluster("job") as (_, client, _clock):
        await client.create("jobs", job_body("suspended", parallelism=2, completions=2, suspend=True), NS)
        job = await wait_job(client, "suspended", has_condition("Suspended"), "Suspended")
        suspended = condition(job, "Suspended")
        assert (suspended["reason"], suspended["message"]) == ("JobSuspended", "Job suspended")
        assert "startTime" not in job["status"] and await job_pods(client, "suspended") == []
        await wait_event(client, "suspended", "Suspended")
        await client.patch("jobs", "suspended", {"spec": {"suspend": False}}, namespace=NS)
        await wait_pods(client, "suspended", 2)
        job = await wait_job(client, "suspended", has_condition("Suspended", "False"), "resumed")
        assert condition(job, "Suspended")["reason"] == "JobResumed" and job["status"]["startTime"]
        await wait_event(client, "suspended", "Resumed")


async def test_should_delete_pods_when_suspended() -> None:
    async with batch_cluster("job") as (_, client, clock):
        await client.create("jobs", job_body("pause", parallelism=2, completions=2), NS)
        for pod in await wait_pods(client, "pause", 2):
            await run_pod(client, pod, clock)
        await client.patch("jobs", "pause", {"spec": {"suspend": True}}, namespace=NS)
        job = await wait_job(client, "pause", has_condition("Suspended"), "Suspended")
        await wait_pods(client, "pause", 0)
        await wait_for(lambda: _no_pods(client, "pause"), what="the suspended job's pods gone")
        job = await client.get("jobs", "pause", NS)
        assert "failed" not in job["status"]  # pods the controller deletes are not failures
        await wait_event(client, "pause", "SuccessfulDelete")


async def _no_pods(client: Any, job: str) -> bool:
    return not await job_pods(client, job)


async def test_indexed_job_should_run_to_completion() -> None:
    async with batch_cluster("job") as (_, client, clock):
        await client.create("jobs", job_body("indexed", completions=4, parallelism=2, completionMode="Indexed"), NS)
        seen = []
        for _ in range(2):
            pods = await wait_pods(client, "indexed", 2)
            for pod in pods:
                index = pod["metadata"]["annotations"][INDEX]
                assert pod["metadata"]["labels"][INDEX] == index
                assert pod["metadata"]["generateName"] == f"indexed-{index}-"
                assert pod["spec"]["hostname"] == f"indexed-{index}"
                env = pod["spec"]["containers"][0]["env"]
                assert env == [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "apiVersion": "v1", "fieldPath": f"metadata.annotations['{INDEX}']"}}}]
                seen.append(int(index))
                await finish_pod(client, pod, clock)
        assert sorted(seen) == [0, 1, 2, 3]
        job = await wait_job(client, "indexed", COMPLETE, "Complete")
        assert job["status"]["completedIndexes"] == "0-3" and job["status"]["succeeded"] == 4


async def test_indexed_job_replaces_a_failed_index_with_the_same_index() -> None:
    async with batch_cluster("job") as (server, client, clock):
        await client.create("jobs", job_body("retry-index", completions=2, parallelism=2,
                                             completionMode="Indexed"), NS)
        pods = await wait_pods(client, "retry-index", 2)
        by_index = {p["metadata"]["annotations"][INDEX]: p for p in pods}
        await finish_pod(client, by_index["0"], clock)
        await finish_pod(client, by_index["1"], clock, exit_code=1)
        await wait_job(client, "retry-index", lambda j: j["status"].get("completedIndexes") == "0"
                       and j["status"].get("failed") == 1, "index 0 done, one failure")
        await settle(server, "job")
        clock.step(1)  # the first backoff
        (again,) = await wait_pods(client, "retry-index", 1)
        assert again["metadata"]["annotations"][INDEX] == "1"


async def test_should_allow_to_use_the_pod_failure_policy_on_exit_code_to_fail_the_job_early() -> None:
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "In",
                                                              "values": [42]}}]}
    async with batch_cluster("job") as (_, client, clock):
        await client.create("jobs", job_body("policy", completions=4, parallelism=2, backoffLimit=6,
                                             podFailurePolicy=policy), NS)
        first, second = await wait_pods(client, "policy", 2)
        await run_pod(client, second, clock)
        await finish_pod(client, first, clock, exit_code=42)
        job = await wait_job(client, "policy", has_condition("Failed"), "Failed")
        failed = condition(job, "Failed")
        assert failed["reason"] == "PodFailurePolicy"
        assert failed["message"] == (f"Container c for pod {NS}/{first['metadata']['name']} failed with exit code "
                                     "42 matching FailJob rule at index 0")
        assert job["status"]["failed"] == 2  # the failed pod and the running one, deleted


async def test_should_allow_to_use_the_pod_failure_policy_to_not_count_the_failure_towards_the_backoff_limit(
) -> None:
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    disrupted = [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}]
    async with batch_cluster("job") as (server, client, clock):
        await client.create("jobs", job_body("ignore", backoffLimit=0, podFailurePolicy=policy), NS)
        (pod,) = await wait_pods(client, "ignore", 1)
        await finish_pod(client, pod, clock, exit_code=137, conditions=disrupted)
        await wait_job(client, "ignore", lambda j: not j["status"].get("active"), "the pod no longer active")
        await settle(server, "job")
        clock.step(1)  # ignored failures still delay the replacement (kube's backoff counts every failed pod)
        (replacement,) = await wait_pods(client, "ignore", 1)
        assert replacement["metadata"]["name"] != pod["metadata"]["name"]
        job = await client.get("jobs", "ignore", NS)
        assert "failed" not in job["status"] and not has_condition("Failed")(job)
        await finish_pod(client, replacement, clock)
        await wait_job(client, "ignore", COMPLETE, "Complete")


async def test_should_fail_to_exceed_backoff_limit_with_exponential_backoff() -> None:
    async with batch_cluster("job") as (server, client, clock):
        await client.create("jobs", job_body("backoff", backoffLimit=2), NS)
        (pod,) = await wait_pods(client, "backoff", 1)
        await finish_pod(client, pod, clock, exit_code=1)
        await wait_job(client, "backoff", lambda j: j["status"].get("failed") == 1, "one failure counted")
        await settle(server, "job")
        assert await job_pods(client, "backoff", active_only=True) == []  # held back for 1 s (kube: 10 s)
        clock.step(1)
        (pod,) = await wait_pods(client, "backoff", 1)
        await finish_pod(client, pod, clock, exit_code=1)
        await wait_job(client, "backoff", lambda j: j["status"].get("failed") == 2, "two failures counted")
        await settle(server, "job")
        clock.step(1)
        await settle(server, "job")
        assert await job_pods(client, "backoff", active_only=True) == []  # the second delay is 2 s
        clock.step(1)
        (pod,) = await wait_pods(client, "backoff", 1)
        await finish_pod(client, pod, clock, exit_code=1)
        job = await wait_job(client, "backoff", has_condition("Failed"), "Failed")
        failed = condition(job, "Failed")
        assert (failed["reason"], failed["message"]) == ("BackoffLimitExceeded",
                                                         "Job has reached the specified backoff limit")
        assert job["status"]["failed"] == 3
        await wait_event(client, "backoff", "BackoffLimitExceeded")


async def test_deleting_a_job_releases_its_pods_finalizers() -> None:
    async with batch_cluster("job") as (_, client, clock):
        await client.create("jobs", job_body("gone"), NS)
        (pod,) = await wait_pods(client, "gone", 1)
        await run_pod(client, pod, clock)
        await client.delete("jobs", "gone", NS, propagation_policy="Orphan")

        async def released() -> bool:
            current = await client.get("pods", pod["metadata"]["name"], NS)
            return not current["metadata"].get("finalizers")

        await wait_for(released, what="the orphaned pod's tracking finalizer removed")


async def test_should_scale_a_job_up_and_down() -> None:
    async with batch_cluster("job") as (_, client, clock):
        await client.create("jobs", job_body("scale", parallelism=1, completions=5), NS)
        await wait_pods(client, "scale", 1)
        await client.patch("jobs", "scale", {"spec": {"parallelism": 3}}, namespace=NS)
        pods = await wait_pods(client, "scale", 3)
        await run_pod(client, pods[0], clock)  # ready pods go last
        await client.patch("jobs", "scale", {"spec": {"parallelism": 1}}, namespace=NS)
        (kept,) = await wait_pods(client, "scale", 1)
        assert kept["metadata"]["name"] == pods[0]["metadata"]["name"]
        job = await wait_job(client, "scale", lambda j: j["status"].get("active") == 1, "1 active")
        assert "failed" not in job["status"]


async def test_should_fail_when_container_restarts_reach_the_backoff_limit_with_restart_policy_on_failure() -> None:
    async with batch_cluster("job") as (_, client, clock):
        await client.create("jobs", job_body("restarts", backoffLimit=2, restart_policy="OnFailure"), NS)
        (pod,) = await wait_pods(client, "restarts", 1)
        running = await run_pod(client, pod, clock)
        status = running["status"]
        status["containerStatuses"][0]["restartCount"] = 2
        await client.patch_status("pods", pod["metadata"]["name"], {"status": status}, namespace=NS)
        job = await wait_job(client, "restarts", has_condition("Failed"), "Failed")
        assert condition(job, "Failed")["reason"] == "BackoffLimitExceeded"
        assert job["status"]["failed"] == 1  # the running pod, deleted when the Job failed


async def test_job_without_completions_completes_once_a_pod_succeeded_and_the_others_finished() -> None:
    async with batch_cluster("job") as (_, client, clock):
        body = job_body("queue", parallelism=2)
        await client.create("jobs", body, NS)
        job = await client.get("jobs", "queue", NS)
        assert "completions" not in job["spec"]  # a work queue: parallelism given, completions not defaulted
        first, second = await wait_pods(client, "queue", 2)
        await finish_pod(client, first, clock)
        job = await wait_job(client, "queue", lambda j: j["status"].get("succeeded") == 1, "one success")
        assert not has_condition("Complete")(job)  # the other pod still runs
        assert len(await job_pods(client, "queue", active_only=True)) == 1  # and is not replaced
        await finish_pod(client, second, clock, exit_code=1)
        job = await wait_job(client, "queue", COMPLETE, "Complete")
        assert (job["status"]["succeeded"], job["status"]["failed"]) == (1, 1)


async def test_events_are_about_the_job() -> None:
    async with batch_cluster("job") as (_, client, _clock):
        job = await client.create("jobs", job_body("regarding"), NS)
        await wait_pods(client, "regarding", 1)
        await wait_event(client, "regarding", "SuccessfulCreate")
        events = (await client.list("events.events.k8s.io", NS)).items
        (event,) = [e for e in events if e["reason"] == "SuccessfulCreate"]
        assert event["regarding"]["kind"] == "Job" and event["regarding"]["uid"] == job["metadata"]["uid"]
        assert event["reportingController"] == "job-controller"


async def test_with_success_policy_succeeded_indexes_rule_should_succeed_even_when_some_indexes_remain_pending(
) -> None:
    policy = {"rules": [{"succeededIndexes": "0"}]}
    async with batch_cluster("job") as (_, client, clock):
        await client.create("jobs", job_body("leader", completions=3, parallelism=3, completionMode="Indexed",
                                             successPolicy=policy), NS)
        pods = {p["metadata"]["annotations"][INDEX]: p for p in await wait_pods(client, "leader", 3)}
        await run_pod(client, pods["1"], clock)
        await finish_pod(client, pods["0"], clock)
        job = await wait_job(client, "leader", COMPLETE, "Complete")
        complete = condition(job, "Complete")
        assert (complete["reason"], complete["message"]) == ("SuccessPolicy", "Matched rules at index 0")
        assert condition(job, "SuccessCriteriaMet")["reason"] == "SuccessPolicy"
        assert job["status"]["completedIndexes"] == "0" and job["status"]["succeeded"] == 1
        assert "failed" not in job["status"]  # the pods deleted on success are not failures
        assert await job_pods(client, "leader", active_only=True) == []


async def test_with_success_policy_succeeded_count_rule_should_succeed_even_when_some_indexes_remain_pending(
) -> None:
    policy = {"rules": [{"succeededCount": 2}]}
    async with batch_cluster("job") as (_, client, clock):
        await client.create("jobs", job_body("quorum", completions=4, parallelism=4, completionMode="Indexed",
                                             successPolicy=policy), NS)
        pods = await wait_pods(client, "quorum", 4)
        await finish_pod(client, pods[0], clock)
        job = await wait_job(client, "quorum", lambda j: j["status"].get("succeeded") == 1, "one index done")
        assert not has_condition("SuccessCriteriaMet")(job)
        await finish_pod(client, pods[1], clock)
        job = await wait_job(client, "quorum", COMPLETE, "Complete")
        assert job["status"]["succeeded"] == 2


def _by_index(pods: list[Any]) -> dict[int, Any]:
    return {int(p["metadata"]["annotations"][INDEX]): p for p in pods}


async def test_should_execute_all_indexes_despite_some_failing_when_using_backoff_limit_per_index() -> None:
    async with batch_cluster("job") as (server, client, clock):
        await client.create("jobs", job_body("per-index", completions=3, parallelism=3, completionMode="Indexed",
                                             backoffLimitPerIndex=1), NS)
        pods = _by_index(await wait_pods(client, "per-index", 3))
        assert pods[1]["metadata"]["annotations"][FAILURES] == "0"
        await finish_pod(client, pods[0], clock)
        await finish_pod(client, pods[1], clock, exit_code=1)
        await wait_job(client, "per-index", lambda j: j["status"].get("completedIndexes") == "0", "index 0 done")
        await settle(server, "job")
        assert _by_index(await job_pods(client, "per-index", active_only=True)).keys() == {2}  # index 1 backs off
        job = await client.get("jobs", "per-index", NS)
        assert "failed" not in job["status"]  # the failed pod keeps its finalizer until its index is replaced
        clock.step(1)
        retry = _by_index(await wait_pods(client, "per-index", 2))[1]
        assert retry["metadata"]["annotations"][FAILURES] == "1"
        await wait_job(client, "per-index", lambda j: j["status"].get("failed") == 1, "the first failure counted")
        await finish_pod(client, retry, clock, exit_code=1)  # index 1 used its budget: it failed for good
        job = await wait_job(client, "per-index", lambda j: j["status"].get("failedIndexes") == "1", "index 1 failed")
        assert not has_condition("FailureTarget")(job)  # index 2 still runs
        await finish_pod(client, pods[2], clock)
        job = await wait_job(client, "per-index", has_condition("Failed"), "Failed")
        failed = condition(job, "Failed")
        assert (failed["reason"], failed["message"]) == ("FailedIndexes", "Job has failed indexes")
        status = job["status"]
        assert (status["completedIndexes"], status["failedIndexes"], status["succeeded"], status["failed"]) == \
            ("0,2", "1", 2, 2)


async def test_should_terminate_job_execution_when_the_number_of_failed_indexes_exceeds_max_failed_indexes(
) -> None:
    async with batch_cluster("job") as (_, client, clock):
        await client.create("jobs", job_body("max-failed", completions=4, parallelism=4, completionMode="Indexed",
                                             backoffLimitPerIndex=0, maxFailedIndexes=0), NS)
        pods = _by_index(await wait_pods(client, "max-failed", 4))
        await finish_pod(client, pods[0], clock, exit_code=1)
        job = await wait_job(client, "max-failed", has_condition("Failed"), "Failed")
        assert condition(job, "Failed")["reason"] == "MaxFailedIndexesExceeded"
        assert job["status"]["failedIndexes"] == "0" and job["status"]["failed"] == 4  # the other 3 deleted
        assert await job_pods(client, "max-failed", active_only=True) == []


async def test_should_mark_indexes_as_failed_when_the_fail_index_action_is_matched_in_pod_failure_policy() -> None:
    policy = {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}}]}
    async with batch_cluster("job") as (_, client, clock):
        await client.create("jobs", job_body("fail-index", completions=2, parallelism=2, completionMode="Indexed",
                                             backoffLimitPerIndex=5, podFailurePolicy=policy), NS)
        pods = _by_index(await wait_pods(client, "fail-index", 2))
        await finish_pod(client, pods[0], clock, exit_code=42)
        job = await wait_job(client, "fail-index", lambda j: j["status"].get("failedIndexes") == "0", "index 0 failed")
        assert len(await job_pods(client, "fail-index", active_only=True)) == 1  # not retried despite the budget
        await finish_pod(client, pods[1], clock)
        job = await wait_job(client, "fail-index", has_condition("Failed"), "Failed")
        assert condition(job, "Failed")["reason"] == "FailedIndexes"
        assert (job["status"]["failedIndexes"], job["status"]["completedIndexes"]) == ("0", "1")


async def test_should_adopt_matching_orphans_and_release_non_matching_pods() -> None:
    template = {"metadata": {"labels": {"app": "adopt"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    async with batch_cluster("job") as (_, client, _clock):
        job = await client.create("jobs", job_body("adopt", parallelism=2, completions=2, manualSelector=True,
                                                   selector={"matchLabels": {"app": "adopt"}}, template=template), NS)
        owned = await wait_for(lambda: _owned(client, job, 2), what="two pods")
        # one pod stops matching: released (and replaced); an orphan that matches: adopted
        await client.patch("pods", owned[0]["metadata"]["name"], {"metadata": {"labels": {"app": "other"}}},
                           namespace=NS)

        async def released() -> bool:
            pod = await client.get("pods", owned[0]["metadata"]["name"], NS)
            return not pod["metadata"].get("ownerReferences")

        await wait_for(released, what="the non-matching pod released")
        await wait_for(lambda: _owned(client, job, 2), what="a replacement")
        # the orphan is bound to a node, so of the three pods the Job then has, one of its own unscheduled ones
        # is the one deleted as too many (controller.ActivePods' order), never the orphan the probe reads
        orphan = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stray", "labels": {"app": "adopt"}},
                  "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]}}
        await client.create("pods", orphan, NS)

        async def adopted() -> bool:
            pod = await client.get("pods", "stray", NS)
            refs = pod["metadata"].get("ownerReferences") or []
            return [r["uid"] for r in refs if r.get("controller")] == [job["metadata"]["uid"]]

        await wait_for(adopted, what="the orphan adopted")
        await wait_for(lambda: _owned(client, job, 2), what="back to two pods: one deleted as too many")


async def _owned(client: Any, job: Any, count: int) -> list[Any] | None:
    pods = [p for p in (await client.list("pods", NS)).items
            if any(r.get("uid") == job["metadata"]["uid"] for r in p["metadata"].get("ownerReferences") or ())
            and not p["metadata"].get("deletionTimestamp")]
    return pods if len(pods) == count else None


async def test_a_wide_job_creates_its_pods_in_slow_start_batches_and_counts_each_once() -> None:
    async with batch_cluster("job") as (_, client, clock):
        await client.create("jobs", job_body("wide", completions=40, parallelism=20), NS)
        for _ in range(2):
            for pod in await wait_pods(client, "wide", 20):
                await finish_pod(client, pod, clock)
        job = await wait_job(client, "wide", COMPLETE, "Complete")
        assert job["status"]["succeeded"] == 40 and "failed" not in job["status"]
        assert len(await job_pods(client, "wide")) == 40  # never a pod too many


def test_bad_backoff_options_are_refused_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"0 < job_backoff_base <= job_backoff_max, got 5\.0 and 1\.0"):
        ClusterOptions(job_backoff_base=5.0, job_backoff_max=1.0)


async def test_a_refused_pod_creation_is_reported_and_retried() -> None:
    refuse_pods = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                   "metadata": {"name": "down"},
                   "webhooks": [{"name": "down.example.com", "clientConfig": {"url": "https://127.0.0.1:9/validate"},
                                 "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                            "resources": ["pods"]}],
                                 "failurePolicy": "Fail", "timeoutSeconds": 2, "sideEffects": "None",
                                 "admissionReviewVersions": ["v1"]}]}
    async with batch_cluster("job") as (server, client, clock):
        await client.create("admissionregistration.k8s.io/v1/validatingwebhookconfigurations", refuse_pods)
        await client.create("jobs", job_body("refused", parallelism=3, completions=3), NS)
        (event,) = await wait_event(client, "refused", "FailedCreate")
        assert event[0] == "Warning" and event[2].startswith("Error creating: ")
        job = await wait_job(client, "refused", lambda j: j["status"].get("startTime"), "the status written")
        assert "active" not in job["status"]  # the failed creation is not counted, the sync failed after the write
        await client.delete("admissionregistration.k8s.io/v1/validatingwebhookconfigurations", "down")
        await settle(server, "job")  # the failed sync waits for its rate-limited retry, on the clock
        clock.step(1)
        await wait_pods(client, "refused", 3)
