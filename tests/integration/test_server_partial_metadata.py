"""PartialObjectMetadata answers of the embedded server (``Accept: ...;as=PartialObjectMetadata[List]``) for get,
list (pagination and selectors as for JSON) and watch, and 406 for a form a request cannot take."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from kinformer.server.endpoints.partial_metadata import negotiate_partial
from testlib import call

CM = "/api/v1/namespaces/default/configmaps"
AS_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
AS_OBJECT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


async def make(http: aiohttp.ClientSession, name: str, **labels: str) -> dict[str, Any]:
    body = {"metadata": {"name": name, "labels": labels, "annotations": {"note": name}}, "data": {"big": "x" * 500}}
    code, obj = await call(http, "POST", CM, body)
    assert code == 201, obj
    return obj


def test_negotiation_follows_q_and_falls_back_to_json() -> None:
    assert negotiate_partial("application/json") is None
    assert negotiate_partial(AS_LIST).kind == "PartialObjectMetadataList"
    assert negotiate_partial(f"{AS_OBJECT},application/json").version == "v1"
    assert negotiate_partial(f"application/json;q=0.9,{AS_OBJECT}").kind == "PartialObjectMetadata"
    assert negotiate_partial(f"application/json,{AS_OBJECT}") is None
    assert negotiate_partial("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v9") is None
    assert negotiate_partial("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1").version == "v1beta1"


async def test_list_and_get_as_partial_object_metadata(http: aiohttp.ClientSession) -> None:
    for i in range(3):
        await make(http, f"m{i}", app="web" if i else "db")
    async with http.get(CM, params={"labelSelector": "app=web", "limit": "1"}, headers={"Accept": AS_LIST}) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith(AS_LIST)
        page = await r.json(content_type=None)
    assert page["kind"] == "PartialObjectMetadataList" and page["apiVersion"] == "meta.k8s.io/v1"
    assert page["metadata"]["continue"] and int(page["metadata"]["resourceVersion"]) > 0
    [item] = page["items"]
    assert set(item) == {"kind", "apiVersion", "metadata"} and item["kind"] == "PartialObjectMetadata"
    assert item["metadata"]["name"] == "m1" and item["metadata"]["annotations"] == {"note": "m1"}
    async with http.get(CM, params={"continue": page["metadata"]["continue"]}, headers={"Accept": AS_LIST}) as r:
        rest = await r.json(content_type=None)
    assert [i["metadata"]["name"] for i in rest["items"]] == ["m2"]
    async with http.get(f"{CM}/m0", headers={"Accept": AS_OBJECT}) as r:
        obj = await r.json(content_type=None)
    assert obj["kind"] == "PartialObjectMetadata" and "data" not in obj and obj["metadata"]["uid"]
    async with http.get(f"{CM}/nope", headers={"Accept": AS_OBJECT}) as r:
        assert r.status == 404 and (await r.json())["kind"] == "Status"


async def test_a_form_the_request_cannot_take_is_406(http: aiohttp.ClientSession) -> None:
    await make(http, "only")
    async with http.get(CM, headers={"Accept": AS_OBJECT}) as r:
        assert r.status == 406 and (await r.json())["reason"] == "NotAcceptable"
    async with http.get(f"{CM}/only", headers={"Accept": AS_LIST}) as r:
        assert r.status == 406
    async with http.get(CM, headers={"Accept": f"{AS_OBJECT};q=0.5,application/json;q=0.9"}) as r:
        assert r.status == 200 and (await r.json())["kind"] == "ConfigMapList"


async def test_watch_as_partial_object_metadata(http: aiohttp.ClientSession) -> None:
    created = await make(http, "w0")
    rv = created["metadata"]["resourceVersion"]
    params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true"}
    async with http.get(CM, params=params, headers={"Accept": AS_OBJECT}) as r:
        assert r.status == 200
        await make(http, "w1")
        code, _ = await call(http, "DELETE", f"{CM}/w0")
        assert code == 200
        events = []
        async with asyncio.timeout(5):
            while len(events) < 2:
                events.append(json.loads(await r.content.readline()))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "w1"), ("DELETED", "w0")]
    assert all(set(e["object"]) == {"kind", "apiVersion", "metadata"} for e in events)
    assert events[0]["object"]["kind"] == "PartialObjectMetadata"
