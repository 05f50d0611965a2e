"""The scheduler's cache, driven as the informers and the scheduler drive it (kube's
pkg/scheduler/backend/cache/cache_test.go: TestAssumePodScheduled, TestAddPodWillConfirm, TestForgetPod,
TestUpdatePod, TestRemovePod, TestNodeOperators)."""

from __future__ import annotations

from typing import Any

from kinformer.cache.tombstone import DeletedFinalStateUnknown
from kinformer.cluster.podresources import pod_requests
from kinformer.cluster.schedcache import SchedulerCache
from kinformer.cluster.scheduling import PodUsage


def node(name: str, cpu: str = "4", rv: str = "1", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv, "labels": labels or {}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}


def pod(name: str, cpu: str = "1", node_name: str = "", phase: str = "Pending",
        host_port: int | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
    if host_port:
        container["ports"] = [{"containerPort": 80, "hostPort": host_port}]
    spec: dict[str, Any] = {"containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec,
            "status": {"phase": phase}}


def usage(p: dict[str, Any]) -> PodUsage:
    return PodUsage.of(p, pod_requests(p))


class Freed:
    def __init__(self, cache: SchedulerCache) -> None:
        self.calls = 0
        cache.on_freed = self

    def __call__(self) -> None:
        self.calls += 1


def counted(cache: SchedulerCache, name: str) -> tuple[int, int]:
    """(pods, millicores requested) on node ``name``."""
    info = next(i for i in cache.nodes() if i.name == name)
    return info.pods, info.requested.get("cpu", 0)


async def test_assumed_pod_counts_and_add_pod_will_confirm_it_once() -> None:
    cache = SchedulerCache()
    await cache.node_added(node("n1"))
    p = pod("web")
    cache.assume(p, "n1", usage(p))
    assert cache.is_assumed("uid-web") and counted(cache, "n1") == (1, 1000)
    await cache.pod_updated(p, p)  # a change seen before the binding: still assumed, counted once
    assert cache.is_assumed("uid-web") and counted(cache, "n1") == (1, 1000)
    await cache.pod_updated(p, pod("web", node_name="n1"))
    assert not cache.is_assumed("uid-web") and counted(cache, "n1") == (1, 1000)
    assert len(cache) == 1


async def test_forget_pod_takes_off_an_assumed_pod_only() -> None:
    cache = SchedulerCache()
    await cache.node_added(node("n1"))
    cache.assume(pod("a"), "n1", usage(pod("a")))
    cache.forget("uid-a")
    assert counted(cache, "n1") == (0, 0) and len(cache) == 0
    await cache.pod_added(pod("b", node_name="n1"))
    cache.forget("uid-b")  # bound: the informer showed it, a late binding failure does not take it off
    assert counted(cache, "n1") == (1, 1000)


async def test_update_pod_recounts_a_changed_spec_and_removes_a_terminal_pod() -> None:
    cache = SchedulerCache()
    freed = Freed(cache)
    await cache.node_added(node("n1"))
    first = pod("web", cpu="1", node_name="n1")
    await cache.pod_added(first)
    resized = pod("web", cpu="2", node_name="n1")
    await cache.pod_updated(first, resized)
    assert counted(cache, "n1") == (1, 2000)
    before = freed.calls
    await cache.pod_updated(resized, pod("web", cpu="2", node_name="n1", phase="Running"))
    assert freed.calls == before and counted(cache, "n1") == (1, 2000)
    await cache.pod_updated(resized, pod("web", cpu="2", node_name="n1", phase="Succeeded"))
    assert freed.calls == before + 1 and counted(cache, "n1") == (0, 0)


async def test_a_status_change_keeps_the_count_and_holds_the_newest_equal_spec_only() -> None:
    """The cache holds no spec of its own beside the informer's: at a status change it refers to the new
    version's (equal) spec, so the version the informer replaced can go."""
    cache = SchedulerCache()
    await cache.node_added(node("n1"))
    first = pod("web", cpu="1", node_name="n1")
    await cache.pod_added(first)
    running = pod("web", cpu="1", node_name="n1", phase="Running")
    await cache.pod_updated(first, running)
    assert counted(cache, "n1") == (1, 1000)
    assert cache._pods["uid-web"].spec is running["spec"]


def test_pods_without_host_ports_share_one_empty_set() -> None:
    assert usage(pod("a")).host_ports is usage(pod("b")).host_ports == frozenset()
    assert usage(pod("c", host_port=8080)).host_ports == {("0.0.0.0", "TCP", 8080)}


async def test_remove_pod_frees_its_node_and_its_host_port() -> None:
    cache = SchedulerCache()
    freed = Freed(cache)
    await cache.node_added(node("n1"))
    p = pod("web", node_name="n1", host_port=8080)
    await cache.pod_added(p)
    info = cache.nodes()[0]
    assert info.host_ports == {("0.0.0.0", "TCP", 8080): 1}
    before = freed.calls
    await cache.pod_deleted(DeletedFinalStateUnknown("default/web", p))
    assert freed.calls == before + 1
    assert (info.pods, info.requested["cpu"], info.non_zero_cpu, info.host_ports) == (0, 0, 0, {})


async def test_node_operators_pods_before_their_node_and_a_heartbeat_moves_nothing() -> None:
    cache = SchedulerCache()
    freed = Freed(cache)
    await cache.pod_added(pod("early", node_name="n2"))
    assert cache.nodes() == []  # counted, but a node the informer does not show is never offered
    await cache.node_added(node("n2"))
    await cache.node_added(node("n1"))
    assert [i.name for i in cache.nodes()] == ["n1", "n2"] and counted(cache, "n2") == (1, 1000)
    calls = freed.calls
    await cache.node_updated(node("n1"), node("n1", rv="2"))  # a heartbeat: nothing scheduling reads
    assert freed.calls == calls
    await cache.node_updated(node("n1", rv="2"), node("n1", cpu="8", rv="3"))
    assert freed.calls == calls + 1 and cache.nodes()[0].offered["cpu"] == 8000
    await cache.node_deleted(node("n2"))
    assert [i.name for i in cache.nodes()] == ["n1"]
    await cache.pod_deleted(DeletedFinalStateUnknown("default/early", None))  # its last state unknown
    await cache.node_added(node("n2"))
    assert counted(cache, "n2") == (0, 0)


async def test_the_pod_handlers_are_handed_bound_and_counted_pods_and_a_pod_leaving_its_node() -> None:
    """``concerns`` (the pods watch's accepts): an unbound pod nobody counts changes nothing here; a bound one
    or an assumed one does, and an update that unbinds a counted pod is handed over (its old pod is bound)."""
    cache = SchedulerCache()
    await cache.node_added(node("n1"))
    pending, bound = pod("web"), pod("web", node_name="n1")
    assert not cache.concerns(pending) and cache.concerns(bound)
    cache.assume(pending, "n1", usage(pending))
    assert cache.concerns(pending)
    cache.forget("uid-web")
    await cache.pod_added(bound)
    assert cache.concerns(bound) and cache.concerns(pending)  # counted: an unbound version is still its business
    await cache.pod_updated(bound, pending)
    assert counted(cache, "n1") == (0, 0) and not cache.concerns(pending)
