"""The Job controller's pure rules, as kube's unit tests state them: pod failure policy matching
(pod_failure_policy_test.go), success policy (success_policy_test.go), completed-index intervals
(indexed_job_utils_test.go), the failure backoff (backoff_utils_test.go) and which active pods go first."""

from __future__ import annotations

from typing import Any

from kinformer.cluster.controllers.job_backoff import BackoffRecord, BackoffStore
from kinformer.cluster.controllers.job_indexes import format_indexes, parse_indexes
from kinformer.cluster.controllers.job_pods import COMPLETION_INDEX, active_pods_for_removal, match_failure_policy
from kinformer.cluster.controllers.job_success import match_success_policy


def failed_pod(*codes: tuple[str, int], init: tuple[str, int] | None = None,
               conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    def status(name: str, code: int) -> dict[str, Any]:
        return {"name": name, "state": {"terminated": {"exitCode": code}}}

    return {"metadata": {"namespace": "ns", "name": "p"},
            "status": {"phase": "Failed", "containerStatuses": [status(n, c) for n, c in codes],
                       "initContainerStatuses": [status(*init)] if init else [],
                       "conditions": conditions or []}}


def rule(action: str, **on: Any) -> dict[str, Any]:
    return {"action": action, **on}


def test_failure_policy_first_matching_rule_wins_and_fail_job_explains() -> None:
    policy = {"rules": [rule("Ignore", onExitCodes={"operator": "In", "values": [1]}),
                        rule("FailJob", onExitCodes={"operator": "In", "values": [42]})]}
    match = match_failure_policy(policy, failed_pod(("main", 42)))
    assert (match.action, match.counts) == ("FailJob", True)
    assert match.message == "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1"
    assert match_failure_policy(policy, failed_pod(("main", 1))).counts is False
    assert match_failure_policy(policy, failed_pod(("main", 2))) == match_failure_policy(None, failed_pod())


def test_failure_policy_not_in_container_name_init_containers_and_zero_exit_codes() -> None:
    not_in = {"rules": [rule("Count", onExitCodes={"containerName": "main", "operator": "NotIn", "values": [0, 3]})]}
    assert match_failure_policy(not_in, failed_pod(("main", 5))).action == "Count"
    assert match_failure_policy(not_in, failed_pod(("main", 3))).action is None
    assert match_failure_policy(not_in, failed_pod(("side", 5))).action is None  # another container
    fail_init = {"rules": [rule("FailJob", onExitCodes={"operator": "In", "values": [7]})]}
    assert match_failure_policy(fail_init, failed_pod(("main", 0), init=("setup", 7))).action == "FailJob"
    in_zero = {"rules": [rule("FailJob", onExitCodes={"operator": "NotIn", "values": [1]})]}
    assert match_failure_policy(in_zero, failed_pod(("main", 0))).action is None  # exit 0 never matches


def test_failure_policy_on_pod_conditions() -> None:
    policy = {"rules": [rule("FailJob", onPodConditions=[{"type": "ConfigIssue", "status": "True"}]),
                        rule("Ignore", onPodConditions=[{"type": "DisruptionTarget", "status": "True"}])]}
    pod = failed_pod(("main", 137), conditions=[{"type": "DisruptionTarget", "status": "True"}])
    assert match_failure_policy(policy, pod).counts is False
    pod = failed_pod(("main", 1), conditions=[{"type": "ConfigIssue", "status": "True"}])
    message = match_failure_policy(policy, pod).message
    assert message == "Pod ns/p has condition ConfigIssue matching FailJob rule at index 0"
    pod = failed_pod(("main", 1), conditions=[{"type": "ConfigIssue", "status": "False"}])
    assert match_failure_policy(policy, pod).action is None


def test_success_policy_rules() -> None:
    indexes = {"succeededIndexes": "0-2"}
    assert match_success_policy({"rules": [indexes]}, 5, {0, 1}) is None
    assert match_success_policy({"rules": [indexes]}, 5, {0, 1, 2}) == "Matched rules at index 0"
    both = {"rules": [{"succeededIndexes": "0-2", "succeededCount": 2}]}
    assert match_success_policy(both, 5, {1, 2, 4}) == "Matched rules at index 0"
    assert match_success_policy(both, 5, {1, 4}) is None
    counted = {"rules": [{"succeededIndexes": "9"}, {"succeededCount": 1}]}
    assert match_success_policy(counted, 5, {3}) == "Matched rules at index 1"  # index 9 is beyond completions
    assert match_success_policy(counted, 5, set()) is None


def test_completed_indexes_intervals() -> None:
    assert format_indexes({0, 2, 3, 4, 7}) == "0,2-4,7"
    assert format_indexes([]) == ""
    assert parse_indexes("0,2-4,7", 10) == {0, 2, 3, 4, 7}
    assert parse_indexes("1-8", 5) == {1, 2, 3, 4}  # bounded by completions
    assert parse_indexes("x,3", 5) == {3}


def test_backoff_doubles_per_failure_since_the_last_success_up_to_the_cap() -> None:
    assert BackoffRecord(0, None).remaining(100.0, 10.0, 360.0) == 0.0
    assert BackoffRecord(1, 100.0).remaining(104.0, 10.0, 360.0) == 6.0
    assert BackoffRecord(3, 100.0).remaining(100.0, 10.0, 360.0) == 40.0
    assert BackoffRecord(10, 100.0).remaining(100.0, 10.0, 360.0) == 360.0
    store = BackoffStore()
    store.update("ns/j", store.next_record("ns/j", [], [50.0, 60.0]))
    assert store.get("ns/j") == BackoffRecord(2, 60.0)
    # a success resets the count; only failures after it count
    assert store.next_record("ns/j", [70.0], [65.0, 80.0]) == BackoffRecord(1, 80.0)
    assert store.next_record("ns/j", [70.0], []) == BackoffRecord(0, None)


def _pod(name: str, *, node: str = "", phase: str = "Pending", ready: bool = False,
         index: int | None = None) -> dict[str, Any]:
    annotations = {COMPLETION_INDEX: str(index)} if index is not None else {}
    return {"metadata": {"name": name, "annotations": annotations, "creationTimestamp": "2027-01-15T08:00:00Z"},
            "spec": {"nodeName": node},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_active_pods_for_removal_unscheduled_pending_not_ready_first() -> None:
    job = {"spec": {"completionMode": "NonIndexed", "completions": 3}}
    ready = _pod("ready", node="n", phase="Running", ready=True)
    running = _pod("running", node="n", phase="Running")
    pending = _pod("pending", node="n")
    unscheduled = _pod("unscheduled")
    order = active_pods_for_removal(job, [ready, running, pending, unscheduled], 4)
    assert [p["metadata"]["name"] for p in order] == ["unscheduled", "pending", "running", "ready"]


def test_indexed_duplicates_and_out_of_range_indexes_go_first() -> None:
    job = {"spec": {"completionMode": "Indexed", "completions": 3}}
    keep = _pod("keep", node="n", phase="Running", ready=True, index=1)
    duplicate = _pod("duplicate", index=1)
    beyond = _pod("beyond", index=5)
    other = _pod("other", index=0)
    removed = active_pods_for_removal(job, [keep, duplicate, beyond, other], 0)
    assert sorted(p["metadata"]["name"] for p in removed) == ["beyond", "duplicate"]
