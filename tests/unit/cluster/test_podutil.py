"""The pod predicates every part of the cluster shares (kube's podutil), and the pod made from a template."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kinformer.client import LazyObject
from kinformer.cluster.controllers.podtemplate import pod_from_template
from kinformer.cluster.metatime import rfc3339
from kinformer.cluster.podutil import (
    is_being_deleted,
    is_pod_active,
    is_pod_available,
    is_pod_ready,
    is_running_and_ready,
    is_terminal,
    phase,
)

NOW = 1_700_000_000.0


def _pod(phase_: str | None = None, ready: str | None = None, since: float = NOW, deleted: bool = False) -> Any:
    status: dict[str, Any] = {"phase": phase_} if phase_ else {}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready, "lastTransitionTime": rfc3339(since)}]
    meta: dict[str, Any] = {"name": "p", "deletionTimestamp": rfc3339(NOW)} if deleted else {"name": "p"}
    return {"metadata": meta, "status": status}


def test_a_pod_without_a_phase_is_neither_terminal_nor_running() -> None:
    assert phase(_pod()) == "" and not is_terminal(_pod()) and is_pod_active(_pod())


@pytest.mark.parametrize("phase_", ["Succeeded", "Failed"])
def test_terminal_pods_are_not_active(phase_: str) -> None:
    assert is_terminal(_pod(phase_)) and not is_pod_active(_pod(phase_))


def test_a_pod_being_deleted_is_not_active() -> None:
    assert is_being_deleted(_pod("Running", deleted=True)) and not is_pod_active(_pod("Running", deleted=True))


def test_ready_needs_the_ready_condition_true() -> None:
    assert is_pod_ready(_pod("Running", "True")) and not is_pod_ready(_pod("Running", "False"))
    assert not is_pod_ready(_pod("Running"))
    assert is_running_and_ready(_pod("Running", "True")) and not is_running_and_ready(_pod("Pending", "True"))


def test_available_once_ready_for_strictly_longer_than_min_ready_seconds() -> None:
    pod = _pod("Running", "True", since=NOW - 10)
    assert is_pod_available(pod, 0, NOW)
    assert not is_pod_available(pod, 10, NOW)  # exactly minReadySeconds: not yet
    assert is_pod_available(pod, 10, NOW + 1)
    assert not is_pod_available(_pod("Running", "False", since=NOW - 100), 10, NOW)


def test_pod_from_template_without_labels_is_refused() -> None:
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "ns", "uid": "u"}}
    with pytest.raises(ValueError, match="unable to create pods, no labels"):
        pod_from_template({"spec": {"containers": []}}, owner)
    pod = pod_from_template({"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}, owner)
    assert pod["metadata"]["generateName"] == "rs-" and pod["metadata"]["ownerReferences"][0]["controller"]


def test_pod_from_template_owns_a_deep_copy_of_the_spec() -> None:
    """The statefulset and daemonset controllers change the pod's spec: never the template's (a cached object)."""
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "ns", "uid": "u"}}
    spec = {"containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}],
            "nodeSelector": {"disk": "ssd"}}
    template = {"metadata": {"labels": {"a": "b"}}, "spec": spec}
    cached = LazyObject(orjson.dumps(template))
    for source in (template, cached):
        pod = pod_from_template(source, owner)
        assert pod["spec"] == spec
        pod["spec"]["containers"][0]["ports"].append({"containerPort": 81})
        pod["spec"]["nodeSelector"]["zone"] = "a"
        assert source["spec"] == spec == {"containers": [{"name": "web", "image": "nginx",
                                                          "ports": [{"containerPort": 80}]}],
                                          "nodeSelector": {"disk": "ssd"}}
