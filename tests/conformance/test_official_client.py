"""The official ``kubernetes`` Python client against the embedded API server (CRUD, lists, watch resume, 410).

The client is synchronous, so each scenario runs in a worker thread while the server runs in the test's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

kubernetes = pytest.importorskip("kubernetes")

from kubernetes import client, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from kinformer.server import APIServer  # noqa: E402


@pytest.fixture
async def server():
    async with APIServer(compaction_interval=0, compaction_keep=0, watch_cache_size=4, namespace_defaults=False) as s:
        yield s


def core(server: APIServer) -> client.CoreV1Api:
    cfg = client.Configuration(host=server.url)
    return client.CoreV1Api(client.ApiClient(cfg))


async def in_thread(fn: Callable[[], Any]) -> Any:
    return await asyncio.wait_for(asyncio.to_thread(fn), timeout=30)


def cm(name: str, **labels: str) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels or None), data={"k": name})


async def test_crud(server):
    api = core(server)

    def scenario() -> None:
        created = api.create_namespaced_config_map("default", cm("a"))
        assert created.metadata.uid and created.metadata.resource_version
        with pytest.raises(ApiException) as exc:
            api.create_namespaced_config_map("default", cm("a"))
        assert exc.value.status == 409
        got = api.read_namespaced_config_map("a", "default")
        got.data["k"] = "changed"
        replaced = api.replace_namespaced_config_map("a", "default", got)
        assert replaced.data == {"k": "changed"}
        with pytest.raises(ApiException) as exc:
            api.replace_namespaced_config_map("a", "default", got)  # stale resourceVersion
        assert exc.value.status == 409
        patched = api.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"x": "y"}}})
        assert patched.metadata.labels == {"x": "y"}
        status = api.delete_namespaced_config_map("a", "default")
        status = status if isinstance(status, dict) else status.to_dict()
        assert status["status"] == "Success"
        with pytest.raises(ApiException) as exc:
            api.read_namespaced_config_map("a", "default")
        assert exc.value.status == 404
        ns = api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="official")))
        assert ns.status.phase == "Active"

    await in_thread(scenario)


async def test_list_selectors_and_pagination(server):
    api = core(server)

    def scenario() -> None:
        for i in range(5):
            api.create_namespaced_config_map("default", cm(f"c{i}", tier="a" if i % 2 else "b"))
        sel = api.list_namespaced_config_map("default", label_selector="tier=a")
        assert [o.metadata.name for o in sel.items] == ["c1", "c3"]
        names: list[str] = []
        token = None
        while True:
            page = api.list_namespaced_config_map("default", limit=2, _continue=token)
            names += [o.metadata.name for o in page.items]
            token = page.metadata._continue
            if not token:
                break
        assert names == [f"c{i}" for i in range(5)]
        with pytest.raises(ApiException) as exc:
            api.list_namespaced_config_map("default", label_selector="tier in (a")
        assert exc.value.status == 400

    await in_thread(scenario)


async def test_watch_resume_and_410(server):
    api = core(server)

    def first() -> str:
        for i in range(3):
            api.create_namespaced_config_map("default", cm(f"w{i}"))
        return api.list_namespaced_config_map("default").metadata.resource_version

    rv = await in_thread(first)

    def resume() -> list[tuple[str, str]]:
        api.create_namespaced_config_map("default", cm("after"))
        api.delete_namespaced_config_map("w0", "default")
        w = watch.Watch()
        seen = []
        for ev in w.stream(api.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=5):
            seen.append((ev["type"], ev["object"].metadata.name))
            if len(seen) == 2:
                w.stop()
        return seen

    assert await in_thread(resume) == [("ADDED", "after"), ("DELETED", "w0")]

    def churn() -> None:
        for i in range(10):
            api.create_namespaced_config_map("default", cm(f"x{i}"))

    await in_thread(churn)
    await server.compact()

    def expired() -> int:
        w = watch.Watch()
        try:
            for _ in w.stream(api.list_namespaced_config_map, "default", resource_version="1", timeout_seconds=5):
                pass
        except ApiException as e:
            return e.status
        return 0

    assert await in_thread(expired) == 410
