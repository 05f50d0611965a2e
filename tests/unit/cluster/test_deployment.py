"""The deployment controller with the replicaset controller against the embedded server (kube's e2e
test/e2e/apps/deployment.go), playing the kubelet in-process: pods become ready when the test marks them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from _hdeploy_helpers import NS, deployment, mark_all_ready, pods

import kinformer as ki
from cluster_helpers import events, wait_for
from kinformer.cluster.controllers import deployment_util as du
from kinformer.server import APIServer

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def client() -> AsyncIterator[ki.Client]:
    async with APIServer(storage="memory", controllers=["replicaset", "deployment"]) as server, \
            ki.Client(server.url) as c:
        yield c


async def get_deploy(client: ki.Client, name: str) -> Any:
    return await client.get("deployments", name, namespace=NS)


async def replicasets(client: ki.Client, name: str) -> list[Any]:
    d = await get_deploy(client, name)
    items = (await client.list("replicasets", namespace=NS)).items
    return [rs for rs in items
            if any(r.get("uid") == d["metadata"]["uid"] for r in rs["metadata"].get("ownerReferences") or [])]


async def rolled_out(client: ki.Client, name: str, selector: str) -> Any:
    """Play the kubelet until the Deployment reports what ``kubectl rollout status`` waits for."""
    await mark_all_ready(client, selector)
    d = await get_deploy(client, name)
    s = d.get("status") or {}
    want = d["spec"]["replicas"]
    done = (s.get("observedGeneration", 0) >= d["metadata"]["generation"] and s.get("updatedReplicas", 0) == want
            and s.get("replicas", 0) == want and s.get("availableReplicas", 0) == want)
    return d if done else None


def cond(d: Any, type_: str) -> dict:
    return next(c for c in d["status"]["conditions"] if c["type"] == type_)


async def test_deployment_creates_a_hashed_replicaset_and_reports_complete(client: ki.Client) -> None:
    await client.create("deployments", deployment("web", 3, {"app": "web"}), namespace=NS)
    d = await wait_for(lambda: rolled_out(client, "web", "app=web"), what="rollout")
    (rs,) = await replicasets(client, "web")
    pod_hash = rs["metadata"]["labels"][du.HASH_LABEL]
    assert rs["metadata"]["name"] == f"web-{pod_hash}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", du.HASH_LABEL: pod_hash}
    assert rs["spec"]["template"]["metadata"]["labels"][du.HASH_LABEL] == pod_hash
    assert rs["metadata"]["annotations"][du.REVISION] == "1"
    assert rs["metadata"]["annotations"][du.DESIRED_REPLICAS] == "3"
    assert rs["metadata"]["annotations"][du.MAX_REPLICAS] == "4"  # 3 + 25% surge rounded up
    ref = rs["metadata"]["ownerReferences"][0]
    assert ref["kind"] == "Deployment" and ref["controller"] and ref["blockOwnerDeletion"]
    assert d["metadata"]["annotations"][du.REVISION] == "1"
    assert cond(d, "Available")["reason"] == "MinimumReplicasAvailable"
    assert cond(d, "Available")["message"] == "Deployment has minimum availability."
    progressing = await wait_for(lambda: _progressing_reason(client, "web", "NewReplicaSetAvailable"),
                                   what="NewReplicaSetAvailable")
    assert progressing["message"] == f'ReplicaSet "{rs["metadata"]["name"]}" has successfully progressed.'
    notes = [e["message"] for e in await events(client, "web", "ScalingReplicaSet")]
    assert notes == [f"Scaled up replica set {rs['metadata']['name']} from 0 to 3"]


async def _progressing_reason(client: ki.Client, name: str, reason: str) -> dict | None:
    d = await get_deploy(client, name)
    c = next((c for c in (d.get("status") or {}).get("conditions") or [] if c["type"] == "Progressing"), None)
    return c if c is not None and c["reason"] == reason else None


async def test_rolling_update_deployment_should_delete_old_pods_and_create_new_ones(client: ki.Client) -> None:
    """kube's e2e: a Deployment adopts a ReplicaSet its selector matches (revision 3546343826724305833), rolls
    its pods over to its own template, and numbers its new ReplicaSet with the next revision."""
    labels = {"name": "sample-pod", "pod": "httpd"}
    old = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
           "metadata": {"name": "test-rolling-update-controller", "namespace": NS, "labels": labels,
                        "annotations": {du.REVISION: "3546343826724305833"}},
           "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels},
                                 "spec": {"containers": [{"name": "httpd", "image": "httpd:2.4"}]}}}}
    await client.create("replicasets", old, namespace=NS)
    await wait_for(lambda: _ready_pods(client, "name=sample-pod", 1), what="the old pod")
    new_labels = {"name": "sample-pod"}
    d = deployment("test-rolling-update-deployment", 1, new_labels, image="agnhost:2.52")
    d["spec"]["template"]["metadata"]["labels"] = labels
    await client.create("deployments", d, namespace=NS)
    done = await wait_for(lambda: rolled_out(client, "test-rolling-update-deployment", "name=sample-pod"),
                            what="rollout")
    assert done["metadata"]["annotations"][du.REVISION] == "3546343826724305834"
    adopted = await client.get("replicasets", "test-rolling-update-controller", namespace=NS)
    assert adopted["metadata"]["ownerReferences"][0]["uid"] == done["metadata"]["uid"]
    await wait_for(lambda: _scaled_to_zero(client, "test-rolling-update-controller"), what="old RS at 0")
    assert {p["spec"]["containers"][0]["image"] for p in await pods(client, "name=sample-pod")} == {"agnhost:2.52"}


async def _ready_pods(client: ki.Client, selector: str, n: int) -> bool:
    return await mark_all_ready(client, selector) >= 0 and len(await pods(client, selector)) == n


async def _scaled_to_zero(client: ki.Client, name: str) -> bool:
    rs = await client.get("replicasets", name, namespace=NS)
    return rs["spec"]["replicas"] == 0 and not (rs.get("status") or {}).get("replicas")


async def test_rolling_update_never_exceeds_max_surge_nor_drops_below_max_unavailable(client: ki.Client) -> None:
    """maxSurge 1 / maxUnavailable 0 over 4 replicas: never more than 5 pods, never fewer than 4 ready."""
    spec = {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}
    await client.create("deployments", deployment("roll", 4, {"app": "roll"}, **spec), namespace=NS)
    await wait_for(lambda: rolled_out(client, "roll", "app=roll"), what="first rollout")
    await client.patch("deployments", "roll", {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:1.26"}]}}}}, namespace=NS)
    max_total, min_ready = 0, 4

    async def step() -> Any:
        nonlocal max_total, min_ready
        live = await pods(client, "app=roll")
        max_total = max(max_total, len(live))
        ready = [p for p in live if any(c["type"] == "Ready" and c["status"] == "True"
                                         for c in (p.get("status") or {}).get("conditions") or [])]
        min_ready = min(min_ready, len(ready))
        d = await rolled_out(client, "roll", "app=roll")
        if d is None:
            return None
        live = await pods(client, "app=roll")
        return d if all(p["spec"]["containers"][0]["image"] == "nginx:1.26" for p in live) and len(live) == 4 \
            else None

    d = await wait_for(step, what="second rollout")
    assert max_total <= 5 and min_ready >= 4
    rss = {rs["metadata"]["annotations"][du.REVISION]: rs for rs in await replicasets(client, "roll")}
    assert rss["1"]["spec"]["replicas"] == 0 and rss["2"]["spec"]["replicas"] == 4
    assert d["metadata"]["annotations"][du.REVISION] == "2"
    notes = [e["message"] for e in await events(client, "roll", "ScalingReplicaSet")]
    old, new = rss["1"]["metadata"]["name"], rss["2"]["metadata"]["name"]
    assert f"Scaled up replica set {new} from 0 to 1" in notes
    assert any(n.startswith(f"Scaled down replica set {old} from 4 to ") for n in notes)


async def test_recreate_deployment_should_delete_old_pods_before_creating_new_ones(client: ki.Client) -> None:
    await client.create("deployments", deployment("recreate", 3, {"app": "re"}, strategy={"type": "Recreate"}),
                        namespace=NS)
    await wait_for(lambda: rolled_out(client, "recreate", "app=re"), what="first rollout")
    old_names = {p["metadata"]["name"] for p in await pods(client, "app=re")}
    labels = {"app": "re", "v": "2"}
    await client.patch("deployments", "recreate", {"spec": {"template": {"metadata": {"labels": labels}}}},
                       namespace=NS)
    overlap = False

    async def step() -> Any:
        nonlocal overlap
        live = {p["metadata"]["name"] for p in await pods(client, "app=re")}
        if live & old_names and live - old_names:
            overlap = True
        return await rolled_out(client, "recreate", "app=re,v=2")

    await wait_for(step, what="recreate rollout")
    assert not overlap
    assert not {p["metadata"]["name"] for p in await pods(client, "app=re")} & old_names


async def test_deployment_should_support_rollover(client: ki.Client) -> None:
    """A template change while a rollout is stuck (pods never ready) replaces the half-done ReplicaSet."""
    await client.create("deployments", deployment("rollover", 2, {"app": "ro"}, minReadySeconds=0), namespace=NS)
    await wait_for(lambda: rolled_out(client, "rollover", "app=ro"), what="first rollout")
    await client.patch("deployments", "rollover", {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "bad:1"}]}}}}, namespace=NS)
    await wait_for(lambda: _revisions(client, "rollover", 2), what="revision 2")
    await client.patch("deployments", "rollover", {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "good:1"}]}}}}, namespace=NS)

    async def step() -> Any:
        d = await rolled_out(client, "rollover", "app=ro")
        live = await pods(client, "app=ro")
        return d if d and all(p["spec"]["containers"][0]["image"] == "good:1" for p in live) else None

    await wait_for(step, what="rollover")
    by_rev = {rs["metadata"]["annotations"][du.REVISION]: rs for rs in await replicasets(client, "rollover")}
    assert set(by_rev) == {"1", "2", "3"}
    assert [by_rev[r]["spec"]["replicas"] for r in ("1", "2", "3")] == [0, 0, 2]


async def _revisions(client: ki.Client, name: str, n: int) -> list | None:
    rss = await replicasets(client, name)
    return rss if len(rss) == n else None


async def test_deployment_should_support_proportional_scaling(client: ki.Client) -> None:
    """kube's e2e: 10 replicas, maxSurge 3, maxUnavailable 2, a rollout stuck on a bad image, then scale to 30:
    the 13 pods (8 old + 5 new) grow to 33 in proportion: 20 old, 13 new."""
    spec = {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}}
    await client.create("deployments", deployment("prop", 10, {"app": "prop"}, **spec), namespace=NS)
    await wait_for(lambda: rolled_out(client, "prop", "app=prop"), what="first rollout")
    await client.patch("deployments", "prop", {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:404"}]}}}}, namespace=NS)

    async def stuck() -> Any:
        rss = {rs["metadata"]["annotations"][du.REVISION]: rs for rs in await replicasets(client, "prop")}
        if set(rss) != {"1", "2"}:
            return None
        sizes = (rss["1"]["spec"]["replicas"], rss["2"]["spec"]["replicas"])
        return sizes if sizes == (8, 5) else None

    await wait_for(stuck, what="stuck rollout 8 + 5")
    await client.patch("deployments", "prop", {"spec": {"replicas": 30}}, namespace=NS)

    async def scaled() -> Any:
        rss = {rs["metadata"]["annotations"][du.REVISION]: rs for rs in await replicasets(client, "prop")}
        sizes = (rss["1"]["spec"]["replicas"], rss["2"]["spec"]["replicas"])
        return sizes if sum(sizes) == 33 else None

    assert await wait_for(scaled, what="proportional scale") == (20, 13)


async def test_paused_deployment_is_not_rolled_out_and_resumes(client: ki.Client) -> None:
    await client.create("deployments", deployment("paused", 1, {"app": "pa"}), namespace=NS)
    await wait_for(lambda: rolled_out(client, "paused", "app=pa"), what="first rollout")
    await client.patch("deployments", "paused", {"spec": {"paused": True}}, namespace=NS)
    paused = await wait_for(lambda: _progressing_reason(client, "paused", "DeploymentPaused"), what="paused")
    assert paused["status"] == "Unknown" and paused["message"] == "Deployment is paused"
    await client.patch("deployments", "paused", {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:1.26"}]}}}}, namespace=NS)
    await wait_for(lambda: _observed(client, "paused"), what="observed while paused")
    assert len(await replicasets(client, "paused")) == 1
    await client.patch("deployments", "paused", {"spec": {"paused": False}}, namespace=NS)
    await wait_for(lambda: _revisions(client, "paused", 2), what="rolled out after resume")


async def _observed(client: ki.Client, name: str) -> bool:
    d = await get_deploy(client, name)
    return (d.get("status") or {}).get("observedGeneration") == d["metadata"]["generation"]


async def test_deployment_progress_deadline_exceeded(client: ki.Client) -> None:
    await client.create("deployments", deployment("deadline", 1, {"app": "dl"}, progressDeadlineSeconds=1),
                        namespace=NS)
    cond_ = await wait_for(lambda: _progressing_reason(client, "deadline", "ProgressDeadlineExceeded"),
                             timeout=30, what="deadline exceeded")
    (rs,) = await replicasets(client, "deadline")
    assert cond_["status"] == "False"
    assert cond_["message"] == f'ReplicaSet "{rs["metadata"]["name"]}" has timed out progressing.'


async def test_old_replicasets_beyond_revision_history_limit_are_deleted(client: ki.Client) -> None:
    await client.create("deployments", deployment("history", 1, {"app": "hi"}, revisionHistoryLimit=1), namespace=NS)
    # revision 1 rolled out first: a template changed before the controller saw the Deployment is its revision 1
    await wait_for(lambda: rolled_out(client, "history", "app=hi"), what="the first rollout")
    for image in ("nginx:1", "nginx:2", "nginx:3"):
        await client.patch("deployments", "history", {"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": image}]}}}}, namespace=NS)

        async def done(image: str = image) -> Any:
            d = await rolled_out(client, "history", "app=hi")
            live = await pods(client, "app=hi")
            return d if d and [p["spec"]["containers"][0]["image"] for p in live] == [image] else None

        await wait_for(done, what=f"rollout of {image}")
    revs = await wait_for(lambda: _revisions(client, "history", 2), what="history trimmed to 1 old")
    assert sorted(rs["metadata"]["annotations"][du.REVISION] for rs in revs) == ["3", "4"]


def test_fenceposts_round_surge_up_and_unavailable_down() -> None:
    d = deployment("x", 10, {"a": "b"}, strategy={"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    assert du.fenceposts(d) == (3, 2)
    d["spec"]["strategy"]["rollingUpdate"] = {"maxSurge": 0, "maxUnavailable": "0%"}
    assert du.fenceposts(d) == (0, 1)


def test_pod_template_hash_is_safe_encoded_and_changes_with_collision_count() -> None:
    template = deployment("x", 1, {"a": "b"})["spec"]["template"]
    first, again = du.compute_hash(template, None), du.compute_hash(template, None)
    bumped = du.compute_hash(template, 1)
    assert first == again != bumped
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789") and 1 <= len(first) <= 10


def test_revision_history_records_the_revision_a_rolled_back_replicaset_had() -> None:
    d = deployment("x", 1, {"a": "b"})
    anns = {du.REVISION: "1"}
    assert du.set_new_rs_annotations(d, anns, "3", exists=True)
    assert anns[du.REVISION] == "3" and anns[du.REVISION_HISTORY] == "1"
    du.set_new_rs_annotations(d, anns, "5", exists=True)
    assert anns[du.REVISION_HISTORY] == "1,3"


async def test_deployment_replicaset_orphaning_and_adoption_regarding_controller_ref(client: ki.Client) -> None:
    """kube's e2e: delete a Deployment orphaning its ReplicaSet; a new Deployment with the same template adopts
    that ReplicaSet instead of creating one."""
    await client.create("deployments", deployment("orphan", 2, {"app": "or"}), namespace=NS)
    await wait_for(lambda: rolled_out(client, "orphan", "app=or"), what="rollout")
    (rs,) = await replicasets(client, "orphan")
    await client.delete("deployments", "orphan", namespace=NS, propagation_policy="Orphan")
    await wait_for(lambda: _unowned(client, rs["metadata"]["name"]), what="orphaned ReplicaSet")
    await client.create("deployments", deployment("orphan", 2, {"app": "or"}), namespace=NS)
    adopted = await wait_for(lambda: _revisions(client, "orphan", 1), what="adoption")
    assert adopted[0]["metadata"]["uid"] == rs["metadata"]["uid"]
    await wait_for(lambda: rolled_out(client, "orphan", "app=or"), what="rollout after adoption")
    assert len(await replicasets(client, "orphan")) == 1


async def test_a_hash_collision_bumps_collision_count_and_names_the_replicaset_anew(client: ki.Client) -> None:
    await client.create("deployments", deployment("coll", 1, {"app": "co"}), namespace=NS)
    await wait_for(lambda: rolled_out(client, "coll", "app=co"), what="rollout")
    (rs,) = await replicasets(client, "coll")
    taken = rs["metadata"]["name"]
    await client.delete("deployments", "coll", namespace=NS, propagation_policy="Orphan")
    await wait_for(lambda: _unowned(client, taken), what="orphaned ReplicaSet")
    await client.patch("replicasets", taken, {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "other:1"}]}}}}, namespace=NS)  # the name's template is no longer the hash's
    await client.create("deployments", deployment("coll", 1, {"app": "co"}), namespace=NS)

    async def recreated() -> Any:
        d = await get_deploy(client, "coll")
        names = {r["metadata"]["name"] for r in await replicasets(client, "coll")}
        return d if (d.get("status") or {}).get("collisionCount") == 1 and len(names) == 2 else None

    d = await wait_for(recreated, what="collision handled")
    new = du.find_new(d, await replicasets(client, "coll"))
    assert new is not None and new["metadata"]["name"] != taken
    assert new["metadata"]["name"] == f"coll-{new['metadata']['labels'][du.HASH_LABEL]}"


async def _unowned(client: ki.Client, name: str) -> bool:
    return not (await client.get("replicasets", name, namespace=NS))["metadata"].get("ownerReferences")
