"""``backoffLimitPerIndex`` of Indexed Jobs (kube 1.32, beta and on by default): each index has its own
failure budget and backoff.

* A pod carries how often its index failed before it: ``batch.kubernetes.io/job-index-failure-count`` (and
  ``job-index-ignored-failure-count`` for failures a pod failure policy ignored).
* An index fails when a pod of it fails (counted) with a failure count already at ``backoffLimitPerIndex``,
  or when a FailIndex rule of the pod failure policy matches.
* Until its replacement exists, the last failed pod of a pending index keeps its tracking finalizer (it
  carries the counts the replacement inherits); the replacement waits ``base * 2**(failures-1)`` after
  that pod finished.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .job_backoff import BackoffRecord
from .job_indexes import parse_indexes
from .job_pods import completion_index, finish_time, has_tracking_finalizer, is_failed, match_failure_policy

__all__ = ["INDEX_FAILURE_COUNT", "INDEX_IGNORED_FAILURE_COUNT", "delayed_deletions", "failed_indexes",
           "failure_annotations", "has_backoff_limit_per_index", "remaining_for_index"]

INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"
Pod = Mapping[str, Any]


def has_backoff_limit_per_index(job: Mapping[str, Any]) -> bool:
    spec = job.get("spec") or {}
    return spec.get("completionMode") == "Indexed" and spec.get("backoffLimitPerIndex") is not None


def _count(pod: Pod, annotation: str) -> int:
    text = (pod["metadata"].get("annotations") or {}).get(annotation, "0")
    return int(text) if isinstance(text, str) and text.isdigit() else 0


def _absolute_failures(pod: Pod) -> int:
    return _count(pod, INDEX_FAILURE_COUNT) + _count(pod, INDEX_IGNORED_FAILURE_COUNT)


def _index_of(job: Mapping[str, Any], pod: Pod) -> int | None:
    index = completion_index(pod)
    completions = int((job.get("spec") or {}).get("completions") or 0)
    return index if index is not None and index < completions else None


def _index_failed(job: Mapping[str, Any], pod: Pod) -> bool:
    if not is_failed(pod, job):
        return False
    policy = (job.get("spec") or {}).get("podFailurePolicy")
    match = match_failure_policy(policy, pod)
    if match.action == "FailIndex":
        return True
    return match.counts and _count(pod, INDEX_FAILURE_COUNT) >= int(job["spec"]["backoffLimitPerIndex"])


def failed_indexes(job: Mapping[str, Any], pods: Iterable[Pod]) -> set[int]:
    """``status.failedIndexes`` plus the indexes whose tracked pods failed for good since."""
    completions = int((job.get("spec") or {}).get("completions") or 0)
    found = parse_indexes((job.get("status") or {}).get("failedIndexes"), completions)
    for pod in pods:
        index = _index_of(job, pod)
        if index is not None and has_tracking_finalizer(pod) and _index_failed(job, pod):
            found.add(index)
    return found


def delayed_deletions(job: Mapping[str, Any], pods: Iterable[Pod], done: set[int], now: float) -> dict[int, Pod]:
    """Per pending index (not in ``done``: succeeded, failed or active), its last failed tracked pod."""
    last: dict[int, Pod] = {}
    for pod in pods:
        index = _index_of(job, pod)
        if index is None or index in done or not has_tracking_finalizer(pod) or not is_failed(pod, job):
            continue
        kept = last.get(index)
        if kept is None or (_absolute_failures(kept) <= _absolute_failures(pod)
                            and finish_time(pod, now) >= finish_time(kept, now)):
            last[index] = pod
    return last


def failure_annotations(job: Mapping[str, Any], replaced: Pod | None) -> dict[str, str]:
    """The failure counts a new pod of an index inherits from the pod it replaces."""
    if replaced is None:
        return {INDEX_FAILURE_COUNT: "0"}
    failures, ignored = _count(replaced, INDEX_FAILURE_COUNT), _count(replaced, INDEX_IGNORED_FAILURE_COUNT)
    if match_failure_policy((job.get("spec") or {}).get("podFailurePolicy"), replaced).counts:
        failures += 1
    else:
        ignored += 1
    counts = {INDEX_FAILURE_COUNT: str(failures)}
    if ignored:
        counts[INDEX_IGNORED_FAILURE_COUNT] = str(ignored)
    return counts


def remaining_for_index(replaced: Pod | None, now: float, base: float, cap: float) -> float:
    """Seconds until the index of ``replaced`` (its last failed pod) may get a new pod."""
    if replaced is None:
        return 0.0
    return BackoffRecord(_absolute_failures(replaced) + 1, finish_time(replaced, now)).remaining(now, base, cap)
