"""One sync of one Job (kube's syncJobCtx) and the decisions taken on it: what the pods count, whether
the Job has failed or succeeded (and why), how many pods it wants and which indexes are pending.

Everything here is pure: it reads the Job, its pods and the clock's ``now`` held by :class:`JobSync`, and
writes only that object; the controller (:mod:`.job`) does the API calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..podutil import is_pod_active, is_pod_ready, phase
from .batch import condition, new_condition, parse_time
from .job_backoff import BackoffRecord, BackoffStore
from .job_indexes import parse_indexes
from .job_perindex import delayed_deletions, failed_indexes, has_backoff_limit_per_index
from .job_pods import (
    completion_index,
    finish_time,
    has_tracking_finalizer,
    is_failed,
    is_terminating,
    match_failure_policy,
    restart_count,
)
from .job_success import match_success_policy

Pod = Mapping[str, Any]


def spec_int(job: Mapping[str, Any], name: str) -> int | None:
    value = (job.get("spec") or {}).get(name)
    return int(value) if isinstance(value, int) else None


def suspended(job: Mapping[str, Any]) -> bool:
    return (job.get("spec") or {}).get("suspend") is True


def indexed(job: Mapping[str, Any]) -> bool:
    return (job.get("spec") or {}).get("completionMode") == "Indexed"


def failed_from_target(target: Mapping[str, Any], now: float) -> dict[str, Any]:
    return new_condition("Failed", "True", target.get("reason", ""), target.get("message", ""), now)


def past_backoff_limit_on_failure(job: Mapping[str, Any], pods: Sequence[Pod]) -> bool:
    """restartPolicy OnFailure: the active pods' container restarts reached backoffLimit."""
    template_spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    if template_spec.get("restartPolicy") != "OnFailure":
        return False
    restarts = sum(restart_count(p) for p in pods if phase(p) in ("Running", "Pending"))
    limit = spec_int(job, "backoffLimit") or 0
    return restarts > 0 if limit == 0 else restarts >= limit


@dataclass
class JobSync:
    """One sync of one Job (kube's syncJobCtx): the Job being written and what the sync learnt."""

    job: dict[str, Any]
    pods: list[Pod]
    now: float
    active: list[Pod] = field(default_factory=list)
    ready: int = 0
    terminating: int = 0
    succeeded: int = 0
    failed: int = 0
    succeeded_indexes: set[int] = field(default_factory=set)
    #: with backoffLimitPerIndex: the failed indexes, and per pending index its last failed pod
    failed_indexes: set[int] | None = None
    delayed: dict[int, Pod] = field(default_factory=dict)
    finished: dict[str, Any] | None = None
    backoff: BackoffRecord = field(default_factory=BackoffRecord)
    requeue_after: list[float] = field(default_factory=list)
    #: the first pod creation that failed (the sync still writes the status, then fails)
    error: BaseException | None = None

    @property
    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.job.setdefault("status", {})
        return status

    @property
    def key(self) -> str:
        meta = self.job["metadata"]
        return f"{meta['namespace']}/{meta['name']}"

    def uncounted(self, which: str) -> list[str]:
        lists: dict[str, list[str]] = self.status.setdefault("uncountedTerminatedPods", {})
        return lists.setdefault(which, [])


def indexes_of(pods: Sequence[Pod]) -> set[int]:
    return {i for i in map(completion_index, pods) if i is not None}


def count(sync: JobSync, backoff: BackoffStore) -> None:
    """Classify the pods and count what is new since the last status (kube's syncJob preamble)."""
    job, status = sync.job, sync.status
    sync.active = [p for p in sync.pods if is_pod_active(p)]
    sync.ready = sum(1 for p in sync.active if is_pod_ready(p))
    sync.terminating = sum(1 for p in sync.pods if is_terminating(p))
    done_succeeded, done_failed = set(sync.uncounted("succeeded")), set(sync.uncounted("failed"))
    tracked = [p for p in sync.pods if has_tracking_finalizer(p) and has_valid_index(job, p)]
    new_succeeded = [p for p in tracked if phase(p) == "Succeeded" and p["metadata"]["uid"] not in done_succeeded]
    new_failed = [p for p in tracked if is_failed(p, job) and p["metadata"]["uid"] not in done_failed]
    policy = (job.get("spec") or {}).get("podFailurePolicy")
    counted_failed = [p for p in new_failed if match_failure_policy(policy, p).counts]
    sync.succeeded = int(status.get("succeeded") or 0) + len(new_succeeded) + len(done_succeeded)
    sync.failed = int(status.get("failed") or 0) + len(counted_failed) + len(done_failed)
    if indexed(job):
        completions = spec_int(job, "completions") or 0
        sync.succeeded_indexes = parse_indexes(status.get("completedIndexes"), completions)
        for pod in new_succeeded:
            index = completion_index(pod)
            if index is not None and index < completions:
                sync.succeeded_indexes.add(index)
        sync.succeeded = len(sync.succeeded_indexes)
    if has_backoff_limit_per_index(job):
        sync.failed_indexes = failed_indexes(job, sync.pods)
        done = sync.succeeded_indexes | sync.failed_indexes | indexes_of(sync.active)
        sync.delayed = delayed_deletions(job, sync.pods, done, sync.now)
    sync.backoff = backoff.next_record(sync.key, [finish_time(p, sync.now) for p in new_succeeded],
                                       [finish_time(p, sync.now) for p in new_failed])


def has_valid_index(job: Mapping[str, Any], pod: Pod) -> bool:
    """A NonIndexed Job's pod, or an Indexed Job's pod with an index below completions."""
    if not indexed(job):
        return True
    index = completion_index(pod)
    return index is not None and index < (spec_int(job, "completions") or 0)


def decide_failure(sync: JobSync) -> None:
    """The failure (or earlier success) that finishes the Job, if any (kube's finishedCondition)."""
    job, now = sync.job, sync.now
    met = condition(job, "SuccessCriteriaMet")
    if met is not None and met.get("status") == "True":
        sync.finished = new_condition("Complete", "True", met.get("reason", ""), met.get("message", ""), now)
        return
    target = condition(job, "FailureTarget")
    if target is not None and target.get("status") == "True":
        sync.finished = failed_from_target(target, now)
        return
    message = fail_job_message(job, sync.pods)
    if message is not None:
        sync.finished = new_condition("FailureTarget", "True", "PodFailurePolicy", message, now)
    elif sync.failed > (spec_int(job, "backoffLimit") or 0) or past_backoff_limit_on_failure(job, sync.pods):
        sync.finished = new_condition("FailureTarget", "True", "BackoffLimitExceeded",
                                      "Job has reached the specified backoff limit", now)
    elif past_deadline(job, now):
        sync.finished = new_condition("FailureTarget", "True", "DeadlineExceeded",
                                      "Job was active longer than specified deadline", now)
    else:
        requeue_for_deadline(sync)


def fail_job_message(job: Mapping[str, Any], pods: Sequence[Pod]) -> str | None:
    """The message of the first failed pod a FailJob rule of the pod failure policy matches."""
    policy = (job.get("spec") or {}).get("podFailurePolicy")
    if policy is None:
        return None
    for pod in pods:
        if is_failed(pod, job):
            match = match_failure_policy(policy, pod)
            if match.message is not None:
                return match.message
    return None


def past_deadline(job: Mapping[str, Any], now: float) -> bool:
    """activeDeadlineSeconds passed since startTime (never while suspended)."""
    deadline = spec_int(job, "activeDeadlineSeconds")
    started = parse_time((job.get("status") or {}).get("startTime"))
    if deadline is None or started is None or suspended(job):
        return False
    return now - started >= deadline


def requeue_for_deadline(sync: JobSync) -> None:
    """Come back when the active deadline passes."""
    deadline = spec_int(sync.job, "activeDeadlineSeconds")
    started = parse_time(sync.status.get("startTime"))
    if deadline is not None and started is not None and not suspended(sync.job):
        sync.requeue_after.append(max(0.0, deadline - (sync.now - started)))


def decide_failed_indexes(sync: JobSync) -> None:
    """backoffLimitPerIndex: too many failed indexes, or every index done with some failed."""
    failed = sync.failed_indexes
    if sync.finished is not None or not failed:
        return
    spec = sync.job["spec"]
    most = spec.get("maxFailedIndexes")
    if most is not None and len(failed) > most:
        sync.finished = new_condition("FailureTarget", "True", "MaxFailedIndexesExceeded",
                                      "Job has exceeded the specified maximal number of failed indexes", sync.now)
    elif len(failed) + len(sync.succeeded_indexes) >= int(spec.get("completions") or 0):
        sync.finished = new_condition("FailureTarget", "True", "FailedIndexes", "Job has failed indexes",
                                      sync.now)


def decide_success_policy(sync: JobSync) -> None:
    """An Indexed Job whose successPolicy matched succeeds early (its remaining pods are deleted)."""
    if sync.finished is not None or not indexed(sync.job):
        return
    policy = (sync.job.get("spec") or {}).get("successPolicy")
    message = match_success_policy(policy, spec_int(sync.job, "completions") or 0, sync.succeeded_indexes)
    if message is not None:
        sync.finished = new_condition("SuccessCriteriaMet", "True", "SuccessPolicy", message, sync.now)


def decide_success(sync: JobSync) -> None:
    """Enough pods succeeded and none is active: SuccessCriteriaMet (Complete follows once all is counted)."""
    completions = spec_int(sync.job, "completions")
    if completions is None:
        complete = sync.succeeded > 0 and not sync.active
    else:
        complete = sync.succeeded >= completions and not sync.active
    if complete:
        sync.finished = new_condition("SuccessCriteriaMet", "True", "CompletionsReached",
                                      "Reached expected number of succeeded pods", sync.now)


def want_active(sync: JobSync) -> int:
    """kube's manageJob target: parallelism, bounded by the completions left (a Job without completions keeps
    what runs once a pod succeeded)."""
    parallelism = spec_int(sync.job, "parallelism") or 0
    completions = spec_int(sync.job, "completions")
    if completions is None:
        return len(sync.active) if sync.succeeded > 0 else parallelism
    return max(0, min(parallelism, completions - sync.succeeded))


def pending_indexes(sync: JobSync, count: int) -> list[int]:
    """The lowest ``count`` indexes neither succeeded, failed nor held by an active pod."""
    completions = spec_int(sync.job, "completions") or 0
    taken = sync.succeeded_indexes | (sync.failed_indexes or set()) | indexes_of(sync.active)
    return [i for i in range(completions) if i not in taken][:count]

