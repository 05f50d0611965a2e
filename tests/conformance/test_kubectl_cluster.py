"""The moving cluster's acceptance tests: the real kubectl against ``kinformer serve`` as it comes (its controllers
and one simulated node; ``--nodes 3`` where a test needs several nodes), no test code playing a controller or kubelet.

Each test shows one "Done when" item: a Deployment rolls out, rolls over within maxSurge/maxUnavailable, rolls
back and scales; a Job completes; a StatefulSet creates its pods in order; a DaemonSet runs a pod per node; a
Service's EndpointSlices follow readiness; a quota refuses the pod over it; a stopped node's pods are evicted and
replaced; ``kubectl get events`` shows what the controllers and the scheduler did. The node-failure test stops a
node as a kubectl user can (``kubectl annotate node NAME kinformer.io/stopped=true``) on a ``kinformer serve --nodes
3`` given short node-failure timings by kube's flags. Every kubectl call has a ``--timeout`` or a process timeout,
every wait a deadline.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import kinformer as ki
from cluster_helpers import wait_for
from kubectllib import KUBECTL, Kubectl, Served, serve

pytestmark = [
    pytest.mark.kubectl, pytest.mark.slow, pytest.mark.timeout(180),
    pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not found on PATH (install Debian's kubectl)"),
]

#: the longest any one rollout, job or wait may take on a loaded 2-core machine.
WAIT = 60
POLL = 0.1


@pytest.fixture(scope="module")
def one_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    """``kinformer serve`` as it comes: its controllers and one simulated node."""
    with serve(tmp_path_factory.mktemp("serve")) as served:
        yield served, tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def three_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    """``kinformer serve --nodes 3``."""
    with serve(tmp_path_factory.mktemp("serve3"), "--nodes", "3") as served:
        yield served, tmp_path_factory.mktemp("home3")


@pytest.fixture
def kubectl(one_node: tuple[Served, Path]) -> Kubectl:
    return Kubectl(one_node[0].kubeconfig, one_node[1])


@pytest.fixture
def ns(kubectl: Kubectl, request: pytest.FixtureRequest) -> str:
    """A fresh namespace per test (``kubectl create namespace``)."""
    return _namespace(kubectl, request)


def _namespace(kubectl: Kubectl, request: pytest.FixtureRequest) -> str:
    name = "c-" + request.node.name.removeprefix("test_").replace("_", "-")[:40].rstrip("-")
    kubectl.run("create", "namespace", name)
    return name


def poll(probe: Callable[[], Any], message: str, until: Callable[[Any], bool] = bool, timeout: float = WAIT) -> Any:
    """Call ``probe`` until ``until`` holds for what it returns (returned); AssertionError naming ``message``
    after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if until(value):
            return value
        assert time.monotonic() < deadline, f"{message} did not happen within {timeout} s"
        time.sleep(POLL)


def rolled_out(kubectl: Kubectl, ns: str, name: str = "web") -> None:
    out = kubectl.run("rollout", "status", f"deployment/{name}", "-n", ns, f"--timeout={WAIT}s",
                      timeout=WAIT + 10).stdout
    assert f'deployment "{name}" successfully rolled out' in out


def create_web(kubectl: Kubectl, ns: str, replicas: int = 3, image: str = "nginx:1.25") -> None:
    kubectl.run("create", "deployment", "web", f"--image={image}", f"--replicas={replicas}", "-n", ns)
    rolled_out(kubectl, ns)


def pods(kubectl: Kubectl, ns: str, selector: str = "app=web") -> list[Any]:
    return list(kubectl.json("get", "pods", "-n", ns, "-l", selector)["items"])


def live(items: list[Any]) -> list[Any]:
    """The pods not being deleted."""
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def is_ready(pod: Any) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions")
               or ())


def images(kubectl: Kubectl, ns: str) -> set[str]:
    return {p["spec"]["containers"][0]["image"] for p in live(pods(kubectl, ns))}


def revisions(kubectl: Kubectl, ns: str) -> list[str]:
    out = kubectl.run("rollout", "history", "deployment/web", "-n", ns).stdout
    return [line.split()[0] for line in out.splitlines()[2:] if line.strip()]


# -- Deployments -----------------------------------------------------------------------------------------------


def test_create_deployment_and_rollout_status_completes(kubectl: Kubectl, ns: str) -> None:
    """``kubectl create deployment web --image=nginx --replicas=3 && kubectl rollout status deployment/web``."""
    kubectl.run("create", "deployment", "web", "--image=nginx", "--replicas=3", "-n", ns)
    rolled_out(kubectl, ns)
    running = live(pods(kubectl, ns))
    assert len(running) == 3
    assert all(p["status"]["phase"] == "Running" and is_ready(p) and p["spec"]["nodeName"] == "node-1"
               for p in running)
    status = kubectl.json("get", "deployment", "web", "-n", ns)["status"]
    assert (status["readyReplicas"], status["availableReplicas"], status["updatedReplicas"]) == (3, 3, 3)


class RollingBounds:
    """Fed every pod event of a rollout (in watch order): the pods present, and the fewest ready and most live
    (not terminating) pods seen after any event."""

    def __init__(self) -> None:
        self.pods: dict[str, Any] = {}
        self.most_live = 0
        self.fewest_ready: int | None = None
        self.events = 0

    def start(self) -> None:
        """Count from here on (after the informer's initial list, whose adds arrive one at a time)."""
        self.most_live, self.fewest_ready, self.events = 0, None, 0

    def on_event(self, pod: Any, deleted: bool = False) -> None:
        name = pod["metadata"]["name"]
        if deleted:
            self.pods.pop(name, None)
        else:
            self.pods[name] = pod
        running = [p for p in self.pods.values() if not p["metadata"].get("deletionTimestamp")]
        ready = sum(1 for p in running if is_ready(p))
        self.events += 1
        self.most_live = max(self.most_live, len(running))
        self.fewest_ready = ready if self.fewest_ready is None else min(self.fewest_ready, ready)


async def test_set_image_rolls_over_within_max_surge_and_max_unavailable(kubectl: Kubectl, ns: str) -> None:
    """4 replicas with maxSurge 1 and maxUnavailable 1 (kube's 25 % defaults, rounded up and down): an informer
    on the pods sees at most 5 live pods and at least 3 ready ones after every event of the rollout."""
    create_web(kubectl, ns, replicas=4)
    bounds = RollingBounds()
    async with await ki.Client.from_kubeconfig(str(kubectl.kubeconfig)) as client:
        factory = ki.SharedInformerFactory(client, namespace=ns)
        informer = factory.informer("v1/pods", label_selector="app=web")
        registration = informer.add_event_handler(
            on_add=bounds.on_event, on_update=lambda _old, new, *_: bounds.on_event(new),
            on_delete=lambda pod: bounds.on_event(getattr(pod, "obj", pod), deleted=True))
        async with factory.running():
            await factory.wait_for_cache_sync()
            await registration.wait_for_sync()
            assert len(bounds.pods) == 4
            bounds.start()
            await kubectl.arun("set", "image", "deployment/web", "nginx=nginx:1.26", "-n", ns)
            out = (await kubectl.arun("rollout", "status", "deployment/web", "-n", ns, f"--timeout={WAIT}s",
                                      timeout=WAIT + 10)).stdout
            assert 'deployment "web" successfully rolled out' in out
            await wait_for(lambda: len(bounds.pods) == 4, WAIT, "the old pods to go")
    assert images(kubectl, ns) == {"nginx:1.26"}
    assert bounds.events > 8  # four pods created, readied and deleted were seen one by one
    assert 4 <= bounds.most_live <= 5
    assert bounds.fewest_ready is not None and bounds.fewest_ready >= 3


def test_rollout_history_and_undo(kubectl: Kubectl, ns: str) -> None:
    create_web(kubectl, ns)
    kubectl.run("set", "image", "deployment/web", "nginx=nginx:1.26", "-n", ns)
    rolled_out(kubectl, ns)
    assert revisions(kubectl, ns) == ["1", "2"]
    assert "nginx:1.26" in kubectl.run("rollout", "history", "deployment/web", "-n", ns, "--revision=2").stdout

    kubectl.run("rollout", "undo", "deployment/web", "-n", ns)
    rolled_out(kubectl, ns)
    assert poll(lambda: images(kubectl, ns) == {"nginx:1.25"}, "the old pods to go after the undo")
    assert revisions(kubectl, ns) == ["2", "3"]  # revision 1 came back as 3
    deploy = kubectl.json("get", "deployment", "web", "-n", ns)
    assert deploy["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"


def test_scale_up_and_down(kubectl: Kubectl, ns: str) -> None:
    create_web(kubectl, ns, replicas=2)
    kubectl.run("scale", "deployment/web", "--replicas=5", "-n", ns)
    rolled_out(kubectl, ns)
    assert len([p for p in live(pods(kubectl, ns)) if is_ready(p)]) == 5
    kubectl.run("scale", "deployment/web", "--replicas=1", "-n", ns)
    rolled_out(kubectl, ns)
    assert poll(lambda: len(pods(kubectl, ns)) == 1, "the scaled-down pods to go")
    status = kubectl.json("get", "deployment", "web", "-n", ns)["status"]
    assert (status["replicas"], status["availableReplicas"]) == (1, 1)


# -- Jobs, StatefulSets, DaemonSets -------------------------------------------------------------------------------


def test_create_job_then_wait_for_complete(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("create", "job", "once", "--image=busybox", "-n", ns, "--", "true")
    out = kubectl.run("wait", "--for=condition=complete", "job/once", "-n", ns, f"--timeout={WAIT}s",
                      timeout=WAIT + 10).stdout
    assert "job.batch/once condition met" in out
    job = kubectl.json("get", "job", "once", "-n", ns)
    assert job["status"]["succeeded"] == 1
    assert [p["status"]["phase"] for p in pods(kubectl, ns, "job-name=once")] == ["Succeeded"]


STATEFULSET = {
    "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
    "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
             "template": {"metadata": {"labels": {"app": "db"}},
                          "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}}}}


def test_statefulset_creates_db_0_1_2_in_order(kubectl: Kubectl, ns: str) -> None:
    """OrderedReady: each pod is created once the one before it is Running and Ready, so the creation events (and
    timestamps) come in ordinal order."""
    kubectl.run("create", "service", "clusterip", "db", "--clusterip=None", "-n", ns)
    kubectl.apply_yaml(STATEFULSET, "-n", ns)
    out = kubectl.run("rollout", "status", "statefulset/db", "-n", ns, f"--timeout={WAIT}s", timeout=WAIT + 10)
    assert "roll out complete" in out.stdout or "partitioned roll out complete" in out.stdout
    stamps = {p["metadata"]["name"]: _seconds(p["metadata"]["creationTimestamp"]) for p in pods(kubectl, ns, "app=db")}
    assert sorted(stamps) == ["db-0", "db-1", "db-2"]
    assert stamps["db-0"] <= stamps["db-1"] <= stamps["db-2"]
    created = poll(lambda: statefulset_creates(kubectl, ns), "three SuccessfulCreate events",
                   until=lambda names: len(names) == 3)
    assert created == ["db-0", "db-1", "db-2"]


def statefulset_creates(kubectl: Kubectl, ns: str) -> list[str]:
    """The pods StatefulSet db's SuccessfulCreate events name, in the order they were recorded."""
    events = kubectl.json("get", "events", "-n", ns, "--field-selector", "reason=SuccessfulCreate")["items"]
    in_order = sorted(events, key=lambda e: int(e["metadata"]["resourceVersion"]))
    return [m.group(1) for e in in_order
            if (m := re.fullmatch(r"create Pod (\S+) in StatefulSet db successful", e["message"]))]


DAEMONSET = {
    "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
    "spec": {"selector": {"matchLabels": {"app": "agent"}},
             "template": {"metadata": {"labels": {"app": "agent"}},
                          "spec": {"containers": [{"name": "agent", "image": "fluent-bit:3"}]}}}}


def test_daemonset_puts_one_pod_on_each_node(three_nodes: tuple[Served, Path],
                                             request: pytest.FixtureRequest) -> None:
    kubectl = Kubectl(three_nodes[0].kubeconfig, three_nodes[1])
    ns = _namespace(kubectl, request)
    kubectl.apply_yaml(DAEMONSET, "-n", ns)
    kubectl.run("rollout", "status", "daemonset/agent", "-n", ns, f"--timeout={WAIT}s", timeout=WAIT + 10)
    nodes = sorted(p["spec"]["nodeName"] for p in live(pods(kubectl, ns, "app=agent")))
    assert nodes == ["node-1", "node-2", "node-3"]
    status = kubectl.json("get", "daemonset", "agent", "-n", ns)["status"]
    assert (status["desiredNumberScheduled"], status["numberReady"]) == (3, 3)


# -- Services, quotas, events ----------------------------------------------------------------------------------


def slice_readiness(kubectl: Kubectl, ns: str) -> dict[str, bool]:
    slices = kubectl.json("get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=web")["items"]
    return {e["targetRef"]["name"]: e["conditions"]["ready"] for s in slices for e in s.get("endpoints") or ()}


def test_service_endpointslices_follow_pod_readiness(kubectl: Kubectl, ns: str) -> None:
    """The ``kinformer.io/unready`` annotation holds a pod's containers unready: its endpoint turns not ready, and
    ready again once the annotation is removed."""
    create_web(kubectl, ns, replicas=2)
    kubectl.run("create", "service", "clusterip", "web", "--tcp=80:80", "-n", ns)
    names = sorted(p["metadata"]["name"] for p in pods(kubectl, ns))
    both = {name: True for name in names}
    poll(lambda: slice_readiness(kubectl, ns) == both, "both pods' endpoints ready")

    kubectl.run("annotate", "pod", names[0], "kinformer.io/unready=true", "-n", ns)
    poll(lambda: slice_readiness(kubectl, ns) == {**both, names[0]: False}, f"{names[0]}'s endpoint not ready")
    assert not is_ready(kubectl.json("get", "pod", names[0], "-n", ns))

    kubectl.run("annotate", "pod", names[0], "kinformer.io/unready-", "-n", ns)
    poll(lambda: slice_readiness(kubectl, ns) == both, f"{names[0]}'s endpoint ready again")


def test_quota_refuses_the_pod_over_it(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("create", "quota", "pods", "--hard=pods=2", "-n", ns)
    poll(lambda: (kubectl.json("get", "resourcequota", "pods", "-n", ns).get("status") or {}).get("used"),
         "the quota's first usage")
    for name in ("one", "two"):
        kubectl.run("run", name, "--image=nginx", "-n", ns)
    refused = kubectl.run("run", "three", "--image=nginx", "-n", ns, check=False)
    assert refused.returncode != 0
    assert ('Error from server (Forbidden): pods "three" is forbidden: exceeded quota: pods, requested: pods=1, '
            'used: pods=2, limited: pods=2') in refused.stderr
    assert not kubectl.exists("pod", "three", "-n", ns)


def event_rows(kubectl: Kubectl, ns: str) -> list[tuple[str, str, str]]:
    """``kubectl get events`` as (reason, kind of object, message) rows."""
    rows = [line.split(None, 4) for line in kubectl.run("get", "events", "-n", ns).stdout.splitlines()[1:]]
    return [(cells[2], cells[3].split("/")[0], cells[4]) for cells in rows]


def test_get_events_shows_scaling_replicaset_successful_create_and_scheduled(kubectl: Kubectl, ns: str) -> None:
    create_web(kubectl, ns, replicas=2)
    # the recorders write events in the background: wait until both pods' scheduling is recorded
    rows = poll(lambda: event_rows(kubectl, ns), "the Scheduled events",
                until=lambda rows: sum(row[0] == "Scheduled" for row in rows) == 2)
    def messages(reason: str, kind: str) -> list[str]:
        return [m for r, k, m in rows if (r, k) == (reason, kind)]

    assert any(m.startswith("Scaled up replica set web-") and m.endswith(" from 0 to 2")
               for m in messages("ScalingReplicaSet", "deployment"))
    assert len([m for m in messages("SuccessfulCreate", "replicaset") if m.startswith("Created pod: web-")]) == 2
    assert all(m.startswith(f"Successfully assigned {ns}/web-") and m.endswith(" to node-1")
               for m in messages("Scheduled", "pod"))


# -- a node that stops ------------------------------------------------------------------------------------------

TOLERATION = 2
GRACE = 3
#: ``kinformer serve`` flags of a cluster that notices a stopped node in seconds (kube's: 40 s and 300 s).
FAST_NODE_FAILURE = ("--nodes", "3", "--node-monitor-period=500ms", f"--node-monitor-grace-period={GRACE}s",
                     "--node-status-update-frequency=1s", f"--default-unreachable-toleration-seconds={TOLERATION}",
                     f"--default-not-ready-toleration-seconds={TOLERATION}")


async def test_stopped_node_pods_are_evicted_after_toleration_seconds_and_replaced(tmp_path: Path) -> None:
    """The DefaultTolerationSeconds admission gives each pod ``unreachable:NoExecute`` for TOLERATION seconds
    (``--default-unreachable-toleration-seconds``); the node annotated ``kinformer.io/stopped=true`` (its kubelet
    stops) turns Unknown after GRACE seconds (``--node-monitor-grace-period``) and is tainted; its pods are marked
    for deletion (condition DisruptionTarget, reason DeletionByTaintManager) TOLERATION seconds after the taint,
    stay Terminating (no kubelet confirms their end) and their ReplicaSet replaces them on the nodes that still
    run. The annotation removed, the node's kubelet ends them and the node loses its taints."""
    (tmp_path / "serve").mkdir()
    with serve(tmp_path / "serve", *FAST_NODE_FAILURE) as served:
        kubectl = Kubectl(served.kubeconfig, tmp_path)
        await kubectl.arun("create", "deployment", "web", "--image=nginx", "--replicas=3")
        await kubectl.arun("rollout", "status", "deployment/web", f"--timeout={WAIT}s", timeout=WAIT + 10)
        before = await _pods_json(kubectl)
        doomed = before[0]["spec"]["nodeName"]
        victims = {p["metadata"]["name"] for p in before if p["spec"]["nodeName"] == doomed}
        assert {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": TOLERATION} in before[0]["spec"]["tolerations"]

        await kubectl.arun("annotate", "node", doomed, "kinformer.io/stopped=true")
        await wait_for(lambda: _replaced(kubectl, victims, doomed), WAIT, "the evicted pods' replacements")
        node = json.loads((await kubectl.arun("get", "node", doomed, "-o", "json")).stdout)
        assert _condition(node, "Ready")["status"] == "Unknown"
        tainted = next(_seconds(t["timeAdded"]) for t in node["spec"]["taints"]
                       if (t["key"], t["effect"]) == ("node.kubernetes.io/unreachable", "NoExecute"))
        for pod in await _pods_json(kubectl):
            if pod["metadata"]["name"] in victims:
                assert _condition(pod, "Ready")["status"] == "False"  # the node lifecycle's MarkPodsNotReady
                target = _condition(pod, "DisruptionTarget")
                assert target["reason"] == "DeletionByTaintManager"
                # both stamps are whole seconds, so one second of slack
                assert _seconds(target["lastTransitionTime"]) >= tainted + TOLERATION - 1
        await kubectl.arun("rollout", "status", "deployment/web", f"--timeout={WAIT}s", timeout=WAIT + 10)

        await kubectl.arun("annotate", "node", doomed, "kinformer.io/stopped-")  # back: its kubelet ends the
        # Terminating pods, the taints go
        await kubectl.arun("wait", "--for=delete", *(f"pod/{v}" for v in victims), f"--timeout={WAIT}s",
                           timeout=WAIT + 10)
        await kubectl.arun("wait", "--for=condition=Ready", f"node/{doomed}", f"--timeout={WAIT}s", timeout=WAIT + 10)
        await wait_for(lambda: _untainted(kubectl, doomed), WAIT, "the unreachable taints' removal")


async def _untainted(kubectl: Kubectl, node: str) -> bool:
    taints = json.loads((await kubectl.arun("get", "node", node, "-o", "json")).stdout)["spec"].get("taints") or ()
    return not any(t["key"] == "node.kubernetes.io/unreachable" for t in taints)


def _condition(obj: Any, kind: str) -> Any:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


async def _pods_json(kubectl: Kubectl) -> list[Any]:
    return list(json.loads((await kubectl.arun("get", "pods", "-l", "app=web", "-o", "json")).stdout)["items"])


async def _replaced(kubectl: Kubectl, victims: set[str], doomed: str) -> bool:
    """The victims are Terminating and three other pods run Ready on the other nodes."""
    current = await _pods_json(kubectl)
    terminating = {p["metadata"]["name"] for p in current if p["metadata"].get("deletionTimestamp")}
    others = [p for p in live(current) if p["metadata"]["name"] not in victims]
    return victims <= terminating and len(others) == 3 and all(
        is_ready(p) and p["spec"]["nodeName"] != doomed for p in others)


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()

