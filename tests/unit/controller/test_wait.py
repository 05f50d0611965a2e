"""wait_for: list+watch of one object, surviving dropped watches and 410 Gone, with a deadline."""

from __future__ import annotations

import asyncio

import pytest

import kinformer as ki
from kinformer.testing.faultproxy import FaultProxy
from testlib import configmap, wait_until

NS = "default"


def _value_is(value: str):
    return lambda cm: cm is not None and (cm.get("data") or {}).get("v") == value


async def test_returns_when_the_condition_holds(kube_client) -> None:
    await kube_client.create("configmaps", configmap("cm", v="1"), namespace=NS)
    await kube_client.create("configmaps", configmap("other", v="2"), namespace=NS)
    obj = await ki.wait_for(kube_client, "configmaps", "cm", _value_is("1"), namespace=NS, timeout=10)
    assert obj["metadata"]["name"] == "cm"
    waiter = asyncio.create_task(ki.wait_for(kube_client, "configmaps", "cm", _value_is("3"), namespace=NS,
                                             timeout=10))
    await kube_client.patch("configmaps", "other", {"data": {"v": "3"}}, namespace=NS)  # not the one watched
    await kube_client.patch("configmaps", "cm", {"data": {"v": "3"}}, namespace=NS)
    assert (await waiter)["data"]["v"] == "3"


async def test_waits_for_creation_and_deletion(kube_client) -> None:
    async def accepts_async(cm) -> bool:
        return cm is not None

    created = asyncio.create_task(ki.wait_for(kube_client, "configmaps", "late", accepts_async, namespace=NS))
    await asyncio.sleep(0.05)
    await kube_client.create("configmaps", configmap("late"), namespace=NS)
    assert (await created)["metadata"]["name"] == "late"
    gone = asyncio.create_task(ki.wait_for(kube_client, "configmaps", "late", lambda cm: cm is None,
                                           namespace=NS))
    await asyncio.sleep(0.05)
    await kube_client.delete("configmaps", "late", namespace=NS)
    assert await gone is None
    # cluster-scoped, already true
    assert await ki.wait_for(kube_client, "namespaces", "default", lambda ns: ns is not None, timeout=10)


async def test_times_out_with_a_clear_error(kube_client) -> None:
    await kube_client.create("configmaps", configmap("cm", v="1"), namespace=NS)
    with pytest.raises(TimeoutError, match=r"configmaps default/cm: condition not met within 0\.3s"):
        await ki.wait_for(kube_client, "configmaps", "cm", _value_is("never"), namespace=NS, timeout=0.3)


async def test_survives_dropped_watches_and_410(kube_server, kube_client) -> None:
    async with FaultProxy.for_url(kube_server.url) as proxy, ki.Client(proxy.url) as client:
        await kube_client.create("configmaps", configmap("cm", v="0"), namespace=NS)
        await client.resolve("configmaps")  # discovery before the faults: they are meant for the watch
        waiter = asyncio.create_task(ki.wait_for(client, "configmaps", "cm", _value_is("2"), namespace=NS,
                                                 timeout=30))
        await wait_until(lambda: proxy.connections >= 1, what="watch open")
        await asyncio.sleep(0.2)
        await kube_client.patch("configmaps", "cm", {"data": {"v": "1"}}, namespace=NS)
        proxy.drop_connections()  # the watch breaks mid-stream
        proxy.inject(410, times=1)  # and the next request (the re-watch or relist) is answered 410 Gone
        await kube_client.patch("configmaps", "cm", {"data": {"v": "2"}}, namespace=NS)
        assert (await waiter)["data"]["v"] == "2"
        assert proxy.faults["drop"] >= 1 and proxy.faults["http_410"] == 1
