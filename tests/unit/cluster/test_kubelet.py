"""Simulated kubelets: pods bound to a simulated node run (kubelet's generateAPIPodStatus and getPhase rules),
readiness waits for the probe's initial delay, containers restart per restartPolicy, Job pods complete, graceful
deletion honours the grace period, and the fault annotations."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from cluster_helpers import condition, is_ready, phase_is, pod, wait_for_object, wait_gone
from kinformer.client import Client
from kinformer.clock import FakeClock
from kinformer.cluster import ClusterOptions
from kinformer.cluster.kubelet import EXIT_CODE_ANNOTATION, FAIL_START_ANNOTATION, UNREADY_ANNOTATION
from kinformer.errors import NotFound
from kinformer.server import APIServer

NS = "default"
FAST = ClusterOptions(container_run_seconds=0.05, restart_backoff=0.01, restart_backoff_max=0.05)


def _container(obj: Any, name: str) -> dict[str, Any]:
    """The container's status ({} before the kubelet reported it)."""
    return next((c for c in obj["status"].get("containerStatuses") or () if c["name"] == name), {})


def _restarts(name: str, at_least: int) -> Any:
    return lambda obj: _container(obj, name).get("restartCount", 0) >= at_least


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[APIServer, Client]]:
    async with APIServer(nodes=2, cluster_options=FAST) as server, Client(server.url) as client:
        yield server, client


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall_start=1_800_000_000.0)


@pytest.fixture
async def fake_cluster(clock: FakeClock) -> AsyncIterator[tuple[APIServer, Client]]:
    options = ClusterOptions(container_stop_seconds=3600.0, node_lease_renew_interval=1000.0,
                             node_status_update_frequency=1000.0)
    async with APIServer(clock=clock, nodes=1, cluster_options=options, compaction_interval=0) as server, \
            Client(server.url) as client:
        yield server, client


async def test_pod_bound_to_a_node_runs_with_ip_conditions_and_container_statuses(
        cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    await client.create("pods", pod("web", node="node-2", containers=("b", "a")), NS)
    running = await wait_for_object(client, "pods", "web", lambda o: phase_is("Running")(o) and is_ready(o), NS)
    status = running["status"]
    assert status["podIP"].startswith("10.244.2.") and status["podIPs"] == [{"ip": status["podIP"]}]
    assert status["hostIP"] == "172.18.0.3" and status["startTime"]
    assert [c["name"] for c in status["containerStatuses"]] == ["a", "b"]  # sorted, as the kubelet reports
    a = _container(running, "a")
    assert a["ready"] and a["started"] and a["restartCount"] == 0 and "running" in a["state"]
    assert a["image"] == "docker.io/library/busybox:latest" and a["imageID"].startswith("docker.io/library/busybox@")
    assert a["containerID"].startswith("containerd://")
    kinds = {c["type"]: c["status"] for c in status["conditions"]}
    assert kinds == {"PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True",
                     "ContainersReady": "True", "PodScheduled": "True"}


async def test_pods_on_one_node_get_distinct_ips(cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    for name in ("p1", "p2", "p3"):
        await client.create("pods", pod(name, node="node-1"), NS)
    ips = set()
    for name in ("p1", "p2", "p3"):
        ips.add((await wait_for_object(client, "pods", name, phase_is("Running"), NS))["status"]["podIP"])
    assert len(ips) == 3


async def test_pod_of_an_unknown_node_is_left_alone(cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    await client.create("pods", pod("elsewhere", node="node-9"), NS)
    await client.create("pods", pod("here", node="node-1"), NS)
    await wait_for_object(client, "pods", "here", phase_is("Running"), NS)  # the kubelets are working
    assert (await client.get("pods", "elsewhere", NS))["status"]["phase"] == "Pending"


async def test_readiness_waits_for_the_probe_initial_delay(fake_cluster: tuple[APIServer, Client],
                                                           clock: FakeClock) -> None:
    _, client = fake_cluster
    body = pod("slow", node="node-1")
    body["spec"]["containers"][0]["readinessProbe"] = {"exec": {"command": ["true"]}, "initialDelaySeconds": 5}
    await client.create("pods", body, NS)
    started = await wait_for_object(client, "pods", "slow", phase_is("Running"), NS)
    assert not is_ready(started) and not _container(started, "app")["ready"]
    assert condition(started, "Ready")["reason"] == "ContainersNotReady"
    assert condition(started, "Ready")["message"] == "containers with unready status: [app]"
    clock.step(4.0)
    assert not is_ready(await client.get("pods", "slow", NS))
    clock.step(1.0)
    ready = await wait_for_object(client, "pods", "slow", is_ready, NS)
    assert "reason" not in condition(ready, "Ready")


async def test_fail_container_restarts_it_and_counts_the_restart(cluster: tuple[APIServer, Client]) -> None:
    server, client = cluster
    assert server.cluster is not None
    await client.create("pods", pod("web", node="node-1"), NS)
    await wait_for_object(client, "pods", "web", is_ready, NS)
    await server.cluster.fail_container(NS, "web", "app", exit_code=2)
    restarted = await wait_for_object(
        client, "pods", "web", lambda o: _restarts("app", 1)(o) and is_ready(o), NS)
    app = _container(restarted, "app")
    assert app["lastState"]["terminated"]["exitCode"] == 2 and app["lastState"]["terminated"]["reason"] == "Error"
    assert restarted["status"]["phase"] == "Running"


async def test_fail_container_of_a_never_restarting_pod_fails_it() -> None:
    options = ClusterOptions(container_run_seconds=600.0)  # it would complete only long after the test
    async with APIServer(nodes=1, cluster_options=options) as server, Client(server.url) as client:
        assert server.cluster is not None
        await client.create("pods", pod("once", node="node-1", restart_policy="Never"), NS)
        await wait_for_object(client, "pods", "once", phase_is("Running"), NS)
        await server.cluster.fail_container(NS, "once", "app", exit_code=1)
        failed = await wait_for_object(client, "pods", "once", phase_is("Failed"), NS)
        app = _container(failed, "app")
        assert app["restartCount"] == 0 and app["state"]["terminated"]["exitCode"] == 1


async def test_fail_container_names_the_containers_when_absent(cluster: tuple[APIServer, Client]) -> None:
    server, client = cluster
    assert server.cluster is not None
    await client.create("pods", pod("web", node="node-1"), NS)
    await wait_for_object(client, "pods", "web", phase_is("Running"), NS)
    with pytest.raises(KeyError, match="no container 'nope'; it has app"):
        await server.cluster.fail_container(NS, "web", "nope")
    with pytest.raises(KeyError, match="not running on a simulated node"):
        await server.cluster.fail_container(NS, "absent", "app")


async def test_job_pod_completes_and_succeeds(cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    await client.create("pods", pod("job-x", node="node-1", restart_policy="Never"), NS)
    done = await wait_for_object(client, "pods", "job-x", phase_is("Succeeded"), NS)
    terminated = _container(done, "app")["state"]["terminated"]
    assert terminated["exitCode"] == 0 and terminated["reason"] == "Completed"
    ready = condition(done, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PodCompleted")


async def test_exit_code_annotation_fails_a_never_pod(cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    await client.create("pods", pod("job-y", node="node-1", restart_policy="Never",
                                    annotations={EXIT_CODE_ANNOTATION: "3"}), NS)
    done = await wait_for_object(client, "pods", "job-y", phase_is("Failed"), NS)
    terminated = _container(done, "app")["state"]["terminated"]
    assert terminated["exitCode"] == 3 and terminated["reason"] == "Error"
    ready = condition(done, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ContainersNotReady")


async def test_init_containers_complete_before_the_containers_run(cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    body = pod("inited", node="node-1", initContainers=[{"name": "setup", "image": "busybox"}])
    await client.create("pods", body, NS)
    running = await wait_for_object(client, "pods", "inited", phase_is("Running"), NS)
    (setup,) = running["status"]["initContainerStatuses"]
    assert setup["name"] == "setup" and setup["state"]["terminated"]["reason"] == "Completed"
    assert condition(running, "Initialized")["status"] == "True"


async def test_on_failure_pod_restarts_a_failing_container(cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    await client.create("pods", pod("job-z", node="node-1", restart_policy="OnFailure",
                                    annotations={EXIT_CODE_ANNOTATION: "1"}), NS)
    looping = await wait_for_object(client, "pods", "job-z", _restarts("app", 2), NS)
    assert looping["status"]["phase"] == "Running"


async def test_fail_start_annotation_crash_loops_the_container(cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    await client.create("pods", pod("crash", node="node-1", containers=("ok", "bad"),
                                    annotations={FAIL_START_ANNOTATION: "bad"}), NS)
    looping = await wait_for_object(client, "pods", "crash", _restarts("bad", 2), NS)
    assert _container(looping, "ok")["restartCount"] == 0
    assert looping["status"]["phase"] == "Running" and not is_ready(looping)


async def test_unready_annotation_holds_the_pod_unready(cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    await client.create("pods", pod("held", node="node-1", annotations={UNREADY_ANNOTATION: "true"}), NS)
    held = await wait_for_object(client, "pods", "held", phase_is("Running"), NS)
    assert not is_ready(held)
    await client.patch("pods", "held", {"metadata": {"annotations": {UNREADY_ANNOTATION: None}}}, namespace=NS)
    await wait_for_object(client, "pods", "held", is_ready, NS)


async def test_graceful_deletion_honours_the_grace_period(fake_cluster: tuple[APIServer, Client],
                                                          clock: FakeClock) -> None:
    _, client = fake_cluster
    await client.create("pods", pod("web", node="node-1", terminationGracePeriodSeconds=30), NS)
    await wait_for_object(client, "pods", "web", phase_is("Running"), NS)
    marked = await client.delete("pods", "web", NS)
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30 and marked["metadata"]["deletionTimestamp"]
    clock.step(29.0)
    assert (await client.get("pods", "web", NS))["metadata"]["deletionGracePeriodSeconds"] == 30
    clock.step(1.0)
    await wait_gone(client, "pods", "web", NS)


async def test_shorter_grace_period_moves_the_deletion_forward(fake_cluster: tuple[APIServer, Client],
                                                               clock: FakeClock) -> None:
    _, client = fake_cluster
    await client.create("pods", pod("web", node="node-1", terminationGracePeriodSeconds=30), NS)
    await wait_for_object(client, "pods", "web", phase_is("Running"), NS)
    await client.delete("pods", "web", NS)
    again = await client.delete("pods", "web", NS, grace_period_seconds=60)  # longer: nothing changes
    assert again["metadata"]["deletionGracePeriodSeconds"] == 30
    shorter = await client.delete("pods", "web", NS, grace_period_seconds=0)
    assert shorter["metadata"]["name"] == "web"
    with pytest.raises(NotFound):
        await client.get("pods", "web", NS)


async def test_unbound_pod_is_deleted_at_once(fake_cluster: tuple[APIServer, Client]) -> None:
    _, client = fake_cluster
    await client.create("pods", pod("pending"), NS)
    await client.delete("pods", "pending", NS)
    with pytest.raises(NotFound):
        await client.get("pods", "pending", NS)


async def test_stopped_node_leaves_its_pods_and_resumes_them(cluster: tuple[APIServer, Client]) -> None:
    server, client = cluster
    assert server.cluster is not None
    await server.cluster.stop_node("node-1")
    await client.create("pods", pod("waiting", node="node-1"), NS)
    await client.create("pods", pod("barrier", node="node-2"), NS)
    await wait_for_object(client, "pods", "barrier", phase_is("Running"), NS)
    assert (await client.get("pods", "waiting", NS))["status"]["phase"] == "Pending"
    await server.cluster.start_node("node-1")
    await wait_for_object(client, "pods", "waiting", phase_is("Running"), NS)


async def test_pod_recreated_under_the_same_name_runs_anew(cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    await client.create("pods", pod("again", node="node-1"), NS)
    first = await wait_for_object(client, "pods", "again", phase_is("Running"), NS)
    await client.delete("pods", "again", NS, grace_period_seconds=0)
    await wait_gone(client, "pods", "again", NS)
    await client.create("pods", pod("again", node="node-1"), NS)
    second = await wait_for_object(client, "pods", "again", phase_is("Running"), NS)
    assert second["metadata"]["uid"] != first["metadata"]["uid"]


async def test_pod_deleted_while_its_node_is_down_goes_when_the_node_returns(
        cluster: tuple[APIServer, Client]) -> None:
    server, client = cluster
    assert server.cluster is not None
    await server.cluster.stop_node("node-1")
    await client.create("pods", pod("orphan", node="node-1"), NS)
    marked = await client.delete("pods", "orphan", NS)
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30  # kube's default grace: the pod stays
    await client.create("pods", pod("barrier", node="node-2"), NS)
    await wait_for_object(client, "pods", "barrier", phase_is("Running"), NS)
    assert (await client.get("pods", "orphan", NS))["metadata"]["deletionTimestamp"]
    await server.cluster.start_node("node-1")
    await wait_gone(client, "pods", "orphan", NS)


async def test_a_completed_pod_gives_its_ip_back() -> None:
    options = ClusterOptions(container_run_seconds=0.0)
    async with APIServer(nodes=1, cluster_options=options) as server, Client(server.url) as client:
        await client.create("pods", pod("first", node="node-1", restart_policy="Never"), NS)
        first = await wait_for_object(client, "pods", "first", phase_is("Succeeded"), NS)
        await client.create("pods", pod("second", node="node-1"), NS)
        second = await wait_for_object(client, "pods", "second", phase_is("Running"), NS)
        assert second["status"]["podIP"] == first["status"]["podIP"] == "10.244.1.2"


def test_status_posted_by_the_binding_is_not_written_again() -> None:
    """kubelet's isPodStatusByKubeletEqual compares decoded statuses: the ``lastProbeTime: null`` the API server's
    binding gives PodScheduled is no difference, so a running pod is not patched again at each of its events."""
    from kinformer.cluster.kubelet import _status_patch

    wanted = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    posted = {"phase": "Running", "qosClass": "BestEffort", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    assert _status_patch(posted, wanted) == {}
    posted["conditions"][0]["status"] = "False"
    assert _status_patch(posted, wanted) != {}


def test_status_patch_carries_only_what_changed() -> None:
    """The kubelet's two-way strategic merge patch (statusutil.PatchPodStatus): the fields that differ, and of
    the conditions (merged by type) only those that differ, a reason no longer given deleted with a null."""
    from kinformer.cluster.kubelet import _status_patch

    since = "2026-01-01T00:00:00Z"
    posted = {"phase": "Running", "podIP": "10.244.1.2", "conditions": [
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": since},
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": since}]}
    wanted = {"phase": "Running", "podIP": "10.244.1.2", "containerStatuses": [{"name": "a", "ready": True}],
              "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:09Z"},
                             {"type": "PodScheduled", "status": "True", "lastTransitionTime": since}]}
    assert _status_patch(posted, wanted) == {
        "containerStatuses": [{"name": "a", "ready": True}],
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:09Z",
                        "reason": None, "message": None}]}


def test_kubelet_syncs_on_spec_and_metadata_changes_not_on_its_own_status_writes() -> None:
    """kube's kubelet config source: a pod bound to one of its nodes is synced when added, changed in spec or
    metadata, or deleted; its own status write coming back through the watch is no reason to sync again."""
    from kinformer.cluster.kubelet import OwnPodChanged
    from kinformer.cluster.nodes import SimulatedNode

    changed = OwnPodChanged({"node-1": SimulatedNode("node-1", 1)})
    bound = {"metadata": {"name": "web", "uid": "u1", "annotations": {}}, "spec": {"nodeName": "node-1"},
             "status": {"phase": "Pending"}}
    running = {**bound, "status": {"phase": "Running"}}
    annotated = {**running, "metadata": {**bound["metadata"], "annotations": {UNREADY_ANNOTATION: "true"}}}
    deleting = {**running, "metadata": {**bound["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    elsewhere = {**bound, "spec": {"nodeName": "node-9"}}
    assert changed.create(bound) and not changed.create(elsewhere) and not changed.create({**bound, "spec": {}})
    assert not changed.update(bound, running)
    assert changed.update(bound, running, is_resync=True)
    assert changed.update(running, annotated) and changed.update(running, deleting)
    assert changed.update({**bound, "spec": {}}, bound)  # the binding
    assert not changed.update(elsewhere, {**elsewhere, "status": {"phase": "Running"}})


def test_the_kubelets_are_handed_only_pods_bound_to_their_nodes() -> None:
    """``OwnPodChanged.ours`` is the pods watch's accepts: an unbound pod or one of another node never reaches
    the kubelets (their reconcile would do nothing); the binding does (its new pod is ours), and so would a
    pod leaving our node (its old one is)."""
    from kinformer.cluster.kubelet import OwnPodChanged
    from kinformer.cluster.nodes import SimulatedNode

    own = OwnPodChanged({"node-1": SimulatedNode("node-1", 1)})
    bound = {"metadata": {"name": "web"}, "spec": {"nodeName": "node-1"}}
    assert own.ours(bound)
    assert not own.ours({**bound, "spec": {"nodeName": "node-9"}}) and not own.ours({**bound, "spec": {}})


def test_the_digests_the_kubelet_reports_are_sha256_remembered_for_a_bounded_number_of_names() -> None:
    import hashlib

    from kinformer.cluster.kubelet import _sha

    for text in ("docker.io/library/nginx:1.27", "web/docker.io/library/nginx:1.27/0/1000.0"):
        assert _sha(text) == _sha(text) == hashlib.sha256(text.encode()).hexdigest()
    assert _sha.cache_info().maxsize == 1024
