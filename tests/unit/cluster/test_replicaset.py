"""The replicaset controller against the embedded server (kube's e2e test/e2e/apps/replica_set.go and the
controller's unit tests), playing the kubelet in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from _hdeploy_helpers import NS, mark_all_ready, mark_ready, pods, replicaset

import kinformer as ki
from cluster_helpers import events, wait_for
from kinformer.clock import FakeClock
from kinformer.cluster.controllers.expectations import EXPECTATIONS_TTL, Expectations
from kinformer.cluster.controllers.replicaset import calculate_status, pods_to_delete
from kinformer.cluster.controllers.slowstart import slow_start_batch
from kinformer.server import APIServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def client() -> AsyncIterator[ki.Client]:
    async with APIServer(storage="memory", controllers=["replicaset"]) as server, ki.Client(server.url) as c:
        yield c


async def _status(client: ki.Client, name: str) -> dict:
    return dict((await client.get("replicasets", name, namespace=NS)).get("status") or {})


async def test_replicaset_should_serve_a_basic_image_on_each_replica(client: ki.Client) -> None:
    rs = await client.create("replicasets", replicaset("web", 3, {"app": "web"}), namespace=NS)
    created = await wait_for(lambda: _count(client, "app=web", 3), what="3 pods")
    for pod in created:
        ref = pod["metadata"]["ownerReferences"][0]
        assert ref == {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs["metadata"]["uid"],
                       "controller": True, "blockOwnerDeletion": True}
        assert pod["metadata"]["name"].startswith("web-")
    status = await wait_for(lambda: _status_if(client, "web", replicas=3), what="status.replicas 3")
    assert status["fullyLabeledReplicas"] == 3 and status.get("readyReplicas", 0) == 0
    assert status["observedGeneration"] == 1
    await mark_all_ready(client, "app=web")
    await wait_for(lambda: _status_if(client, "web", readyReplicas=3, availableReplicas=3), what="ready 3")
    notes = await wait_for(lambda: _events_with(client, "web", "SuccessfulCreate", 3), what="3 events")
    assert all(e["message"].startswith("Created pod: web-") for e in notes)


async def test_replicaset_never_creates_more_pods_than_asked(client: ki.Client) -> None:
    await client.create("replicasets", replicaset("burst", 20, {"app": "burst"}), namespace=NS)
    await wait_for(lambda: _status_if(client, "burst", replicas=20), what="20 replicas")
    for _ in range(10):  # repeated syncs (status writes, pod updates) must not add pods
        await mark_all_ready(client, "app=burst")
    await wait_for(lambda: _status_if(client, "burst", readyReplicas=20), what="20 ready")
    assert len(await pods(client, "app=burst")) == 20


async def test_replicaset_scales_down_not_ready_pods_first(client: ki.Client) -> None:
    await client.create("replicasets", replicaset("down", 3, {"app": "down"}), namespace=NS)
    created = await wait_for(lambda: _count(client, "app=down", 3), what="3 pods")
    ready = created[:2]
    for pod in ready:
        await mark_ready(client, pod)
    await wait_for(lambda: _status_if(client, "down", readyReplicas=2), what="2 ready")
    await client.patch("replicasets", "down", {"spec": {"replicas": 2}}, namespace=NS)
    left = await wait_for(lambda: _count(client, "app=down", 2), what="2 pods left")
    assert {p["metadata"]["name"] for p in left} == {p["metadata"]["name"] for p in ready}
    notes = await wait_for(lambda: _events_with(client, "down", "SuccessfulDelete", 1), what="delete event")
    assert notes[0]["message"] == f"Deleted pod: {created[2]['metadata']['name']}"


async def test_replicaset_should_adopt_matching_pods_on_creation(client: ki.Client) -> None:
    orphan = {"metadata": {"name": "pod-adoption", "labels": {"name": "pod-adoption"}},
              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    await client.create("pods", orphan, namespace=NS)
    rs = await client.create("replicasets", replicaset("pod-adoption", 1, {"name": "pod-adoption"}), namespace=NS)

    async def adopted() -> bool:
        pod = await client.get("pods", "pod-adoption", namespace=NS)
        refs = pod["metadata"].get("ownerReferences") or []
        return any(r["uid"] == rs["metadata"]["uid"] and r.get("controller") for r in refs)

    await wait_for(adopted, what="adoption")
    await wait_for(lambda: _status_if(client, "pod-adoption", replicas=1), what="replicas 1")
    assert len(await pods(client, "name=pod-adoption")) == 1  # adopted, no new pod


async def test_replicaset_should_release_no_longer_matching_pods(client: ki.Client) -> None:
    await client.create("replicasets", replicaset("release", 1, {"name": "release"}), namespace=NS)
    first = (await wait_for(lambda: _count(client, "name=release", 1), what="1 pod"))[0]
    name = first["metadata"]["name"]
    await client.patch("pods", name, {"metadata": {"labels": {"name": "not-matching"}}}, namespace=NS)

    async def released() -> bool:
        pod = await client.get("pods", name, namespace=NS)
        return not pod["metadata"].get("ownerReferences")

    await wait_for(released, what="release")
    replacement = await wait_for(lambda: _count(client, "name=release", 1), what="a replacement")
    assert replacement[0]["metadata"]["name"] != name


async def test_replicaset_recovers_when_the_server_cannot_generate_a_unique_pod_name() -> None:
    """Eight generated-name collisions in a row: the server answers 409 AlreadyExists, the controller records
    FailedCreate, lowers its expectations (else it would wait five minutes for a pod that never comes) and
    requeues; the next sync creates the pod."""
    taken = "collide-zzzzz"
    async with APIServer(storage="memory", controllers=["replicaset"]) as server, ki.Client(server.url) as client:
        await client.create("pods", {"metadata": {"name": taken, "labels": {"app": "other"}},
                                     "spec": {"containers": [{"name": "c", "image": "nginx"}]}}, namespace=NS)
        made: list[str] = []

        def generate(prefix: str) -> str:
            made.append(taken if len(made) < 8 else f"{prefix}{len(made):05d}")
            return made[-1]

        server.store.generate_name = generate
        await client.create("replicasets", replicaset("collide", 1, {"app": "collide"}), namespace=NS)
        created = await wait_for(lambda: _count(client, "app=collide", 1), what="the pod, created on a retry")
        assert created[0]["metadata"]["name"] == "collide-00008" and made[:8] == [taken] * 8
        failed = await wait_for(lambda: _events_with(client, "collide", "FailedCreate", 1), what="FailedCreate")
        assert failed[0]["message"] == (f'Error creating: pods "{taken}" already exists, the server was not able '
                                        "to generate a unique name for the object")
        await wait_for(lambda: _status_if(client, "collide", replicas=1), what="status.replicas 1")


def test_replica_failure_condition_is_set_while_managing_fails_and_removed_after() -> None:
    rs = replicaset("quota", 2, {"app": "quota"})
    rs["metadata"]["generation"] = 1
    failing = calculate_status(rs, [], RuntimeError("pods \"quota-x\" is forbidden: exceeded quota"), 1000.0)
    assert failing["conditions"] == [{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                                      "lastTransitionTime": "1970-01-01T00:16:40Z",
                                      "message": 'pods "quota-x" is forbidden: exceeded quota'}]
    rs["status"] = failing
    assert "conditions" not in calculate_status(rs, [], None, 1001.0)


def _pod(name: str, *, node: str = "", phase: str = "Running", ready: bool = True,
         created: str = "2026-01-01T00:00:00Z", ready_since: str = "2026-01-01T00:00:10Z", restarts: int = 0) -> dict:
    return {"metadata": {"name": name, "uid": name, "creationTimestamp": created},
            "spec": {"nodeName": node},
            "status": {"phase": phase, "containerStatuses": [{"name": "c", "restartCount": restarts}],
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "lastTransitionTime": ready_since}]}}


def test_pods_are_deleted_unscheduled_pending_not_ready_first_then_doubled_up_then_restarts() -> None:
    now = 1_800_000_000.0
    pods_ = [_pod("running-ready", node="n1"), _pod("unscheduled", phase="Pending", ready=False),
             _pod("pending", node="n1", phase="Pending", ready=False), _pod("not-ready", node="n1", ready=False),
             _pod("restarts", node="n2", restarts=5)]
    order = [p["metadata"]["name"] for p in pods_to_delete(pods_, pods_, 4, now)]
    assert order == ["unscheduled", "pending", "not-ready", "running-ready"]  # n1 is doubled up, n2 is not
    assert [p["metadata"]["name"] for p in pods_to_delete(pods_, [], 4, now)][-1] == "restarts"


async def _count(client: ki.Client, selector: str, n: int) -> list | None:
    found = await pods(client, selector)
    return found if len(found) == n else None


async def _status_if(client: ki.Client, name: str, **want: int) -> dict | None:
    status = await _status(client, name)
    return status if all(status.get(k, 0) == v for k, v in want.items()) else None


async def _events_with(client: ki.Client, name: str, reason: str, n: int) -> list | None:
    found = await events(client, name, reason)
    return found if sum(e.get("count", 1) for e in found) >= n else None


async def test_replicaset_counts_a_pod_available_only_after_min_ready_seconds(client: ki.Client) -> None:
    await client.create("replicasets", replicaset("slow", 1, {"app": "slow"}, minReadySeconds=3), namespace=NS)
    await wait_for(lambda: _count(client, "app=slow", 1), what="1 pod")
    await mark_all_ready(client, "app=slow")
    first = await wait_for(lambda: _status_if(client, "slow", readyReplicas=1), what="ready")
    assert first.get("availableReplicas", 0) == 0
    await wait_for(lambda: _status_if(client, "slow", readyReplicas=1, availableReplicas=1), what="available")


def test_expectations_hold_a_key_until_every_creation_and_deletion_is_observed_or_they_expire() -> None:
    clock = FakeClock()
    exp = Expectations(clock)
    assert exp.satisfied("default/web")  # nothing asked yet
    exp.expect_creations("default/web", 2)
    exp.creation_observed("default/web")
    assert not exp.satisfied("default/web")
    exp.creation_observed("default/web")
    assert exp.satisfied("default/web")
    exp.expect_deletions("default/web", ["default/web-a", "default/web-b"])
    exp.deletion_observed("default/web", "default/web-a")
    exp.deletion_observed("default/web", "default/other")  # not one we asked for
    assert not exp.satisfied("default/web")
    clock.step(EXPECTATIONS_TTL + 1)
    assert exp.satisfied("default/web")  # kube's 5 minute timeout


async def test_slow_start_batches_double_and_stop_after_a_failing_batch() -> None:
    calls: list[int] = []

    async def create(_: int) -> None:
        calls.append(len(calls))
        if len(calls) == 5:
            raise RuntimeError("quota exceeded")

    successes, error = await slow_start_batch(range(20), create)
    assert len(calls) == 7  # batches of 1, 2 and 4: the batch of 4 fails, the next (8) never starts
    assert successes == 6 and isinstance(error, RuntimeError)
    calls.clear()
    assert await slow_start_batch(range(5), lambda _: _noop(calls)) == (5, None)
    assert len(calls) == 5  # 1 + 2 + 2


async def _noop(calls: list[int]) -> None:
    calls.append(0)



def test_the_pod_handlers_are_handed_orphans_and_pods_a_replicaset_controls() -> None:
    """The pods watch's accepts: a pod another kind controls changes nothing for the ReplicaSets; an orphan (it
    may be adopted) or a ReplicaSet's pod does, so a pod a ReplicaSet lets go is still seen (its old pod)."""
    from kinformer.cluster.controllers.replicaset import _maybe_replicasets

    def controlled_by(kind: str, api_version: str) -> dict:
        ref = {"apiVersion": api_version, "kind": kind, "name": "o", "uid": "u", "controller": True}
        return {"metadata": {"name": "p", "ownerReferences": [ref]}}

    assert _maybe_replicasets({"metadata": {"name": "p"}})
    assert _maybe_replicasets(controlled_by("ReplicaSet", "apps/v1"))
    assert not _maybe_replicasets(controlled_by("Job", "batch/v1"))
    assert not _maybe_replicasets(controlled_by("ReplicaSet", "example.com/v1"))


def test_a_pod_view_is_made_once_per_pod_version_and_counts_as_the_pod_does() -> None:
    """PodViews: a listed object keeps its view while it is listed (the informer never changes an object it
    holds, it replaces it), a new version gets a new one, a pod no longer listed is dropped; the counts made
    from views are those made from the pods."""
    from kinformer.cluster.controllers.replicaset import PodViews, pod_view

    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}
    ready = _pod("ready", node="n1", ready_since="2026-01-01T00:00:10Z")
    ready["metadata"].update(labels={"app": "x"}, ownerReferences=[ref])
    pending, done = _pod("pending", phase="Pending", ready=False), _pod("done", phase="Succeeded", ready=False)
    views = PodViews()
    first = views.of("ns", [ready, pending, done])
    assert [v for _, v in first] == [pod_view(ready), pod_view(pending), pod_view(done)]
    assert (first[0][1].controller_uid, first[1][1].controller_uid) == ("rs-uid", None)
    assert [v.active for _, v in first] == [True, True, False]
    newer = {**pending, "status": _pod("pending", ready_since="2026-01-01T00:00:20Z")["status"]}  # now Ready
    second = views.of("ns", [ready, newer])
    assert second[0][1] is first[0][1] and second[1][1] == pod_view(newer) != first[1][1]
    assert views.of("ns", [done])[0][1] == pod_view(done) and views.of("ns", []) == []
    rs = replicaset("rs", 2, {"app": "x"}, minReadySeconds=30)
    since = 1_767_225_610.0  # 2026-01-01T00:00:10Z
    for now in (since + 30, since + 31):
        assert calculate_status(rs, [ready, newer], None, now, [pod_view(ready), pod_view(newer)]) == \
            calculate_status(rs, [ready, newer], None, now)
    assert calculate_status(rs, [ready, newer], None, since + 31)["availableReplicas"] == 1
    assert "availableReplicas" not in calculate_status(rs, [ready, newer], None, since + 30)


def test_required_labels_match_as_the_selector_does() -> None:
    """required_labels (the claim's and the counts' check of equality selectors): a label set holds all the
    required labels exactly when the selector matches it; None for the selectors that need the general check."""
    from kinformer.cluster.controllers.replicaset import required_labels
    from kinformer.selectors import label_selector_from_dict

    label_sets = [{}, {"app": "x"}, {"app": "y"}, {"app": "x", "tier": "web"}, {"tier": "web"},
                  {"app": "x", "tier": "db", "extra": "1"}]
    equalities = [{}, {"matchLabels": {"app": "x"}}, {"matchLabels": {"app": "x", "tier": "web"}},
                  {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]},
                  {"matchLabels": {"app": "x"},
                   "matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]}]
    for raw in equalities:
        selector = label_selector_from_dict(raw)
        required = required_labels(selector)
        assert required is not None
        assert [required.items() <= labels.items() for labels in label_sets] == \
            [selector.matches(labels) for labels in label_sets]
    others = [None, {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]},
              {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
              {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["x"]}]},
              {"matchLabels": {"app": "x"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["y"]}]}]
    assert [required_labels(label_selector_from_dict(raw)) for raw in others] == [None] * len(others)


def test_fully_labeled_replicas_count_the_pods_holding_every_template_label() -> None:
    rs = replicaset("rs", 3, {"app": "x"})
    rs["spec"]["template"]["metadata"]["labels"] = {"app": "x", "tier": "web"}
    pods = [_pod(name, ready=False) for name in ("a", "b", "c")]
    label_sets = [{"app": "x", "tier": "web"}, {"app": "x"}, {"app": "x", "tier": "web", "z": "1"}]
    for pod, labels in zip(pods, label_sets, strict=True):
        pod["metadata"]["labels"] = labels
    assert calculate_status(rs, pods, None, 1000.0)["fullyLabeledReplicas"] == 2
