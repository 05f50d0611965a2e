"""Several API server replicas over one 3-member etcd cluster behave as one API server.

Writes through one replica reach watchers and consistent lists on the others; CRDs created through one
replica are served by every replica; informers on different replicas converge to the same state; a
workload survives killing an etcd member and a server replica with no acknowledged write lost; the
replicated demo converges. Every test stores under a key prefix of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from test_etcd_storage import ETCD, EtcdMember, _free_port, _leader_first

from kinformer.client import Client
from kinformer.errors import APIError
from kinformer.server import APIServer
from kinformer.testing import FaultProxy
from testlib import served, wait_until

pytestmark = pytest.mark.skipif(ETCD is None, reason="etcd binary not found (apt-get install etcd-server)")

DEADLINE = 20.0
CMS = "configmaps"
_prefixes = itertools.count()


def _start_cluster() -> list[EtcdMember]:
    ports = [(_free_port(), _free_port()) for _ in range(3)]
    spec = ",".join(f"m{i}=http://127.0.0.1:{peer}" for i, (_, peer) in enumerate(ports))
    members = [EtcdMember(f"m{i}", client, peer, spec) for i, (client, peer) in enumerate(ports)]

    async def healthy() -> None:
        await asyncio.gather(*(m.wait_healthy() for m in members))

    try:
        asyncio.run(healthy())
    except BaseException:
        for m in members:
            m.cleanup()
        raise
    return members


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[list[EtcdMember]]:
    """One 3-member cluster for the tests that kill nothing (each uses its own key prefix)."""
    members = _start_cluster()
    yield members
    for m in members:
        m.cleanup()


@pytest.fixture
def own_cluster() -> Iterator[list[EtcdMember]]:
    """A 3-member cluster of the test's own (it kills a member)."""
    members = _start_cluster()
    yield members
    for m in members:
        m.cleanup()


def storage_url(members: list[EtcdMember]) -> str:
    return "etcd://" + ",".join(m.endpoint for m in members) + f"/replicas-{time.time_ns()}-{next(_prefixes)}"


@contextlib.asynccontextmanager
async def replicas(url: str, n: int, **kw: Any) -> AsyncIterator[list[APIServer]]:
    """``n`` API servers over ``url``, started at the same time (they race to create the system namespaces)."""
    servers = [APIServer(storage=url, **kw) for _ in range(n)]
    started = await asyncio.gather(*(s.start() for s in servers), return_exceptions=True)
    try:
        for res in started:
            if isinstance(res, BaseException):
                raise res
        yield servers
    finally:
        for s in servers:
            await s.stop()


def cm(name: str, value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}}


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                               "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]},
}
WIDGETS = "example.com/v1/widgets"


# -- one API server, several replicas ------------------------------------------------------------------


async def test_write_via_one_replica_reaches_watch_and_consistent_list_on_another(
        shared_cluster: list[EtcdMember]) -> None:
    async with replicas(storage_url(shared_cluster), 3) as (a, b, c), \
            Client(a.url) as ca, Client(b.url) as cb, Client(c.url) as cc:
        start = (await cb.list(CMS, "default")).resource_version
        watch = cb.watch(CMS, "default", resource_version=start)
        try:
            created = await ca.create(CMS, cm("one", "1"), namespace="default")
            ev = await asyncio.wait_for(anext(watch), DEADLINE)
            assert ev.type == "ADDED" and ev.object["metadata"]["name"] == "one"
            assert ev.object["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        finally:
            await watch.aclose()
        # consistent reads: a write acknowledged by one replica is in the next list from every other one
        for i in range(10):
            await [ca, cb, cc][i % 3].create(CMS, cm(f"k{i}", str(i)), namespace="default")
            for reader in (ca, cb, cc):
                names = {o["metadata"]["name"] for o in (await reader.list(CMS, "default")).items}
                assert f"k{i}" in names
        # every replica created the default namespaces' state once, and they agree on it
        ns_lists = [sorted(o["metadata"]["uid"] for o in (await cl.list("namespaces")).items) for cl in (ca, cb, cc)]
        assert ns_lists[0] == ns_lists[1] == ns_lists[2] and len(ns_lists[0]) == 4


async def test_crd_via_one_replica_served_by_another(shared_cluster: list[EtcdMember]) -> None:
    async with replicas(storage_url(shared_cluster), 2) as (a, b), Client(a.url) as ca, Client(b.url) as cb:
        await ca.create("apiextensions.k8s.io/v1/customresourcedefinitions", CRD)

        await wait_until(lambda: served(cb, WIDGETS), what="replica B to serve the CRD created through A",
                         timeout=DEADLINE)
        body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}
        created = await cb.create(WIDGETS, body, namespace="default")
        assert (await ca.get(WIDGETS, "w", namespace="default"))["metadata"]["uid"] == created["metadata"]["uid"]
        await cb.patch(WIDGETS, "w", {"spec": {"size": 2}}, namespace="default")
        await cb.patch_status(WIDGETS, "w", {"status": {"ok": True}}, namespace="default")
        got = await ca.get(WIDGETS, "w", namespace="default")
        assert got["spec"]["size"] == 2 and got["status"] == {"ok": True}
        # deleting the CRD through B removes its objects and stops A serving it
        await cb.delete("apiextensions.k8s.io/v1/customresourcedefinitions", "widgets.example.com")

        async def gone() -> bool:
            return not await served(ca, WIDGETS)

        await wait_until(gone, what="replica A to stop serving the deleted CRD", timeout=DEADLINE)
        bucket = a.cache.buckets.get("/registry/example.com/widgets/")
        assert bucket is None or not bucket.objects


async def test_informers_on_different_replicas_converge(shared_cluster: list[EtcdMember]) -> None:
    from kinformer import SharedInformerFactory

    async with replicas(storage_url(shared_cluster), 3) as servers, contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(s.url)) for s in servers]
        factories = [SharedInformerFactory(cl, resync=0) for cl in clients]
        informers = [f.informer(CMS) for f in factories]
        for f in factories:
            f.start()
        try:
            for f in factories:
                await f.wait_for_cache_sync()

            async def writer(w: int) -> None:
                cl = clients[w]
                for i in range(15):
                    name = f"w{w}-{i % 5}"
                    try:
                        await cl.create(CMS, cm(name, str(i)), namespace="default")
                    except APIError:
                        await cl.patch(CMS, name, {"data": {"v": str(i)}}, namespace="default")
                    if i % 7 == 6:
                        await cl.delete(CMS, name, namespace="default")

            await asyncio.gather(*(writer(w) for w in range(3)))
            truth = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
                     for o in (await clients[0].list(CMS)).items}

            def state(inf: Any) -> dict[tuple[str, str], str]:
                return {(o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
                        for o in inf.indexer.list()}

            await wait_until(lambda: all(state(inf) == truth for inf in informers), what="informers to converge",
                             timeout=DEADLINE)
        finally:
            for f in factories:
                await f.shutdown()


async def test_compaction_by_several_replicas_is_safe(shared_cluster: list[EtcdMember]) -> None:
    async with replicas(storage_url(shared_cluster), 2, compaction_keep=5) as (a, b), Client(b.url) as cb:
        for i in range(20):
            await cb.create(CMS, cm(f"c{i}", "x"), namespace="default")
        await wait_until(lambda: a.cache.revision == b.cache.revision, what="the caches to agree", timeout=DEADLINE)
        point = await a.compact()
        assert point == a.cache.revision - 5
        assert await b.compact() == point  # nothing further to do: no error
        await a.storage.compact(point - 1)  # at or below the point: a no-op, not an error
        watch = cb.watch(CMS, "default", resource_version=str(point + 1))
        try:
            await cb.create(CMS, cm("after", "x"), namespace="default")
            ev = await asyncio.wait_for(anext(watch), DEADLINE)
            assert ev.type == "ADDED"
        finally:
            await watch.aclose()


async def test_gc_and_namespace_cleanup_on_every_replica_do_not_fight(shared_cluster: list[EtcdMember]) -> None:
    async with replicas(storage_url(shared_cluster), 3) as servers, contextlib.AsyncExitStack() as stack:
        ca, cb, cc = [await stack.enter_async_context(Client(s.url)) for s in servers]
        for policy in ("Background", "Foreground"):
            owner = await ca.create(CMS, cm(f"owner-{policy.lower()}", "o"), namespace="default")
            ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
                   "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}
            for i in range(15):
                body = cm(f"dep-{policy.lower()}-{i}", "d")
                body["metadata"]["ownerReferences"] = [ref]
                await [ca, cb][i % 2].create(CMS, body, namespace="default")
            await cc.delete(CMS, owner["metadata"]["name"], namespace="default", propagation_policy=policy)

            async def collected(policy: str = policy) -> bool:
                names = {o["metadata"]["name"] for o in (await cb.list(CMS, "default")).items}
                return not any(n.startswith((f"dep-{policy.lower()}", f"owner-{policy.lower()}")) for n in names)

            await wait_until(collected, what=f"{policy} deletion to collect the owner and its dependents",
                             timeout=DEADLINE)
        await ca.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}})
        for i in range(10):
            await cb.create(CMS, cm(f"c{i}", "x"), namespace="doomed")
        await cc.delete("namespaces", "doomed")

        async def ns_gone() -> bool:
            try:
                await ca.get("namespaces", "doomed")
            except APIError as exc:
                return exc.code == 404
            return False

        await wait_until(ns_gone, what="the terminating namespace to be emptied and removed", timeout=DEADLINE)
        for s in servers:
            await s.gc.wait_idle(DEADLINE)


async def test_revision_gaps_and_foreign_keys_do_not_stall_replicas(shared_cluster: list[EtcdMember]) -> None:
    """Writes outside ``/registry/`` (revision gaps) and junk keys under it: reads stay consistent and live."""
    from kinformer.server.storage import open_storage

    url = storage_url(shared_cluster)
    async with replicas(url, 2) as (a, b), Client(a.url) as ca, Client(b.url) as cb:
        foreign = open_storage(url)
        await foreign.start()
        try:
            await foreign.create("/registry/junk", b"not an object")
            for i in range(5):
                await foreign.create(f"/elsewhere/k{i}", b"x")  # revisions the watch caches never see
            rv = int((await cb.list(CMS, "default")).resource_version)  # consistent read across the gap
            assert rv >= await foreign.current_revision()
            created = await ca.create(CMS, cm("after-gap", "1"), namespace="default")
            got = await cb.list(CMS, "default")
            assert "after-gap" in {o["metadata"]["name"] for o in got.items}
            assert int(got.resource_version) >= int(created["metadata"]["resourceVersion"])
        finally:
            await foreign.close()


# -- faults --------------------------------------------------------------------------------------------


async def test_kill_etcd_member_and_server_replica_during_workload(own_cluster: list[EtcdMember]) -> None:
    """Informers behind a proxy that fails over to a survivor converge; no acknowledged write is lost."""
    from kinformer import SharedInformerFactory

    m0, _, _ = await _leader_first(own_cluster)  # killing the raft leader forces an election too
    async with replicas(storage_url(own_cluster), 3) as (a, b, c), \
            FaultProxy.for_url(a.url) as proxy, Client(proxy.url) as watcher_client, \
            Client(b.url) as cb, Client(c.url) as cc:
        factory = SharedInformerFactory(watcher_client, resync=0)
        inf = factory.informer(CMS)
        factory.start()
        manager = mirror_manager(watcher_client)
        manager_run = asyncio.create_task(manager.run())
        acked: dict[str, str] = {}
        unknown: dict[str, str] = {}
        count = [0]
        stop = asyncio.Event()
        try:
            await factory.wait_for_cache_sync()

            async def writer(w: int, cl: Client) -> None:
                i = 0
                while not stop.is_set():
                    name, value = f"w{w}-{i % 10}", str(i)
                    unknown[name] = value  # until acknowledged, this write may or may not be applied
                    try:
                        try:
                            await cl.create(CMS, cm(name, value), namespace="default")
                        except APIError as exc:
                            if exc.code != 409:
                                raise
                            await cl.patch(CMS, name, {"data": {"v": value}}, namespace="default")
                    except (APIError, aiohttp.ClientError, OSError, TimeoutError):
                        await asyncio.sleep(0.05)  # not acknowledged: may or may not have been applied
                        continue
                    acked[name] = value
                    del unknown[name]
                    count[0] += 1
                    i += 1
                    await asyncio.sleep(0)

            writers = [asyncio.create_task(writer(0, cb)), asyncio.create_task(writer(1, cc))]
            await wait_until(lambda: len(acked) >= 10, what="the workload to start", timeout=DEADLINE)
            m0.kill()
            n = count[0]
            await wait_until(lambda: count[0] >= n + 20, what="writes after the etcd member kill", timeout=DEADLINE)
            await a.stop()  # the informers' server replica dies; the proxy fails over like a load balancer
            proxy.target = ("127.0.0.1", b.port)
            proxy.drop_connections()
            n = count[0]
            await wait_until(lambda: count[0] >= n + 20, what="writes after the server kill", timeout=DEADLINE)
            stop.set()
            await asyncio.gather(*writers)

            truth = {o["metadata"]["name"]: o["data"]["v"] for o in (await cc.list(CMS, "default")).items
                     if o["metadata"]["name"] != "kube-root-ca.crt"}
            lost = {k: (v, truth.get(k)) for k, v in acked.items() if truth.get(k) not in (v, unknown.get(k))}
            assert not lost, f"acknowledged writes lost: {lost}"

            async def mirrored() -> bool:
                now = {o["metadata"]["name"]: o["data"]["v"] for o in (await cc.list(CMS, "default")).items
                       if o["metadata"]["name"] != "kube-root-ca.crt"}
                return all(now.get("mirror-" + k) == v for k, v in truth.items() if k.startswith("w"))

            await wait_until(mirrored, what="the controller to converge after the failover", timeout=DEADLINE)
            # the controller is done: now the whole namespace is at rest
            truth = {o["metadata"]["name"]: o["data"]["v"] for o in (await cc.list(CMS, "default")).items
                     if o["metadata"]["name"] != "kube-root-ca.crt"}

            def state() -> dict[str, str]:
                return {o["metadata"]["name"]: o["data"]["v"] for o in inf.indexer.list()
                        if o["metadata"]["name"] != "kube-root-ca.crt"}

            await wait_until(lambda: state() == truth, what="the informer to converge after the failover",
                             timeout=DEADLINE)
        finally:
            stop.set()
            manager.stop()
            await asyncio.gather(manager_run, return_exceptions=True)
            await factory.shutdown()


def mirror_manager(client: Client) -> Any:
    """A Manager whose controller keeps ``mirror-<name>`` a copy of each ``w*`` ConfigMap's data."""
    from kinformer.controller import Manager

    mgr = Manager(client, cache_sync_timeout=DEADLINE)
    informer = mgr.informer(CMS)

    async def reconcile(request: Any) -> None:
        obj = informer.indexer.get_by_key(request.key)
        if obj is None or not request.name.startswith("w"):
            return
        mirror = cm("mirror-" + request.name, obj["data"]["v"])
        try:
            await client.create(CMS, mirror, namespace=request.namespace)
        except APIError as exc:
            if exc.code != 409:
                raise
            await client.patch(CMS, mirror["metadata"]["name"], {"data": obj["data"]}, namespace=request.namespace)

    mgr.controller(reconcile, name="mirror").for_(CMS).workers(2)
    return mgr


async def test_manager_fence_stops_controllers_when_renewals_hang() -> None:
    """A leader whose Lease renewals hang stops reconciling at last renewal + renew_deadline."""
    from kinformer.controller import Manager
    from kinformer.controller.leaderelection import LeaderElectionConfig

    async with APIServer() as server, Client(server.url) as client:
        cfg = LeaderElectionConfig(lease_name="fence", identity="me", lease_duration=3.0, renew_deadline=1.0,
                                   retry_period=0.2)
        mgr = Manager(client, leader_election=cfg)
        reconciling = asyncio.Event()
        cancelled = asyncio.Event()

        async def reconcile(request: Any) -> None:
            reconciling.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

        mgr.controller(reconcile, name="hang").for_(CMS)
        run = asyncio.create_task(mgr.run())
        try:
            await client.create(CMS, cm("x", "1"), namespace="default")
            await asyncio.wait_for(reconciling.wait(), DEADLINE)
            hang = asyncio.Event()
            original = client.replace

            async def hanging_replace(*args: Any, **kw: Any) -> Any:
                if args and args[0] == "coordination.k8s.io/v1/leases":
                    await hang.wait()
                return await original(*args, **kw)

            client.replace = hanging_replace  # type: ignore[method-assign]
            t0 = time.monotonic()
            await asyncio.wait_for(cancelled.wait(), DEADLINE)
            assert time.monotonic() - t0 < cfg.lease_duration, "the fence must fire before the lease can expire"
            from kinformer.controller.manager import LeaderElectionLost

            with pytest.raises(LeaderElectionLost):
                await asyncio.wait_for(run, DEADLINE)
        finally:
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)


def test_replicated_demo_converges(shared_cluster: list[EtcdMember]) -> None:
    storage = "etcd://" + ",".join(m.endpoint for m in shared_cluster)
    proc = subprocess.run(
        [sys.executable, "-m", "kinformer.cli", "demo", "--plain", "--duration", "6", "--foos", "8",
         "--timeout", "60", "--replicas", "3", "--storage", storage],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "every Foo converged" in out
    assert "killed the leading manager" in out and "killed API server replica" in out
    leaders = re.search(r"leaders in turn: (.*)", out)
    assert leaders and "->" in leaders.group(1), out[-3000:]
