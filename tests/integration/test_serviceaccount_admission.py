"""ServiceAccount admission: a new pod's account must exist; the default one is waited for, briefly."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from kinformer.server import APIServer
from kinformer.server.admission.serviceaccount import SA_PREFIX, ServiceAccountAdmission
from kinformer.server.machinery import status as st
from kinformer.server.storage.watchcache import CachedEvent, CachedObject
from testlib import call


def pod(name: str, account: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if account is not None:
        spec["serviceAccountName"] = account
    return {"metadata": {"name": name}, "spec": spec}


async def test_a_pod_naming_a_missing_account_is_forbidden_until_the_account_exists(http):
    code, err = await call(http, "POST", "/api/v1/namespaces/default/pods", pod("p1", "robot"))
    assert code == 403 and err["reason"] == "Forbidden"
    assert err["message"] == ('pods "p1" is forbidden: error looking up service account default/robot: '
                              'serviceaccount "robot" not found')
    assert err["details"] == {"name": "p1", "kind": "pods"}
    robot = {"metadata": {"name": "robot"}}
    assert (await call(http, "POST", "/api/v1/namespaces/default/serviceaccounts", robot))[0] == 201
    assert (await call(http, "POST", "/api/v1/namespaces/default/pods", pod("p1", "robot")))[0] == 201


async def test_without_namespace_defaults_the_default_account_is_not_required(http):
    assert (await call(http, "POST", "/api/v1/namespaces/default/pods", pod("p2")))[0] == 201


async def test_a_pod_in_a_brand_new_namespace_waits_for_its_default_account() -> None:
    import aiohttp

    async with APIServer("memory", compaction_interval=0) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        for i in range(5):
            ns = f"fresh-{i}"
            assert (await call(http, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}}))[0] == 201
            code, created = await call(http, "POST", f"/api/v1/namespaces/{ns}/pods", pod("p"))
            assert code == 201, created
            assert created["spec"]["serviceAccountName"] == "default"


def _cache() -> SimpleNamespace:
    listeners: list[Any] = []

    def add_listener(listener: Any, prefixes: Any = None) -> None:
        assert prefixes is None or SA_PREFIX in prefixes
        listeners.append(listener)

    return SimpleNamespace(buckets={}, listeners=listeners, add_listener=add_listener)


def _added(cache: SimpleNamespace, namespace: str, name: str) -> None:
    key = f"{SA_PREFIX}{namespace}/{name}"
    co = CachedObject(key, namespace, name, {"metadata": {"name": name, "namespace": namespace}}, b"{}", 1)
    cache.buckets.setdefault(SA_PREFIX, SimpleNamespace(objects={})).objects[key] = co
    for listener in cache.listeners:
        listener(SA_PREFIX, CachedEvent("ADDED", co, None))


async def test_the_wait_for_the_default_account_ends_on_its_arrival_or_at_its_deadline() -> None:
    cache = _cache()
    admission = ServiceAccountAdmission(cache, default_account_made=True, wait=30.0)  # type: ignore[arg-type]
    waiting = asyncio.create_task(admission.admit("ns", pod("p")))
    await asyncio.sleep(0)
    assert not waiting.done()
    _added(cache, "ns", "other")
    await asyncio.sleep(0)
    assert not waiting.done()
    _added(cache, "ns", "default")
    await asyncio.wait_for(waiting, 5)  # woken by the event, long before its 30 s deadline
    quick = ServiceAccountAdmission(_cache(), default_account_made=True, wait=0.01)  # type: ignore[arg-type]
    with pytest.raises(st.StatusError) as refused:
        await quick.admit("ns", pod("p"))
    assert refused.value.code == 403 and not quick._waiters
