"""How the Job controller reads its pods (kube 1.32 pkg/controller/job): which are active, finished,
terminating or ready, when a pod finished, its completion index, how a pod failure policy judges a failed
pod, and which active pods go first when some must be deleted.

All functions are pure: they read pods and Jobs as the API returns them and never write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kinformer.cluster.podutil import is_being_deleted, is_pod_ready, is_terminal, phase

from .batch import parse_time

__all__ = ["COMPLETION_INDEX", "TRACKING_FINALIZER", "PolicyMatch", "active_pods_for_removal",
           "completion_index", "finish_time", "has_tracking_finalizer", "is_failed", "is_terminating",
           "match_failure_policy", "only_replace_failed", "restart_count"]

#: the finalizer the Job controller puts on its pods until it has counted them
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
#: annotation and label carrying an Indexed Job pod's index
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

Pod = Mapping[str, Any]


def is_terminating(pod: Pod) -> bool:
    """Being deleted but not finished (controller.CountTerminatingPods)."""
    return is_being_deleted(pod) and not is_terminal(pod)


def has_tracking_finalizer(pod: Pod) -> bool:
    return TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or ())


def only_replace_failed(job: Mapping[str, Any]) -> bool:
    """Pods are replaced only once Failed (not while terminating): podReplacementPolicy Failed, or a pod
    failure policy is set."""
    spec = job.get("spec") or {}
    return spec.get("podReplacementPolicy") == "Failed" or spec.get("podFailurePolicy") is not None


def is_failed(pod: Pod, job: Mapping[str, Any]) -> bool:
    """A Failed pod, or (unless only failed pods are replaced) one deleted before it succeeded: an orphan
    that never reaches Failed still counts as a failure."""
    if phase(pod) == "Failed":
        return True
    if only_replace_failed(job):
        return False
    return is_being_deleted(pod) and phase(pod) != "Succeeded"


def _statuses(pod: Pod) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    return [*(status.get("containerStatuses") or ()), *(status.get("initContainerStatuses") or ())]


def finish_time(pod: Pod, now: float) -> float:
    """When the pod finished: its last container termination, else when Ready turned False, else its
    deletion timestamp, else ``now``."""
    ends = [parse_time((s.get("state") or {}).get("terminated", {}).get("finishedAt")) for s in _statuses(pod)]
    known = [t for t in ends if t is not None]
    if known:
        return max(known)
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready" and cond.get("status") == "False":
            when = parse_time(cond.get("lastTransitionTime"))
            if when is not None:
                return when
    return parse_time(pod["metadata"].get("deletionTimestamp")) or now


def restart_count(pod: Pod) -> int:
    return sum(int(s.get("restartCount") or 0) for s in _statuses(pod))


def completion_index(pod: Pod) -> int | None:
    """The pod's completion index from its annotation, or None when absent or not a number."""
    text = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)
    if not isinstance(text, str) or not text.isdigit():
        return None
    return int(text)


@dataclass(frozen=True)
class PolicyMatch:
    """What a pod failure policy says of one failed pod: the action of the first matching rule (None when
    no rule matched), whether the failure counts toward backoffLimit, and the Job's failure message for
    FailJob."""

    action: str | None
    counts: bool
    message: str | None = None


def _exit_code_matches(code: int, requirement: Mapping[str, Any]) -> bool:
    values = requirement.get("values") or ()
    return (code in values) == (requirement.get("operator") == "In")


def _matching_container(pod: Pod, requirement: Mapping[str, Any]) -> tuple[str, int] | None:
    wanted = requirement.get("containerName")
    status = pod.get("status") or {}
    for group in (status.get("containerStatuses") or (), status.get("initContainerStatuses") or ()):
        for cs in group:
            terminated = (cs.get("state") or {}).get("terminated")
            if not terminated or (wanted is not None and wanted != cs.get("name")):
                continue
            code = int(terminated.get("exitCode") or 0)
            if code != 0 and _exit_code_matches(code, requirement):
                return cs.get("name", ""), code
    return None


def _matching_condition(pod: Pod, patterns: Sequence[Mapping[str, Any]]) -> str | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        for pattern in patterns:
            if cond.get("type") == pattern.get("type") and cond.get("status") == pattern.get("status", "True"):
                return str(cond.get("type"))
    return None


def match_failure_policy(policy: Mapping[str, Any] | None, pod: Pod) -> PolicyMatch:
    """kube's ``matchPodFailurePolicy``: the first rule whose onExitCodes or onPodConditions match."""
    if policy is None:
        return PolicyMatch(None, True)
    meta = pod["metadata"]
    where = f"{meta.get('namespace')}/{meta.get('name')}"
    for index, rule in enumerate(policy.get("rules") or ()):
        action = rule.get("action")
        if rule.get("onExitCodes") is not None:
            found = _matching_container(pod, rule["onExitCodes"])
            if found is None:
                continue
            message = (f"Container {found[0]} for pod {where} failed with exit code {found[1]} matching {action} "
                       f"rule at index {index}")
        elif rule.get("onPodConditions") is not None:
            cond_type = _matching_condition(pod, rule["onPodConditions"])
            if cond_type is None:
                continue
            message = f"Pod {where} has condition {cond_type} matching {action} rule at index {index}"
        else:
            continue
        if action == "Ignore":
            return PolicyMatch(action, False)
        if action == "FailJob":
            return PolicyMatch(action, True, message)
        return PolicyMatch(action, True)
    return PolicyMatch(None, True)


def _removal_rank(pod: Pod) -> tuple[Any, ...]:
    """controller.ActivePods' order: unscheduled, then pending, unknown, running; not ready before ready;
    more restarts first; newer first."""
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(phase(pod), 0)
    created = parse_time(pod["metadata"].get("creationTimestamp")) or 0.0
    return (bool((pod.get("spec") or {}).get("nodeName")), phase_rank, is_pod_ready(pod), -restart_count(pod),
            -created)


def _duplicated_indexes(pods: Iterable[Pod], completions: int) -> tuple[list[Pod], list[Pod]]:
    """Indexed pods to remove first: those without a valid index and all but one per index."""
    remove, keep, seen = [], [], set()
    ordered = sorted(pods, key=_removal_rank, reverse=True)  # per index, the pod to keep comes first
    ordered.sort(key=lambda p: (completion_index(p) is None, completion_index(p) or 0))
    for pod in ordered:
        index = completion_index(pod)
        if index is None or index >= completions or index in seen:
            remove.append(pod)
        else:
            seen.add(index)
            keep.append(pod)
    return remove, keep


def active_pods_for_removal(job: Mapping[str, Any], pods: Sequence[Pod], at_least: int) -> list[Pod]:
    """The active pods to delete: for Indexed Jobs the duplicated and out-of-range ones, then at least
    ``at_least`` in controller.ActivePods order."""
    spec = job.get("spec") or {}
    if spec.get("completionMode") == "Indexed":
        remove, left = _duplicated_indexes(pods, int(spec.get("completions") or 0))
    else:
        remove, left = [], list(pods)
    if len(remove) < at_least:
        left.sort(key=_removal_rank)
        remove += left[:at_least - len(remove)]
    return remove
