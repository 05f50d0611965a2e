"""SharedInformerFactory over FakeClient."""

from __future__ import annotations

import asyncio

import pytest

import kinformer
from kinformer.cache.fake import FakeClient
from kinformer.clock import FakeClock
from kinformer.listwatch import ListOptions
from testlib import cm


async def test_same_key_same_informer_and_defaults() -> None:
    client = FakeClient()
    factory = kinformer.SharedInformerFactory(client, resync=30.0, namespace="default", clock=FakeClock())
    a = factory.informer("configmaps")
    assert factory.informer("configmaps") is a
    assert factory.informer("configmaps", namespace="default") is a
    other_ns = factory.informer("configmaps", namespace=None)
    selected = factory.informer("configmaps", label_selector="app=web")
    assert len({id(a), id(other_ns), id(selected)}) == 3
    assert client.calls == [("configmaps", "default", None, None), ("configmaps", None, None, None),
                            ("configmaps", "default", "app=web", None)]
    assert a._default_resync == 30.0
    assert factory.informer("secrets", resync=0)._default_resync == 0.0
    assert set(factory.informers) == {"configmaps[namespace=default]", "configmaps",
                                      "configmaps[namespace=default,labels=app=web]", "secrets[namespace=default]"}
    keys = factory.informers_by_key()
    assert keys[("configmaps", "default", "app=web", None, False)] is selected
    assert [key.label_selector for key, informer in keys.items() if informer is selected] == ["app=web"]


def test_an_informer_key_tells_which_namespaces_it_covers() -> None:
    factory = kinformer.SharedInformerFactory(FakeClient())
    factory.informer("configmaps", namespaces=["b", "a"])
    factory.informer("configmaps", namespace="a")
    factory.informer("configmaps", namespace=None)
    several, one, every = factory.informers_by_key()
    assert several.namespace == "a,b" and several.covers_namespace("b") and not several.covers_namespace("c")
    assert one.covers_namespace("a") and not one.covers_namespace("b") and one.covers_namespace(None)
    assert every.covers_namespace("c")


async def test_start_sync_restart_and_shutdown() -> None:
    client = FakeClient()
    cms = client.source("configmaps")
    cms.create(cm("a", app="web"))
    cms.create(cm("b", ns="other"))
    client.source("secrets").create(cm("s"))
    async with kinformer.SharedInformerFactory(client) as factory:
        web = factory.informer("configmaps", label_selector="app=web")
        all_cms = factory.informer("configmaps")
        factory.start()
        factory.start()
        synced = await factory.wait_for_cache_sync(timeout=5)
        assert synced == {"configmaps[labels=app=web]": True, "configmaps": True}
        assert web.indexer.list_keys() == ["default/a"]
        assert sorted(all_cms.indexer.list_keys()) == ["default/a", "other/b"]
        secrets = factory.informer("secrets")
        assert not secrets.is_started
        factory.start()
        synced = await factory.wait_for_cache_sync(timeout=5)
        assert synced["secrets"] and secrets.indexer.list_keys() == ["default/s"]
    assert all(inf.is_stopped for inf in factory.informers.values())
    with pytest.raises(RuntimeError):
        factory.informer("pods")


async def test_tweak_list_options_applies_to_list_and_watch() -> None:
    client = FakeClient()
    src = client.source("configmaps")
    src.create(cm("a", app="web"))
    src.create(cm("b", app="db"))

    def tweak(options: ListOptions) -> None:
        options.label_selector = "app=db"

    factory = kinformer.SharedInformerFactory(client, tweak_list_options=tweak)
    inf = factory.informer("configmaps")
    factory.start()
    try:
        assert (await factory.wait_for_cache_sync(5)) == {"configmaps": True}
        assert inf.indexer.list_keys() == ["default/b"]
        assert src.list_requests[0].label_selector == "app=db"
        await asyncio.sleep(0)
        assert all(w.label_selector == "app=db" for w in src.watch_requests)
    finally:
        await factory.shutdown()


async def test_wait_for_cache_sync_times_out() -> None:
    client = FakeClient()
    src = client.source("configmaps")
    clock = FakeClock()
    src.fail_next_list(ConnectionRefusedError("down"))
    factory = kinformer.SharedInformerFactory(client, clock=clock)
    factory.informer("configmaps")
    factory.start()
    try:
        assert await factory.wait_for_cache_sync(timeout=0.05) == {"configmaps": False}
        await clock.wait_for_waiters(1)
        clock.step(2)
        assert await factory.wait_for_cache_sync(timeout=5) == {"configmaps": True}
    finally:
        await factory.shutdown()


async def test_running_starts_informers_and_leaves_no_task_behind() -> None:
    client = FakeClient()
    client.source("configmaps").create(cm("a"))
    before = asyncio.all_tasks()
    factory = kinformer.SharedInformerFactory(client)
    cms = factory.informer("configmaps")
    empty = factory.informer("secrets")
    async with factory.running():
        assert cms.is_started and empty.is_started
        assert await factory.wait_for_cache_sync(5) == {"configmaps": True, "secrets": True}
        assert cms.indexer.get_by_key("default/a") is not None
        assert len(asyncio.all_tasks() - before) > 2  # informers, reflectors, handlers
    assert cms.is_stopped and empty.is_stopped
    assert asyncio.all_tasks() - before == set()


async def test_running_shuts_down_on_error_in_its_body() -> None:
    client = FakeClient()
    factory = kinformer.SharedInformerFactory(client)
    cms = factory.informer("configmaps")
    with pytest.raises(ValueError, match="body"):
        async with factory.running():
            assert await cms.wait_for_sync(5)
            raise ValueError("body")
    assert cms.is_stopped
    with pytest.raises(RuntimeError, match="shut down"):
        factory.start()
