"""The client against small aiohttp stub servers on 127.0.0.1: retries, typed errors, auth refresh, TLS,
watch streams with huge lines, pagination, lister-watcher."""

from __future__ import annotations

import asyncio
import ssl
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import trustme
from aiohttp import web

from kinformer import errors
from kinformer.client import Client, LazyObject, Resource
from kinformer.clock import FakeClock
from kinformer.listwatch import ListerWatcher, ListOptions
from testlib import wait_until

CM = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)


def status(code: int, reason: str, message: str, **details: Any) -> dict:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


def cm(name: str, rv: str = "1", ns: str = "default", **data: str) -> dict:
    return {"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": rv}, "data": data}


async def test_retries_429_and_5xx_with_retry_after(serve: Callable[..., Any]) -> None:
    hits: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        hits.append(request.method)
        if len(hits) == 1:
            return web.json_response(status(429, "TooManyRequests", "slow down"), status=429,
                                     headers={"Retry-After": "2"})
        if len(hits) == 2:
            return web.json_response(status(503, "ServiceUnavailable", "busy"), status=503,
                                     headers={"Retry-After": "1"})
        return web.json_response(cm("a"), status=201 if request.method == "POST" else 200)

    app = web.Application()
    app.router.add_route("*", "/api/v1/namespaces/default/configmaps{tail:.*}", handler)
    url = await serve(app)
    clock = FakeClock()
    async with Client(url, clock=clock) as client:
        task = asyncio.create_task(client.create(CM, cm("a")))
        await clock.wait_for_waiters(1)
        assert clock.next_deadline() == clock.now() + 2  # honours Retry-After
        clock.step(2)
        await clock.wait_for_waiters(1)
        clock.step(1)
        obj = await asyncio.wait_for(task, 10)
    assert obj["metadata"]["name"] == "a" and hits == ["POST"] * 3


async def test_retry_budget_is_bounded_and_no_retry_without_retry_after(serve: Callable[..., Any]) -> None:
    hits = [0]

    async def always_429(request: web.Request) -> web.Response:
        hits[0] += 1
        return web.json_response(status(429, "TooManyRequests", "no"), status=429, headers={"Retry-After": "0"})

    async def plain_500(request: web.Request) -> web.Response:
        hits[0] += 1
        return web.json_response(status(500, "InternalError", "kaput"), status=500)

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/configmaps/a", always_429)
    app.router.add_get("/api/v1/namespaces/default/configmaps/b", plain_500)
    url = await serve(app)
    async with Client(url, max_retries=3) as client:
        with pytest.raises(errors.TooManyRequests) as exc:
            await client.get(CM, "a")
        assert exc.value.retry_after == 0 and hits[0] == 4
        hits[0] = 0
        with pytest.raises(errors.ServerError, match="kaput"):
            await client.get(CM, "b")
        assert hits[0] == 1


@pytest.mark.parametrize(("code", "reason", "cls"), [
    (400, "BadRequest", errors.BadRequest), (401, "Unauthorized", errors.Unauthorized),
    (403, "Forbidden", errors.Forbidden), (404, "NotFound", errors.NotFound),
    (409, "AlreadyExists", errors.AlreadyExists), (409, "Conflict", errors.Conflict),
    (410, "Expired", errors.Expired), (422, "Invalid", errors.Invalid),
    (500, "InternalError", errors.ServerError), (504, "Timeout", errors.ServerTimeout),
])
async def test_typed_errors_carry_status(serve: Callable[..., Any], code: int, reason: str, cls: type) -> None:
    causes = [{"reason": "FieldValueRequired", "message": "Required value", "field": "metadata.name"}]

    async def handler(request: web.Request) -> web.Response:
        return web.json_response(status(code, reason, f"the {reason}", name="x", causes=causes), status=code)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    url = await serve(app)
    async with Client(url) as client:
        with pytest.raises(cls) as exc:
            await client.get(CM, "x")
    err = exc.value
    assert err.code == code and err.reason == reason and err.message == f"the {reason}"
    assert err.causes == causes and err.status["details"]["name"] == "x"


async def test_non_status_error_body(serve: Callable[..., Any]) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=404, text="404 page not found")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    url = await serve(app)
    async with Client(url) as client:
        with pytest.raises(errors.NotFound, match="404 page not found"):
            await client.get(CM, "x")


async def test_401_refreshes_token_file_once(serve: Callable[..., Any], tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old")
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        seen.append(auth)
        if auth != "Bearer new-token":
            token.write_text("new-token")  # the kubelet rotated it meanwhile
            return web.json_response(status(401, "Unauthorized", "Unauthorized"), status=401)
        return web.json_response(cm("a"))

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    url = await serve(app)
    async with Client(url, token_file=str(token)) as client:
        assert (await client.get(CM, "a"))["metadata"]["name"] == "a"
    assert seen == ["Bearer old", "Bearer new-token"]


async def test_tls_with_client_certificate(serve: Callable[..., Any]) -> None:
    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1", "localhost")
    client_cert = ca.issue_cert("client@example")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_cert.configure_cert(server_ctx)
    ca.configure_trust(server_ctx)
    server_ctx.verify_mode = ssl.CERT_REQUIRED

    async def handler(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert")  # type: ignore[union-attr]
        subject = dict(x[0] for x in peer["subject"]) if peer.get("subject") else {}
        alt = [v for _, v in peer.get("subjectAltName", ())]
        return web.json_response(cm("tls", client=subject.get("commonName", "") or ",".join(alt)))

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    url = await serve(app, server_ctx)
    async with Client(url, ca=ca.cert_pem.bytes().decode(), client_cert=client_cert.cert_chain_pems[0].bytes(),
                      client_key=client_cert.private_key_pem.bytes()) as client:
        obj = await client.get(CM, "tls")
    assert "client@example" in obj["data"]["client"]
    # without the CA the server is not trusted
    async with Client(url, max_retries=0) as client:
        with pytest.raises(Exception, match=r"(?i)certificate"):
            await client.get(CM, "tls")
    # insecure-skip-tls-verify, with a client cert
    async with Client(url, verify=False, client_cert=client_cert.cert_chain_pems[0].bytes(),
                      client_key=client_cert.private_key_pem.bytes()) as client:
        assert (await client.get(CM, "tls"))["metadata"]["name"] == "tls"


CERT_PLUGIN = """
import json, sys
cert, key = open(sys.argv[1]).read(), open(sys.argv[2]).read()
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"clientCertificateData": cert, "clientKeyData": key}}))
"""


async def test_exec_plugin_client_certificate_over_tls(serve: Callable[..., Any], tmp_path: Path) -> None:
    from kinformer.client import ExecCredentialProvider

    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    ca.configure_trust(server_ctx)
    server_ctx.verify_mode = ssl.CERT_REQUIRED

    async def handler(request: web.Request) -> web.Response:
        return web.json_response(cm("via-exec-cert"))

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    url = await serve(app, server_ctx)
    leaf = ca.issue_cert("exec-user")
    leaf.cert_chain_pems[0].write_to_path(str(tmp_path / "c.pem"))
    leaf.private_key_pem.write_to_path(str(tmp_path / "k.pem"))
    (tmp_path / "plugin.py").write_text(CERT_PLUGIN)
    auth = ExecCredentialProvider({"command": sys.executable, "apiVersion": "client.authentication.k8s.io/v1",
                                   "args": [str(tmp_path / "plugin.py"), str(tmp_path / "c.pem"),
                                            str(tmp_path / "k.pem")]})
    async with Client(url, ca=ca.cert_pem.bytes().decode(), auth=auth) as client:
        assert (await client.get(CM, "x"))["metadata"]["name"] == "via-exec-cert"
    assert auth.provides_certificates and auth.runs == 1


def watch_handler(lines: list[bytes], chunk: int = 65536) -> Callable[[web.Request], Any]:
    async def handler(request: web.Request) -> web.StreamResponse:
        assert request.query["watch"] in ("true", "1")
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        data = b"".join(line + b"\n" for line in lines)
        for i in range(0, len(data), chunk):
            await resp.write(data[i:i + chunk])
        await resp.write_eof()
        return resp

    return handler


def watch_app(lines: list[bytes], chunk: int = 65536) -> web.Application:
    handler = watch_handler(lines, chunk)
    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/configmaps", handler)
    app.router.add_get("/api/v1/configmaps", handler)
    return app


async def test_watch_stream_with_huge_lines_and_clean_end(serve: Callable[..., Any]) -> None:
    events = [{"type": "ADDED", "object": cm("a", "1", v="x" * 3_000_000)},
              {"type": "MODIFIED", "object": cm("b", "2")},
              {"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
                                              "metadata": {"resourceVersion": "3"}}},
              {"type": "ERROR", "object": status(410, "Expired", "too old resource version: 1 (3)")}]
    url = await serve(watch_app([orjson.dumps(e) for e in events], chunk=7777))
    async with Client(url) as client:
        got = [e async for e in client.watch(CM, "default", resource_version="1", allow_watch_bookmarks=True)]
    assert [e.type for e in got] == ["ADDED", "MODIFIED", "BOOKMARK", "ERROR"]
    assert isinstance(got[0].object, LazyObject) and got[0].object == events[0]["object"]
    assert got[3].object["code"] == 410


async def test_watch_open_error_is_typed(serve: Callable[..., Any]) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(status(410, "Expired", "too old"), status=410)

    app = web.Application()
    app.router.add_get("/api/v1/configmaps", handler)
    url = await serve(app)
    async with Client(url) as client:
        agen = client.watch(CM, resource_version="5")
        with pytest.raises(errors.Expired):
            await agen.__anext__()
        await agen.aclose()


async def test_pagination_and_lister_watcher(serve: Callable[..., Any]) -> None:
    items = [cm(f"cm-{i:03d}", str(i)) for i in range(25)]
    queries: list[dict[str, str]] = []

    async def handler(request: web.Request) -> web.Response:
        q = dict(request.query)
        queries.append(q)
        if q.get("watch"):
            return await watch_handler([orjson.dumps({"type": "ADDED", "object": items[0]})])(request)
        start = int(q.get("continue", "0"))
        limit = int(q.get("limit", "1000"))
        page = items[start:start + limit]
        meta: dict[str, Any] = {"resourceVersion": "100"}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
            meta["remainingItemCount"] = len(items) - start - limit
        return web.json_response({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": meta,
                                  "items": [{k: v for k, v in it.items() if k not in ("kind", "apiVersion")}
                                            for it in page]})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/configmaps", handler)
    url = await serve(app)
    async with Client(url) as client:
        result = await client.list(CM, "default", limit=10, label_selector="app=x")
        assert [o["metadata"]["name"] for o in result.items] == [i["metadata"]["name"] for i in items]
        assert result.resource_version == "100" and all(o["kind"] == "ConfigMap" for o in result.items)
        assert [q.get("continue") for q in queries] == [None, "10", "20"]
        assert all(q["labelSelector"] == "app=x" and q["limit"] == "10" for q in queries)
        names = [o.name async for o in client.iter_list(CM, "default", limit=7)]
        assert len(names) == 25

        queries.clear()
        lw = client.lister_watcher(CM, namespace="default", label_selector="app=y")
        assert isinstance(lw, ListerWatcher)
        page = await lw.list(ListOptions(resource_version="0", limit=5))
        assert len(page.items) == 5 and page.continue_ == "5" and page.remaining_item_count == 20
        assert queries[-1] == {"resourceVersion": "0", "limit": "5", "labelSelector": "app=y"}
        agen = lw.watch(ListOptions(resource_version="100", allow_watch_bookmarks=True, timeout_seconds=30))
        events = [e async for e in agen]
        assert [e.object.name for e in events] == ["cm-000"]
        assert queries[-1] == {"resourceVersion": "100", "labelSelector": "app=y", "timeoutSeconds": "30",
                               "allowWatchBookmarks": "true", "watch": "true"}


async def test_get_is_retried_after_a_dropped_connection_but_writes_are_not(serve: Callable[..., Any]) -> None:
    hits: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        hits.append(request.method)
        if len(hits) in (1, 2, 4):  # aiohttp itself re-sends an idempotent request once
            assert request.transport is not None
            request.transport.close()  # drop the connection without an answer
            await asyncio.sleep(0)
        return web.json_response(cm("a"))

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    url = await serve(app)
    clock = FakeClock()
    async with Client(url, clock=clock) as client:
        task = asyncio.create_task(client.get(CM, "a"))
        await clock.wait_for_waiters(1)  # backing off before the retry
        clock.step(0.1)
        assert (await asyncio.wait_for(task, 10))["metadata"]["name"] == "a"
        assert hits == ["GET", "GET", "GET"]
        with pytest.raises(Exception):  # noqa: B017 - any transport error
            await client.create(CM, cm("b"))
        assert hits == ["GET", "GET", "GET", "POST"]


async def test_auto_falls_back_to_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kc = tmp_path / "kc"
    kc.write_text(orjson.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "team"}}]}).decode())
    monkeypatch.setenv("KUBECONFIG", str(kc))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    client = await Client.auto()
    assert client.url == "http://127.0.0.1:1" and client.default_namespace == "team"
    await client.close()


async def test_qps_throttle_waits_for_tokens(serve: Callable[..., Any]) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(cm("a"))

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    url = await serve(app)
    clock = FakeClock()
    async with Client(url, qps=2.0, burst=1, clock=clock) as client:
        await client.get(CM, "a")  # the burst token
        task = asyncio.create_task(client.get(CM, "a"))
        await clock.wait_for_waiters(1)
        assert clock.next_deadline() == pytest.approx(clock.now() + 0.5)
        clock.step(0.5)
        assert (await asyncio.wait_for(task, 10))["metadata"]["name"] == "a"


async def test_tls_server_name_overrides_the_verified_host(serve: Callable[..., Any]) -> None:
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("api.internal").configure_cert(server_ctx)

    async def handler(request: web.Request) -> web.Response:
        return web.json_response(cm("named"))

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    url = await serve(app, server_ctx)
    async with Client(url, ca=ca.cert_pem.bytes().decode(), max_retries=0) as client:
        with pytest.raises(Exception, match=r"(?i)certificate|hostname"):
            await client.get(CM, "x")  # the certificate does not name 127.0.0.1
        client.config.tls_server_name = "api.internal"
        assert (await client.get(CM, "x"))["metadata"]["name"] == "named"


async def test_every_attempt_is_counted_in_client_gos_rest_client_metrics(serve: Callable[..., Any]) -> None:
    from prometheus_client import REGISTRY

    calls = 0

    async def handler(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        if request.match_info["name"] == "missing":
            return web.json_response(status(404, "NotFound", "no"), status=404)
        if calls == 1:
            return web.json_response(status(503, "ServiceUnavailable", "busy"), status=503,
                                     headers={"Retry-After": "0"})
        return web.json_response(cm(request.match_info["name"]))

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/configmaps/{name}", handler)
    url = await serve(app)
    host = url.removeprefix("http://")

    def requests(code: str, method: str = "GET", where: str = host) -> float:
        return REGISTRY.get_sample_value("rest_client_requests_total",
                                         {"code": code, "method": method, "host": where}) or 0.0

    def durations() -> float:
        return REGISTRY.get_sample_value("rest_client_request_duration_seconds_count",
                                         {"verb": "GET", "host": host}) or 0.0

    # The registry is process-wide and an earlier test's server may have had this port: count what this test adds.
    counts_before = (requests("503"), requests("200"), requests("404"))
    durations_before = durations()
    async with Client(url) as client:
        await client.get(CM, "a")  # 503 then 200: two attempts
        with pytest.raises(errors.NotFound):
            await client.get(CM, "missing")
    counts = (requests("503"), requests("200"), requests("404"))
    assert tuple(now - then for now, then in zip(counts, counts_before, strict=True)) == (1.0, 1.0, 1.0)
    assert durations() - durations_before == 3

    before = requests("<error>", where="127.0.0.1:1")
    async with Client("http://127.0.0.1:1") as client:  # nothing listens on port 1: no response at all
        with pytest.raises(OSError):
            await client.get(CM, "a")
    assert requests("<error>", where="127.0.0.1:1") == before + 1


async def test_requests_inside_a_span_get_child_spans_and_carry_its_context(serve: Callable[..., Any],
                                                                           otel_spans: Any) -> None:
    from opentelemetry import trace

    traceparents: list[str | None] = []

    async def handler(request: web.Request) -> web.Response:
        traceparents.append(request.headers.get("traceparent"))
        if request.match_info["name"] == "missing":
            return web.json_response(status(404, "NotFound", "no"), status=404)
        return web.json_response(cm(request.match_info["name"]))

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/configmaps/{name}", handler)
    url = await serve(app)
    async with Client(url) as client:
        await client.get(CM, "outside")  # no recording span: no span, no header
        with trace.get_tracer("test").start_as_current_span("reconcile") as parent:
            await client.get(CM, "a")
            with pytest.raises(errors.NotFound):
                await client.get(CM, "missing")
    found, missing = [s for s in otel_spans.get_finished_spans() if s.name == "get configmaps"]
    assert dict(found.attributes) == {"verb": "get", "resource": "configmaps", "namespace": "default",
                                      "http.request.method": "GET", "http.response.status_code": 200}
    assert found.parent.span_id == parent.get_span_context().span_id
    assert missing.attributes["http.response.status_code"] == 404 and missing.status.status_code.name == "ERROR"
    trace_id = f"{parent.get_span_context().trace_id:032x}"
    assert traceparents[0] is None
    assert (traceparents[1] or "").startswith(f"00-{trace_id}-{found.context.span_id:016x}-")  # then the flags


async def test_pod_logs_whole_and_followed_line_by_line(serve: Callable[..., Any]) -> None:
    queries: list[dict[str, str]] = []
    more = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        queries.append(dict(request.query))
        if request.query.get("container") == "nope":
            return web.json_response(status(400, "BadRequest", "container nope is not valid for pod web"),
                                     status=400)
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        await resp.write(b"started\nlistening on ")
        if request.query.get("follow") == "true":
            await resp.write(b":80\n")
            await more.wait()  # the client has read the first lines before the container writes more
            await resp.write(b"GET /\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/pods/{name}/log", handler)
    url = await serve(app)
    async with Client(url) as client:
        assert await client.logs("web", "default", tail_lines=10, timestamps=True) == "started\nlistening on "
        followed = client.logs("web", "default", follow=True, container="web", since_seconds=30, previous=True)
        lines = [await anext(followed), await anext(followed)]
        more.set()
        lines += [line async for line in followed]
        with pytest.raises(errors.BadRequest, match="container nope is not valid"):
            await client.logs("web", "default", container="nope")
    assert lines == ["started", "listening on :80", "GET /"]
    assert queries[:2] == [{"tailLines": "10", "timestamps": "true"},
                           {"container": "web", "sinceSeconds": "30", "follow": "true", "previous": "true"}]


async def test_max_in_flight_bounds_ordinary_requests_and_their_connections(serve: Callable[..., Any]) -> None:
    """At most ``max_in_flight`` requests wait on the server at once (the rest take their turns, in order), so a
    burst opens no more connections than that; a watch holds no turn."""
    waiting: list[str] = []
    release = asyncio.Event()
    peers: set[Any] = set()

    async def handler(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        peers.add(request.transport.get_extra_info("peername"))
        if request.query.get("watch") == "true":
            resp = web.StreamResponse()
            await resp.prepare(request)
            await release.wait()
            return resp
        waiting.append(request.match_info["name"])
        await release.wait()
        return web.json_response(cm(request.match_info["name"]))

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/configmaps", handler)
    app.router.add_get("/api/v1/namespaces/default/configmaps/{name}", handler)
    url = await serve(app)
    async with Client(url, max_in_flight=2) as client:
        watch = asyncio.create_task(anext(client.watch(CM, "default"), None))
        gets = [asyncio.create_task(client.get(CM, f"cm-{i}")) for i in range(6)]
        await wait_until(lambda: len(waiting) == 2 and len(peers) == 3, what="two gets and the watch")
        release.set()
        names = [obj["metadata"]["name"] for obj in await asyncio.wait_for(asyncio.gather(*gets), 10)]
        assert names == [f"cm-{i}" for i in range(6)] and waiting == names  # turns taken in order
        assert len(peers) == 3  # the later gets reused the two connections
        assert await asyncio.wait_for(watch, 10) is None
    with pytest.raises(ValueError, match="max_in_flight must be >= 0"):
        Client(url, max_in_flight=-1)


async def test_a_request_backing_off_gives_its_turn_back(serve: Callable[..., Any]) -> None:
    """With one turn, a request sleeping out a Retry-After lets another through meanwhile, then takes a turn
    again for its retry."""
    hits: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        hits.append(name)
        if name == "slow" and hits.count("slow") == 1:
            return web.json_response(status(429, "TooManyRequests", "later"), status=429, headers={"Retry-After": "5"})
        return web.json_response(cm(name))

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/configmaps/{name}", handler)
    url = await serve(app)
    clock = FakeClock()
    async with Client(url, clock=clock, max_in_flight=1) as client:
        slow = asyncio.create_task(client.get(CM, "slow"))
        await clock.wait_for_waiters(1)  # backing off for 5 s
        assert (await asyncio.wait_for(client.get(CM, "fast"), 10))["metadata"]["name"] == "fast"
        clock.step(5)
        assert (await asyncio.wait_for(slow, 10))["metadata"]["name"] == "slow"
    assert hits == ["slow", "fast", "slow"]
