"""Graceful pod deletion as kube-apiserver decides it (rest.BeforeDelete, the pod strategy's CheckGracefulDelete)."""

from __future__ import annotations

from typing import Any

import pytest

from kinformer.server.machinery.status import StatusError
from kinformer.server.registry.gracefuldelete import before_delete, pod_grace_period

WALL = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def _pod(node: str = "node-1", phase: str = "Running", grace: int | None = 30) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "app"}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"metadata": {"name": "web"}, "spec": spec, "status": {"phase": phase}}


def test_grace_period_is_the_delete_options_else_the_pod_spec() -> None:
    assert pod_grace_period(_pod(), {}) == 30
    assert pod_grace_period(_pod(), {"gracePeriodSeconds": 5}) == 5
    assert pod_grace_period(_pod(grace=None), {}) == 0


@pytest.mark.parametrize("pod", [_pod(node=""), _pod(phase="Succeeded"), _pod(phase="Failed")])
def test_unscheduled_or_terminated_pods_are_deleted_immediately(pod: dict[str, Any]) -> None:
    assert pod_grace_period(pod, {}) == 0
    assert before_delete(pod, {}, WALL) is None
    assert "deletionTimestamp" not in pod["metadata"]


def test_graceful_delete_marks_the_pod_with_its_deadline() -> None:
    pod = _pod()
    assert before_delete(pod, {}, WALL) == "graceful"
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    assert pod["metadata"]["deletionTimestamp"] == "2027-01-15T08:00:30Z"


def test_a_pending_graceful_delete_may_only_be_shortened() -> None:
    pod = _pod()
    before_delete(pod, {}, WALL)
    assert before_delete(pod, {}, WALL + 5) == "pending"
    assert before_delete(pod, {"gracePeriodSeconds": 60}, WALL + 5) == "pending"
    assert before_delete(pod, {"gracePeriodSeconds": 10}, WALL + 5) == "graceful"
    assert pod["metadata"]["deletionTimestamp"] == "2027-01-15T08:00:10Z"  # counted from the first request
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 10
    assert before_delete(pod, {"gracePeriodSeconds": 0}, WALL + 5) is None  # force: deleted now


def test_invalid_grace_period_is_a_bad_request() -> None:
    with pytest.raises(StatusError) as e:
        before_delete(_pod(), {"gracePeriodSeconds": "soon"}, WALL)
    assert e.value.code == 400
