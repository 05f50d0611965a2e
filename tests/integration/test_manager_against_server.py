"""Controllers end to end against the embedded API server (through kinformer.testing's fixtures)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from kinformer.controller import (
    GenerationChanged,
    LeaderElectionConfig,
    LeaderElectionLost,
    Manager,
    Request,
    Result,
    TerminalError,
)
from kinformer.errors import NotFound
from testlib import configmap, running, wait_until


async def test_reconcile_outcomes_against_server(kube_client) -> None:
    calls: Counter[str] = Counter()

    async def reconcile(req: Request) -> Result:
        calls[req.name] += 1
        n = calls[req.name]
        if req.name == "fails-twice" and n <= 2:
            raise RuntimeError("transient")
        if req.name == "terminal":
            raise TerminalError("cannot fix")
        if req.name == "requeue" and n == 1:
            return Result(requeue=True)
        if req.name == "after" and n == 1:
            return Result(requeue_after=0.3)
        return Result()

    mgr = Manager(kube_client)
    builder = mgr.controller(reconcile, name="outcomes").for_("configmaps").workers(2)
    for name in ("fails-twice", "terminal", "requeue", "after", "plain"):
        await kube_client.create("configmaps", configmap(name), namespace="default")
    async with running(mgr):
        await wait_until(lambda: calls["fails-twice"] == 3 and calls["requeue"] == 2 and calls["after"] == 2
                         and calls["plain"] >= 1 and calls["terminal"] >= 1, what="all outcomes")
        stats = builder.controller.stats
        assert stats.errors >= 2 and stats.terminal_errors == 1
        await asyncio.sleep(0.3)
        assert calls["terminal"] == 1, "a terminal error must not be retried"


async def test_owner_enqueue_and_predicates(kube_client) -> None:
    seen: list[Request] = []
    mgr = Manager(kube_client)
    mgr.controller(lambda req: seen.append(req), name="owners") \
        .for_("apps/v1/deployments", GenerationChanged()).owns("configmaps")
    dep = await kube_client.create("apps/v1/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}, namespace="default")
    owned = configmap("web-config")
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                             "uid": dep["metadata"]["uid"], "controller": True}]
    async with running(mgr):
        await wait_until(lambda: Request("default", "web") in seen, what="initial reconcile")
        seen.clear()
        await kube_client.create("configmaps", owned, namespace="default")
        await wait_until(lambda: Request("default", "web") in seen, what="owner enqueued by owned object")
        assert Request("default", "web-config") not in seen
        seen.clear()
        # A metadata-only change does not bump generation: filtered by GenerationChanged.
        await kube_client.patch("apps/v1/deployments", "web", {"metadata": {"labels": {"x": "y"}}},
                                namespace="default")
        await kube_client.patch("configmaps", "web-config", {"data": {"k": "v"}}, namespace="default")
        await wait_until(lambda: seen, what="owned change")
        await asyncio.sleep(0.2)
        assert seen.count(Request("default", "web")) == 1


async def test_resync_reconciles_unchanged_objects(kube_client) -> None:
    calls: Counter[str] = Counter()
    mgr = Manager(kube_client, resync=1.0)
    mgr.controller(lambda req: calls.update([req.name]), name="resync").for_("configmaps", GenerationChanged())
    await kube_client.create("configmaps", configmap("steady"), namespace="default")
    async with running(mgr):
        await wait_until(lambda: calls["steady"] >= 3, timeout=20, what="resyncs reaching the reconciler")


async def test_two_managers_leader_election_failover(kube_client) -> None:
    active: dict[str, int] = {"a": 0, "b": 0}
    both = []

    def make(identity: str) -> Manager:
        cfg = LeaderElectionConfig(lease_name="ctrl-lock", lease_namespace="default", identity=identity,
                                   lease_duration=3.0, renew_deadline=2.0, retry_period=0.5)
        mgr = Manager(kube_client, leader_election=cfg)

        async def reconcile(req: Request) -> None:
            active[identity] += 1
            if sum(1 for m in managers if m.elector is not None and m.elector.leading.is_set()) > 1:
                both.append((identity, req))

        mgr.controller(reconcile, name=f"le-{identity}").for_("configmaps")
        return mgr

    managers: list[Manager] = []
    a = make("a")
    managers.append(a)
    await kube_client.create("configmaps", configmap("x1"), namespace="default")
    task_a = asyncio.create_task(a.run())
    await wait_until(lambda: active["a"] >= 1, what="a leads and reconciles")
    b = make("b")
    managers.append(b)
    task_b = asyncio.create_task(b.run())
    await asyncio.sleep(1.0)
    assert active["b"] == 0 and not b.elector.leading.is_set()
    # Kill a without releasing the lease: b must wait for it to expire, then take over.
    a.elector.config.release_on_cancel = False  # the running copy (Manager leaves the caller's config alone)
    task_a.cancel()
    await asyncio.gather(task_a, return_exceptions=True)
    loop = asyncio.get_running_loop()
    killed = loop.time()
    await kube_client.create("configmaps", configmap("x2"), namespace="default")
    await wait_until(lambda: active["b"] >= 2, what="b takes over")
    assert loop.time() - killed <= 3.0 + 2.0, "takeover must happen within about one lease duration"
    assert not both
    lease = await kube_client.get("coordination.k8s.io/v1/leases", "ctrl-lock", namespace="default")
    assert lease["spec"]["holderIdentity"] == "b"
    b.stop()
    await asyncio.wait_for(asyncio.gather(task_b, return_exceptions=True), 30)
    lease = await kube_client.get("coordination.k8s.io/v1/leases", "ctrl-lock", namespace="default")
    assert lease["spec"]["holderIdentity"] == "", "a stopped leader releases its lease"


async def test_losing_the_lease_stops_the_manager(kube_client) -> None:
    cfg = LeaderElectionConfig(lease_name="lost", lease_namespace="default", identity="me",
                               lease_duration=3.0, renew_deadline=2.0, retry_period=0.5)
    mgr = Manager(kube_client, leader_election=cfg)
    mgr.controller(lambda req: None, name="lost").for_("configmaps")
    task = asyncio.create_task(mgr.run())
    await wait_until(lambda: mgr.elector is not None and mgr.elector.leading.is_set(), what="leading")
    # Another party takes the lease by force (as if our renewals had stopped reaching the server).
    lease = await kube_client.get("coordination.k8s.io/v1/leases", "lost", namespace="default")
    body = lease.to_dict() if hasattr(lease, "to_dict") else dict(lease)
    body["spec"]["holderIdentity"] = "intruder"
    body["spec"]["leaseDurationSeconds"] = 3600
    await kube_client.replace("coordination.k8s.io/v1/leases", body, namespace="default")
    with pytest.raises(LeaderElectionLost):
        await asyncio.wait_for(task, 15)
    assert cfg.on_started_leading is None, "the Manager runs a copy of the caller's config"


async def test_manager_serves_health_and_metrics(kube_client) -> None:
    import aiohttp

    mgr = Manager(kube_client, health_bind="127.0.0.1:0")
    mgr.controller(lambda req: None, name="metrics-demo").for_("configmaps")
    await kube_client.create("configmaps", configmap("m1"), namespace="default")
    async with running(mgr), aiohttp.ClientSession() as s:
        async with s.get(mgr.health_url + "/readyz") as r:
            assert r.status == 200
        await wait_until(lambda: mgr.controllers[0].stats.reconciles >= 1, what="a reconcile")
        async with s.get(mgr.health_url + "/metrics") as r:
            text = await r.text()
    assert 'controller_runtime_reconcile_total{controller="metrics-demo",result="success"}' in text
    assert "workqueue_adds_total" in text and "controller_runtime_max_concurrent_reconciles" in text
    assert 'kinformer_informer_events_total{informer="configmaps",type="ADDED"}' in text
    assert 'kinformer_informer_cache_objects{informer="configmaps"}' in text
    assert "kinformer_informer_handler_pending_notifications" in text


async def test_readyz_fails_while_an_informer_is_stale_and_names_it(kube_client) -> None:
    import aiohttp

    from kinformer.clock import FakeClock

    clock = FakeClock()
    mgr = Manager(kube_client, health_bind="127.0.0.1:0", clock=clock, stale_after=300.0)
    mgr.controller(lambda req: None, name="stale").for_("configmaps")
    async with running(mgr), aiohttp.ClientSession() as s:
        await wait_until(lambda: mgr.ready(), what="ready")
        async with s.get(mgr.health_url + "/readyz") as r:
            assert r.status == 200
        clock.step(301)  # nothing heard for 301 s (the idle watch is reopened meanwhile, which is no news)
        async with s.get(mgr.health_url + "/readyz") as r:
            assert r.status == 503 and "configmaps: nothing for 301s" in await r.text()
        async with s.get(mgr.health_url + "/metrics") as r:
            text = await r.text()
            assert "kinformer_informer_seconds_since_last_event{informer=\"configmaps\"}" in text, text[-3000:]
        await kube_client.create("configmaps", configmap("news"), namespace="default")
        await wait_until(lambda: not mgr.stale_informers(), what="an event")
        async with s.get(mgr.health_url + "/readyz") as r:
            assert r.status == 200


async def test_deleted_object_reaches_reconciler(kube_client) -> None:
    gone: list[str] = []
    mgr = Manager(kube_client)
    informer = mgr.informer("configmaps")

    async def reconcile(req: Request) -> None:
        if informer.indexer.get_by_key(req.key) is None:
            gone.append(req.name)

    mgr.controller(reconcile, name="deletes").for_("configmaps")
    await kube_client.create("configmaps", configmap("doomed"), namespace="default")
    async with running(mgr):
        await kube_client.delete("configmaps", "doomed", namespace="default")
        await wait_until(lambda: "doomed" in gone, what="delete reconciled")
    with pytest.raises(NotFound):
        await kube_client.get("configmaps", "doomed", namespace="default")


async def test_secure_metrics_need_a_token_the_server_authenticates_and_authorizes() -> None:
    import aiohttp

    from kinformer.client import Client
    from kinformer.clock import FakeClock
    from kinformer.server import APIServer
    from kinformer.server.auth.authentication import UserInfo

    tokens = {"admin": UserInfo("admin", groups=("system:masters",)), "scraper": UserInfo("scraper", uid="u1"),
              "nobody": UserInfo("nobody")}
    clock = FakeClock()
    async with APIServer(tokens=tokens, namespace_defaults=False) as server, \
            Client(server.url, token="admin") as admin, aiohttp.ClientSession() as s:
        rbac = "rbac.authorization.k8s.io/v1"
        await admin.create(f"{rbac}/clusterroles", {"metadata": {"name": "metrics-reader"}, "rules": [
            {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]})
        await admin.create(f"{rbac}/clusterrolebindings", {
            "metadata": {"name": "scraper-reads-metrics"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "scraper"}]})
        mgr = Manager(admin, health_bind="127.0.0.1:0", metrics_secure=True, clock=clock)
        mgr.controller(lambda req: None, name="secure").for_("configmaps")

        async def scrape(token: str | None, path: str = "/metrics") -> tuple[int, str]:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            async with s.get(mgr.health_url + path, headers=headers) as r:
                return r.status, await r.text()

        async with running(mgr):
            await wait_until(mgr.ready, what="ready")
            assert await scrape(None) == (401, "Unauthorized")
            assert await scrape("not-a-token") == (401, "Unauthorized")
            assert await scrape("nobody") == (403, "Authorization denied for user nobody")
            code, text = await scrape("scraper")
            assert code == 200 and "controller_runtime_reconcile_total" in text
            assert (await scrape(None, "/readyz"))[0] == 200  # the probes stay open to the kubelet
            # answers are cached: the grant withdrawn, the scraper keeps access until the allow cache expires
            await admin.delete(f"{rbac}/clusterrolebindings", "scraper-reads-metrics")
            assert (await scrape("scraper"))[0] == 200
            clock.step(301)
            assert (await scrape("scraper"))[0] == 403


async def test_metrics_are_secured_by_default_in_a_cluster_only(kube_client, monkeypatch) -> None:
    from kinformer.client import incluster

    assert Manager(kube_client).metrics_auth is None
    monkeypatch.setattr(incluster, "is_in_cluster", lambda: True)
    assert Manager(kube_client).metrics_auth is not None
    assert Manager(kube_client, metrics_secure=False).metrics_auth is None
