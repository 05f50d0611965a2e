"""List (pagination, resourceVersion rules, selectors) and watch (resume, initial events, bookmarks, 410) semantics."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from kinformer.clock import FakeClock
from kinformer.server import APIServer
from testlib import call

CM = "/api/v1/namespaces/default/configmaps"

# No default ServiceAccount / kube-root-ca.crt: these tests count the objects of a namespace.
BARE = {"namespace_defaults": False}


@pytest.fixture
async def server():
    async with APIServer(compaction_interval=0, compaction_keep=0, **BARE) as s:
        s.api.rv_wait = 0.3
        yield s


async def make(http: aiohttp.ClientSession, name: str, ns: str = "default", **labels: str) -> dict[str, Any]:
    code, obj = await call(http, "POST", f"/api/v1/namespaces/{ns}/configmaps",
                           {"metadata": {"name": name, "labels": labels}, "data": {"v": name}})
    assert code == 201, obj
    return obj


async def read_events(resp: aiohttp.ClientResponse, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while len(events) < n:
            line = await resp.content.readline()
            if not line:
                break
            events.append(json.loads(line))
    return events


async def read_to_end(resp: aiohttp.ClientResponse, timeout: float = 5.0) -> list[dict[str, Any]]:
    async with asyncio.timeout(timeout):
        data = await resp.read()
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def names(lst: dict[str, Any]) -> list[str]:
    return [o["metadata"]["name"] for o in lst["items"]]


async def test_pagination_is_a_consistent_snapshot(http):
    for i in range(7):
        await make(http, f"cm{i}")
    code, page = await call(http, "GET", CM, params={"limit": "3"})
    assert code == 200 and names(page) == ["cm0", "cm1", "cm2"]
    assert page["metadata"]["remainingItemCount"] == 4
    rv = page["metadata"]["resourceVersion"]
    await make(http, "cm05")  # sorts inside the remaining range but is newer than the snapshot
    seen = names(page)
    token = page["metadata"]["continue"]
    while token:
        code, page = await call(http, "GET", CM, params={"limit": "3", "continue": token})
        assert code == 200 and page["metadata"]["resourceVersion"] == rv
        seen += names(page)
        token = page["metadata"].get("continue")
    assert seen == [f"cm{i}" for i in range(7)]
    code, full = await call(http, "GET", CM)
    assert "cm05" in names(full) and "continue" not in full["metadata"]


async def test_expired_continue_token_gives_410_with_fresh_token(server, http):
    for i in range(5):
        await make(http, f"e{i}")
    code, page = await call(http, "GET", CM, params={"limit": "2"})
    token = page["metadata"]["continue"]
    await make(http, "e9")
    await server.compact()
    code, err = await call(http, "GET", CM, params={"limit": "2", "continue": token})
    assert code == 410 and err["reason"] == "Expired" and "continue parameter is too old" in err["message"]
    fresh = err["metadata"]["continue"]
    code, page = await call(http, "GET", CM, params={"limit": "10", "continue": fresh})
    assert code == 200 and names(page) == ["e2", "e3", "e4", "e9"]
    code, err = await call(http, "GET", CM, params={"continue": "garbage!"})
    assert code == 400


async def test_resource_version_rules(server, http):
    a = await make(http, "a")
    rv_a = a["metadata"]["resourceVersion"]
    await make(http, "b")
    code, lst = await call(http, "GET", CM, params={"resourceVersion": "0"})
    assert code == 200 and names(lst) == ["a", "b"]
    code, lst = await call(http, "GET", CM, params={"resourceVersion": rv_a, "resourceVersionMatch": "NotOlderThan"})
    assert code == 200 and names(lst) == ["a", "b"]
    code, lst = await call(http, "GET", CM, params={"resourceVersion": rv_a, "resourceVersionMatch": "Exact"})
    assert code == 200 and names(lst) == ["a"] and lst["metadata"]["resourceVersion"] == rv_a
    code, lst = await call(http, "GET", CM, params={"resourceVersion": rv_a, "limit": "10"})
    assert code == 200 and names(lst) == ["a"]  # N with a limit is an exact read
    code, err = await call(http, "GET", CM, params={"resourceVersion": rv_a, "resourceVersionMatch": "Bogus"})
    assert code == 422 and err["reason"] == "Invalid"
    code, err = await call(http, "GET", CM, params={"resourceVersionMatch": "NotOlderThan"})
    assert code == 422
    async with http.get(CM, params={"resourceVersion": "999999"}) as r:
        err = await r.json()
        assert r.status == 504 and r.headers["Retry-After"] == "1"
        assert err["reason"] == "Timeout" and err["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    await server.compact()
    code, err = await call(http, "GET", CM, params={"resourceVersion": rv_a, "resourceVersionMatch": "Exact"})
    assert code == 410 and err["reason"] == "Expired"
    code, got = await call(http, "GET", f"{CM}/a", params={"resourceVersion": "0"})
    assert code == 200 and got["metadata"]["name"] == "a"


async def test_selectors(http):
    await make(http, "web1", app="web", tier="front")
    await make(http, "web2", app="web", tier="back")
    await make(http, "db", app="db")
    await make(http, "other", "kube-system", app="web")
    cases = {"app=web": ["web1", "web2"], "app==web,tier!=back": ["web1"], "app in (db, x)": ["db"],
             "app notin (web)": ["db"], "tier": ["web1", "web2"], "!tier": ["db"]}
    for sel, want in cases.items():
        code, lst = await call(http, "GET", CM, params={"labelSelector": sel})
        assert code == 200 and names(lst) == want, sel
        assert "remainingItemCount" not in lst["metadata"]
    code, lst = await call(http, "GET", "/api/v1/configmaps", params={"labelSelector": "app=web"})
    assert sorted(names(lst)) == ["other", "web1", "web2"]
    code, lst = await call(http, "GET", "/api/v1/configmaps",
                           params={"fieldSelector": "metadata.namespace=kube-system"})
    assert names(lst) == ["other"]
    code, lst = await call(http, "GET", CM, params={"fieldSelector": "metadata.name!=db", "labelSelector": "app"})
    assert names(lst) == ["web1", "web2"]
    code, lst = await call(http, "GET", CM, params={"labelSelector": "app=web", "limit": "1"})
    assert names(lst) == ["web1"] and lst["metadata"]["continue"] and "remainingItemCount" not in lst["metadata"]
    code, err = await call(http, "GET", CM, params={"labelSelector": "app in (web"})
    assert code == 400 and err["reason"] == "BadRequest"
    code, err = await call(http, "GET", CM, params={"fieldSelector": "spec.x=1"})
    assert code == 400 and err["message"] == "field label not supported: spec.x"
    code, err = await call(http, "GET", f"{CM}?watch=1", params={"labelSelector": "=="})
    assert code == 400


async def test_shard_selector_splits_list_and_watch(http):
    """KEP-5866: two halves of the uid hash space list and watch disjoint shares that cover everything."""
    from kinformer.server.endpoints.shardselector import fnv1a64

    made = [await make(http, f"s{i}") for i in range(12)]
    halves = ["shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
              "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"]
    low = sorted(o["metadata"]["name"] for o in made if fnv1a64(o["metadata"]["uid"].encode()) < 2**63)
    listed = []
    for half in halves:
        code, lst = await call(http, "GET", CM, params={"shardSelector": half})
        assert code == 200
        listed.append(names(lst))
    assert sorted(listed[0]) == low and sorted(listed[0] + listed[1]) == sorted(o["metadata"]["name"] for o in made)
    code, lst = await call(http, "GET", CM, params={"shardSelector": " || ".join(halves)})
    assert len(names(lst)) == len(made)
    async with http.get(CM, params={"watch": "1", "resourceVersion": made[-1]["metadata"]["resourceVersion"],
                                    "shardSelector": halves[0]}) as resp:
        added = [await make(http, f"w{i}") for i in range(8)]
        want = [o["metadata"]["name"] for o in added if fnv1a64(o["metadata"]["uid"].encode()) < 2**63]
        events = await read_events(resp, len(want))
    assert [e["object"]["metadata"]["name"] for e in events] == want
    code, err = await call(http, "GET", CM, params={"shardSelector": "shardRange(object.metadata.name, '0x0', '0x1')"})
    assert code == 400 and err["reason"] == "BadRequest" and "unsupported field" in err["message"]


async def test_watch_from_resource_version_has_no_gaps(http):
    a = await make(http, "a")
    await make(http, "b")
    rv = a["metadata"]["resourceVersion"]
    async with http.get(CM, params={"watch": "true", "resourceVersion": rv}) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("application/json")
        await call(http, "PATCH", f"{CM}/a", {"data": {"v": "2"}}, ctype="application/merge-patch+json")
        await call(http, "DELETE", f"{CM}/b")
        events = await read_events(resp, 3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)
    assert all(e["object"]["kind"] == "ConfigMap" and e["object"]["apiVersion"] == "v1" for e in events)


async def test_watch_initial_events_and_selector_transitions(http):
    await make(http, "x", app="web")
    await make(http, "y", app="db")
    for rv in (None, "0"):
        params = {"watch": "1", "labelSelector": "app=web"}
        if rv is not None:
            params["resourceVersion"] = rv
        async with http.get(CM, params=params) as resp:
            first = await read_events(resp, 1)
            assert [(e["type"], e["object"]["metadata"]["name"]) for e in first] == [("ADDED", "x")]
    async with http.get(CM, params={"watch": "True", "labelSelector": "app=web"}) as resp:
        await read_events(resp, 1)
        await call(http, "PATCH", f"{CM}/y", {"metadata": {"labels": {"app": "web"}}},
                   ctype="application/merge-patch+json")
        await call(http, "PATCH", f"{CM}/x", {"metadata": {"labels": {"app": "gone"}}},
                   ctype="application/merge-patch+json")
        events = await read_events(resp, 2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "y"), ("DELETED", "x")]


async def test_send_initial_events_ends_with_bookmark(http):
    await make(http, "s1")
    await make(http, "s2")
    code, _err = await call(http, "GET", CM, params={"watch": "1", "sendInitialEvents": "true",
                                                    "resourceVersionMatch": "NotOlderThan", "resourceVersion": ""})
    assert code in (400, 422)
    params = {"watch": "1", "sendInitialEvents": "true", "allowWatchBookmarks": "true",
              "resourceVersionMatch": "NotOlderThan"}
    async with http.get(CM, params=params) as resp:
        events = await read_events(resp, 3)
        assert [e["type"] for e in events] == ["ADDED", "ADDED", "BOOKMARK"]
        mark = events[2]["object"]
        assert mark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert mark["kind"] == "ConfigMap" and mark["apiVersion"] == "v1"
        await make(http, "s3")
        live = await read_events(resp, 1)
        assert live[0]["type"] == "ADDED" and live[0]["object"]["metadata"]["name"] == "s3"
        assert int(live[0]["object"]["metadata"]["resourceVersion"]) > int(mark["metadata"]["resourceVersion"])


async def test_bookmarks_only_on_request():
    clock = FakeClock()
    async with APIServer(compaction_interval=0, bookmark_interval=60.0, clock=clock, **BARE) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        await make(http, "bm")
        async with http.get(CM, params={"watch": "1", "resourceVersion": "0", "allowWatchBookmarks": "true"}) as r1, \
                http.get(CM, params={"watch": "1", "resourceVersion": "0"}) as r2:
            assert (await read_events(r1, 1))[0]["type"] == "ADDED"
            assert (await read_events(r2, 1))[0]["type"] == "ADDED"
            await clock.wait_for_waiters(3)  # r1: deadline + ticker; r2: deadline
            clock.step(61)
            mark = (await read_events(r1, 1))[0]
            assert mark["type"] == "BOOKMARK" and int(mark["object"]["metadata"]["resourceVersion"]) >= 1
            assert set(mark["object"]["metadata"]) == {"resourceVersion"}
            await make(http, "bm2")
            assert [e["type"] for e in await read_events(r2, 1)] == ["ADDED"]  # r2 got no bookmark


async def test_watch_timeout_closes_cleanly():
    clock = FakeClock()
    async with APIServer(compaction_interval=0, clock=clock, **BARE) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        async with http.get(CM, params={"watch": "1", "timeoutSeconds": "30"}) as resp:
            await clock.wait_for_waiters(1)
            clock.step(31)
            assert await read_to_end(resp) == []


async def test_watch_too_old_resource_version_gets_410_error():
    async with APIServer(compaction_interval=0, compaction_keep=2, watch_cache_size=2, **BARE) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        objs = [await make(http, f"o{i}") for i in range(8)]
        # Outside the 2-event ring but still in storage history: served from history, no gap.
        rv = objs[3]["metadata"]["resourceVersion"]
        async with http.get(CM, params={"watch": "1", "resourceVersion": rv}) as resp:
            events = await read_events(resp, 4)
            assert [e["object"]["metadata"]["name"] for e in events] == ["o4", "o5", "o6", "o7"]
        await server.compact()
        async with http.get(CM, params={"watch": "1", "resourceVersion": objs[0]["metadata"]["resourceVersion"]}) as r:
            assert r.status == 200
            events = await read_to_end(r)
        assert len(events) == 1 and events[0]["type"] == "ERROR"
        status = events[0]["object"]
        assert status["kind"] == "Status" and status["code"] == 410 and status["reason"] == "Expired"
        assert status["message"].startswith("too old resource version: ")


async def test_watch_single_object_and_cluster_scoped(http):
    await make(http, "one")
    await make(http, "two")
    async with http.get(CM, params={"watch": "1", "fieldSelector": "metadata.name=two"}) as resp:
        events = await read_events(resp, 1)
        assert events[0]["object"]["metadata"]["name"] == "two"
    async with http.get("/api/v1/namespaces", params={"watch": "1", "resourceVersion": "0"}) as resp:
        events = await read_events(resp, 4)
        assert {e["object"]["metadata"]["name"] for e in events} >= {"default", "kube-system"}


async def test_disconnected_idle_watch_is_released(server):
    bucket = server.cache.bucket("/registry/core/configmaps/")
    async with aiohttp.ClientSession(base_url=server.url) as http:
        resp = await http.get(CM, params={"watch": "1", "resourceVersion": "0"})
        assert resp.status == 200
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while not bucket.watchers:
            assert loop.time() < deadline
            await asyncio.sleep(0.01)
        resp.close()
    deadline = loop.time() + 5
    while bucket.watchers:
        assert loop.time() < deadline, "watch handler still subscribed after its client left"
        await asyncio.sleep(0.05)


async def test_stop_ends_open_watches():
    server = APIServer(compaction_interval=0, **BARE)
    await server.start()
    async with aiohttp.ClientSession(base_url=server.url) as http:
        resp = await http.get(CM, params={"watch": "1", "resourceVersion": "0"})
        assert resp.status == 200
        await asyncio.wait_for(server.stop(), 5)
        assert await read_to_end(resp) == []  # the stream ends cleanly
        resp.close()


async def test_watch_under_concurrent_writes_sees_every_change_once(http):
    _, lst = await call(http, "GET", CM)
    rv = lst["metadata"]["resourceVersion"]
    async with http.get(CM, params={"watch": "1", "resourceVersion": rv}) as resp:
        async def writer(w: int) -> None:
            for i in range(15):
                await make(http, f"w{w}-{i}")

        await asyncio.gather(*(writer(w) for w in range(8)))
        events = await read_events(resp, 120, timeout=10)
    assert len(events) == 120 and all(e["type"] == "ADDED" for e in events)
    assert sorted(e["object"]["metadata"]["name"] for e in events) == sorted(
        f"w{w}-{i}" for w in range(8) for i in range(15))
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(set(rvs))


async def test_history_served_watch_sends_requested_bookmarks():
    clock = FakeClock()
    async with APIServer(compaction_interval=0, watch_cache_size=1, bookmark_interval=60.0, clock=clock,
                         **BARE) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        objs = [await make(http, f"h{i}") for i in range(4)]
        rv = objs[0]["metadata"]["resourceVersion"]  # older than the 1-event ring: served from storage history
        async with http.get(CM, params={"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "1"}) as resp:
            events = await read_events(resp, 3)
            assert [e["object"]["metadata"]["name"] for e in events] == ["h1", "h2", "h3"]
            await clock.wait_for_waiters(2)
            clock.step(61)
            mark = (await read_events(resp, 1))[0]
            assert mark["type"] == "BOOKMARK"
            assert mark["object"]["metadata"]["resourceVersion"] == objs[3]["metadata"]["resourceVersion"]


async def test_consistent_reads_survive_revisions_outside_registry(server, http):
    await make(http, "g1")
    await server.storage.create("/elsewhere/key", b"{}")  # a write the watch cache never sees as an event
    code, lst = await call(http, "GET", CM)
    assert code == 200 and names(lst) == ["g1"]
    assert int(lst["metadata"]["resourceVersion"]) == await server.storage.current_revision()
    code, lst = await call(http, "GET", CM, params={"resourceVersion": lst["metadata"]["resourceVersion"],
                                                    "resourceVersionMatch": "NotOlderThan"})
    assert code == 200 and names(lst) == ["g1"]
    await make(http, "g2")
    code, lst = await call(http, "GET", CM)
    assert names(lst) == ["g1", "g2"]


async def test_watch_paths_serve_get_only(server, http):
    """``/watch/`` paths answer only GET: every other method is a 405 MethodNotAllowed Status, nothing written."""
    await make(http, "keep")
    before = await server.storage.current_revision()
    paths = ["/api/v1/watch/namespaces/default/configmaps", "/api/v1/watch/namespaces/default/configmaps/keep",
             "/apis/apps/v1/watch/namespaces/default/deployments", "/api/v1/watch/namespaces"]
    body = {"metadata": {"name": "made-through-watch"}, "data": {"v": "x"}}
    for path in paths:
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            code, status = await call(http, method, path, body)
            assert (code, status["kind"], status["reason"]) == (405, "Status", "MethodNotAllowed"), (method, path)
        async with http.head(path) as resp:
            assert resp.status == 405, path
    assert await server.storage.current_revision() == before
    code, lst = await call(http, "GET", CM)
    assert names(lst) == ["keep"]
    async with http.get("/api/v1/watch/namespaces/default/configmaps", params={"timeoutSeconds": "1"}) as resp:
        assert resp.status == 200
        assert [e["object"]["metadata"]["name"] for e in await read_events(resp, 1)] == ["keep"]


async def test_watch_selector_exit_sends_previous_object(server, http):
    """A watcher with a label selector must get, on exit, an object that still matches its selector."""
    code, obj = await call(http, "POST", CM, {"metadata": {"name": "a", "labels": {"app": "x"}}})
    assert code == 201
    rv = obj["metadata"]["resourceVersion"]
    params = {"watch": "1", "resourceVersion": rv, "labelSelector": "app=x", "timeoutSeconds": "5"}
    async with http.get(CM, params=params) as resp:
        code, patched = await call(http, "PATCH", f"{CM}/a", {"metadata": {"labels": {"app": "y"}}},
                                   ctype="application/merge-patch+json")
        assert code == 200
        async with asyncio.timeout(5):
            ev = json.loads(await resp.content.readline())
    assert ev["type"] == "DELETED"
    assert ev["object"]["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    assert ev["object"]["metadata"]["labels"] == {"app": "x"}


async def test_watch_timeout_seconds_must_be_a_non_negative_integer(server, http):
    for bad in ("1.5", "-1", "soon"):
        code, body = await call(http, "GET", CM, params={"watch": "1", "timeoutSeconds": bad})
        assert code == 400, (bad, body)


async def test_continue_token_with_wrong_field_types_is_400(server, http):
    import base64

    for payload in ({"v": "meta.k8s.io/v1", "rv": "5", "start": "a"}, {"v": "meta.k8s.io/v1", "rv": 5, "start": 1}):
        token = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")
        code, body = await call(http, "GET", CM, params={"limit": "1", "continue": token})
        assert code == 400, (payload, body)


async def test_query_parameter_edge_cases_answer_as_kube_apiserver(server, http):
    """Integers as Go parses them (int64 / uint64, no spaces or underscores), a negative limit as no limit,
    ``a in ()`` as ``a in ("")``; every refusal a 400 Status, none a 5xx."""
    await make(http, "x", a="")
    await make(http, "y", a="1")
    await make(http, "z")
    for params in ({"limit": "-1"}, {"limit": "+2"}, {"limit": "9223372036854775807"}):
        code, lst = await call(http, "GET", CM, params=params)
        assert code == 200 and names(lst)[:2] == ["x", "y"], params
    code, lst = await call(http, "GET", CM, params={"labelSelector": "a in ()"})
    assert code == 200 and names(lst) == ["x"]
    code, lst = await call(http, "GET", CM, params={"labelSelector": "a notin ()"})
    assert code == 200 and names(lst) == ["y", "z"]
    refused = [{"limit": "9223372036854775808"}, {"limit": "1_0"}, {"limit": " 5"}, {"limit": "٣"},
               {"resourceVersion": "18446744073709551616"}, {"resourceVersion": "+5"}, {"resourceVersion": "-1"},
               {"resourceVersion": "1_0"}, {"resourceVersion": "٣"}, {"resourceVersion": "9" * 5000},
               {"watch": "1", "timeoutSeconds": "99999999999999999999"}, {"watch": "1", "timeoutSeconds": "-1"},
               {"labelSelector": "a in (", "limit": "1"}]
    for params in refused:
        code, status = await call(http, "GET", CM, params=params)
        assert (code, status["reason"]) == (400, "BadRequest"), params
        assert len(status["message"]) < 200, params
    code, status = await call(http, "GET", f"{CM}/x", params={"resourceVersion": "18446744073709551616"})
    assert code == 400
    code, status = await call(http, "GET", CM, params={"resourceVersion": "18446744073709551615"})
    assert (code, status["reason"]) == (504, "Timeout")  # a valid resourceVersion the server has not reached
