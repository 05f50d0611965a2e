"""The pure rules under the StatefulSet and DaemonSet controllers: ControllerRevision history (naming,
hashing, ordering, equality), daemon pod placement (tolerations, node affinity, taints) and the DaemonSet
rolling-update budget, as kube's unit tests for pkg/controller/history and pkg/controller/daemon check them."""

from __future__ import annotations

from typing import Any

from kinformer.cluster.controllers import history
from kinformer.cluster.controllers.daemonset_nodes import (
    add_daemon_tolerations,
    aim_at_node,
    should_run,
    target_node,
)
from kinformer.cluster.controllers.daemonset_update import RollingUpdate, is_pod_updated

OWNER = {"apiVersion": "apps/v1", "kind": "StatefulSet",
         "metadata": {"name": "db", "namespace": "default", "uid": "u-1"},
         "spec": {"template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c"}]}}}}


def test_fnv32a_and_safe_encoding_follow_go() -> None:
    assert history.fnv32a(b"") == 0x811C9DC5
    assert history.fnv32a(b"a") == 0xE40C292C
    assert history.fnv32a(b"foobar") == 0xBF9CF968
    assert history.safe_encode("0123456789") == "456789bcdf"
    assert set(history.hash_revision({"a": 1}, None)) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_go_json_sorts_keys_and_escapes_html() -> None:
    assert history.go_json({"b": 1, "a": "<&>"}) == b'{"a":"\\u003c\\u0026\\u003e","b":1}'


def test_revision_hash_depends_on_data_and_collision_count() -> None:
    data = history.template_patch(OWNER)
    assert data["spec"]["template"]["$patch"] == "replace"
    assert history.hash_revision(data, 0) == history.hash_revision(history.template_patch(OWNER), 0)
    assert history.hash_revision(data, 0) != history.hash_revision(data, 1)
    assert history.hash_revision(data, None) != history.hash_revision(data, 0)
    revision = history.new_revision(OWNER, data, 1, 0, labels={"app": "db"})
    hash_ = revision["metadata"]["labels"]["controller-revision-hash"]
    assert revision["metadata"]["name"] == f"db-{hash_}"
    assert revision["metadata"]["ownerReferences"][0]["controller"] is True
    assert history.revision_template(revision) == OWNER["spec"]["template"]


def test_revision_name_keeps_within_object_name_limits() -> None:
    assert history.revision_name("x" * 300, "abc") == "x" * 223 + "-abc"


def _rev(name: str, number: int, data: Any, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {"metadata": {"name": name, "creationTimestamp": created, "labels": {}}, "revision": number, "data": data}


def test_revisions_sort_by_number_then_time_then_name_and_next_is_max_plus_one() -> None:
    revisions = [_rev("c", 2, 1), _rev("b", 1, 2, "2026-01-02T00:00:00Z"), _rev("a", 1, 3, "2026-01-02T00:00:00Z")]
    assert [r["metadata"]["name"] for r in history.sort_revisions(revisions)] == ["a", "b", "c"]
    assert history.next_revision(revisions) == 3
    assert history.next_revision([]) == 1


def test_equal_revisions_compare_data() -> None:
    revisions = [_rev("a", 1, {"x": 1}), _rev("b", 2, {"x": 2}), _rev("c", 3, {"x": 1})]
    assert [r["metadata"]["name"] for r in history.find_equal_revisions(revisions, _rev("n", 4, {"x": 1}))] == \
        ["a", "c"]
    assert not history.equal_revision(revisions[0], None)


def node(name: str = "n1", labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> Any:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}}


def ds(**template_spec: Any) -> Any:
    return {"metadata": {"name": "ds", "namespace": "default"},
            "spec": {"template": {"spec": {"containers": [{"name": "c"}], **template_spec}}}}


def test_daemon_pods_get_kube_tolerations_once() -> None:
    spec: dict[str, Any] = {"hostNetwork": True, "tolerations": [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]}
    add_daemon_tolerations(spec)
    add_daemon_tolerations(spec)
    keys = [(t["key"], t["effect"]) for t in spec["tolerations"]]
    assert len(keys) == len(set(keys)) == 7
    assert ("node.kubernetes.io/network-unavailable", "NoSchedule") in keys
    assert "tolerationSeconds" not in spec["tolerations"][0]  # replaced by kube's infinite toleration


def test_should_run_follows_selector_affinity_and_taints() -> None:
    assert should_run(ds(), node()) == (True, True)
    assert should_run(ds(nodeSelector={"disk": "ssd"}), node()) == (False, False)
    assert should_run(ds(nodeSelector={"disk": "ssd"}), node(labels={"disk": "ssd"})) == (True, True)
    assert should_run(ds(nodeName="other"), node()) == (False, False)
    no_schedule = node(taints=[{"key": "dedicated", "effect": "NoSchedule"}])
    assert should_run(ds(), no_schedule) == (False, True)  # may keep running, no new pod
    no_execute = node(taints=[{"key": "dedicated", "effect": "NoExecute"}])
    assert should_run(ds(), no_execute) == (False, False)
    unreachable = node(taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}])
    assert should_run(ds(), unreachable) == (True, True)  # daemon pods tolerate it
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["4"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]}]}}}
    assert should_run(ds(affinity=affinity), node(labels={"cpu": "8"})) == (True, True)
    assert should_run(ds(affinity=affinity), node(labels={"cpu": "2"})) == (False, False)
    assert should_run(ds(affinity=affinity), node(name="n9")) == (True, True)


def test_daemon_pod_affinity_names_its_node_and_keeps_label_terms() -> None:
    affinity = aim_at_node({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}}}, "n2")
    term = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term == {"matchExpressions": [{"key": "a", "operator": "Exists"}],
                    "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
    assert target_node({"spec": {"affinity": affinity}}) == "n2"
    assert target_node({"spec": {"nodeName": "n3", "affinity": affinity}}) == "n3"
    assert target_node({"spec": {}}) is None


def pod(name: str, hash_: str, ready: bool = True) -> Any:
    return {"metadata": {"name": name, "labels": {"controller-revision-hash": hash_}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}}


def test_is_pod_updated_by_hash_or_template_generation() -> None:
    assert is_pod_updated(pod("p", "new"), "new", None)
    assert not is_pod_updated(pod("p", "old"), "new", None)
    with_generation = {"metadata": {"labels": {"pod-template-generation": "2"}}}
    assert is_pod_updated(with_generation, "new", 2)


def _plan(node_pods: dict[str, list[Any]], max_unavailable: int = 1, max_surge: int = 0) -> Any:
    return RollingUpdate(ds(), node_pods, "new", 0.0, lambda _n: True, max_surge, max_unavailable,
                         len(node_pods)).plan()


def test_rolling_update_replaces_within_max_unavailable() -> None:
    all_old = {f"n{i}": [pod(f"p{i}", "old")] for i in range(4)}
    assert _plan(all_old).delete == ["p0"]
    assert _plan(all_old, max_unavailable=2).delete == ["p0", "p1"]
    one_new_unready = {**all_old, "n0": [pod("q0", "new", ready=False)]}
    assert _plan(one_new_unready).delete == []  # the unavailable new pod uses the budget
    old_unready = {**all_old, "n3": [pod("p3", "old", ready=False)]}
    assert _plan(old_unready).delete == ["p3"]  # an unavailable old pod is always replaced


def test_rolling_update_with_surge_creates_beside_old_pods() -> None:
    all_old = {f"n{i}": [pod(f"p{i}", "old")] for i in range(3)}
    plan = _plan(all_old, max_unavailable=0, max_surge=1)
    assert plan.create == ["n0"] and plan.delete == []
    surged = {**all_old, "n0": [pod("p0", "old"), pod("q0", "new")]}
    plan = _plan(surged, max_unavailable=0, max_surge=1)
    assert plan.delete == ["p0"] and plan.create == ["n1"]  # q0 is available: p0 goes, the next node surges
