"""The resource API's router: the same answers as aiohttp's walk over path prefixes, found without it."""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from kinformer.server.endpoints.routing import ResourceRouter


async def _handler(request: web.Request) -> web.Response:
    return web.Response()


async def _other(request: web.Request) -> web.Response:
    return web.Response()


def _app(*extra: web.RouteDef) -> web.Application:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        app = web.Application(router=ResourceRouter())
    api, other = _handler, _other
    app.add_routes([web.route("*", "/api/{version}/{rest:.+}", api),
                    web.route("*", "/apis/{group}/{version}/{rest:.+}", api),
                    web.get("/api", other), web.get("/api/{version}", other),
                    web.get("/apis/{group}/{version}", other), web.get("/healthz", other),
                    web.post("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", other),
                    web.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", other),
                    *extra])
    app.freeze()
    return app


PATHS = ["/api/v1/namespaces/default/configmaps", "/healthz/", "/healthz/ping",
         "/api/v1/namespaces/default/configmaps/a",
         "/api/v1/namespaces", "/api/v1/namespaces/a/serviceaccounts/b/token", "/api/v1/namespaces/a/serviceaccounts/b",
         "/api/v1/watch/pods", "/api/v1", "/api/v1/", "/api", "/api/", "/apis/apps/v1/deployments",
         "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "/apis/authorization.k8s.io/v1/x",
         "/apis/apps/v1", "/apis/apps", "/api/v1/namespaces/a%2Fb/pods", "/api/v1/namespaces/a/pods/caf%C3%A9",
         "/healthz", "/nothing", "/api/v1/namespaces/a//pods",
         # the edges of the shadowing routes' buckets (a path's first segment after /api/ or /apis/)
         "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews/",
         "/apis/authorization.k8s.io/v1/selfsubjectaccessreviewsx",
         "/apis/authorization.k8s.iox/v1/selfsubjectaccessreviews", "/apis/authorization.k8s.io/",
         "/apis/authorization.k8s.io", "/apis//v1/x", "/api//v1/x", "/api/v1/namespaces/a/serviceaccounts/b/token/"]


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
@pytest.mark.parametrize("path", PATHS)
async def test_resolves_as_aiohttps_walk(path: str, method: str) -> None:
    app = _app()
    request = make_mocked_request(method, path, app=app)
    fast = await app.router.resolve(request)
    walked = await web.UrlDispatcher.resolve(app.router, request)
    assert (type(fast), fast.route if fast.http_exception is None else None, dict(fast)) == (
        type(walked), walked.route if walked.http_exception is None else None, dict(walked))
    if fast.http_exception is not None:
        assert type(fast.http_exception) is type(walked.http_exception)


async def test_a_route_under_a_longer_prefix_still_wins() -> None:
    app = _app(web.get("/api/v1/namespaces/{ns}/pods/{name}/log", _other),
               web.get("/apis/metrics.k8s.io/{rest:.*}", _other))
    for path in ("/api/v1/namespaces/a/pods/b/log", "/apis/metrics.k8s.io/v1beta1/pods", "/api/v1/namespaces/a/pods/b"):
        request = make_mocked_request("GET", path, app=app)
        fast = await app.router.resolve(request)
        assert fast.route is (await web.UrlDispatcher.resolve(app.router, request)).route
    shadowed = await app.router.resolve(make_mocked_request("GET", "/apis/metrics.k8s.io/v1beta1/pods", app=app))
    assert shadowed.route.resource is not None and shadowed.route.resource.canonical == "/apis/metrics.k8s.io/{rest}"


async def test_without_the_catch_all_routes_it_is_aiohttps_router() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        app = web.Application(router=ResourceRouter())
    app.add_routes([web.get("/api/{version}/{rest:.+}", _handler)])  # one method only: not the fast path
    app.freeze()
    post = await app.router.resolve(make_mocked_request("POST", "/api/v1/pods", app=app))
    assert isinstance(post.http_exception, web.HTTPMethodNotAllowed)


async def test_the_resource_api_is_found_without_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app()

    async def walk(self: web.UrlDispatcher, request: web.Request) -> web.UrlMappingMatchInfo:
        raise AssertionError("walked")

    monkeypatch.setattr(web.UrlDispatcher, "resolve", walk)
    for path in ("/api/v1/namespaces/default/configmaps/a", "/apis/apps/v1/namespaces/a/deployments"):
        found = await app.router.resolve(make_mocked_request("PUT", path, app=app))
        assert found.handler is _handler and found["rest"].startswith("namespaces/")
    for method, path in (("GET", "/healthz"), ("HEAD", "/healthz"), ("GET", "/api"),
                         ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")):
        found = await app.router.resolve(make_mocked_request(method, path, app=app))
        assert found.handler is _other and found.route.method == method
    with pytest.raises(AssertionError, match="walked"):  # the token route could match: aiohttp decides
        await app.router.resolve(make_mocked_request("POST", "/api/v1/namespaces/a/serviceaccounts/b/token", app=app))


async def test_every_request_passes_the_chain_even_without_a_route() -> None:
    seen: list[str] = []

    def wrap(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
             ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def chain(request: web.Request) -> web.StreamResponse:
            seen.append(f"{request.method} {request.path}")
            try:
                return await handler(request)
            except web.HTTPException as e:
                return web.Response(status=e.status, text="from the chain")

        return chain

    router = ResourceRouter(wrap)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        app = web.Application(router=router)
    app.add_routes([web.RouteDef("GET", "/healthz", router.behind(_other), {})])
    app.freeze()
    codes = []
    for method, path in (("GET", "/healthz"), ("GET", "/nothing"), ("POST", "/healthz")):
        request = make_mocked_request(method, path, app=app)
        codes.append((await (await router.resolve(request)).handler(request)).status)
    assert codes == [200, 404, 405]
    assert seen == ["GET /healthz", "GET /nothing", "POST /healthz"]


async def test_a_resolved_path_is_remembered_not_matched_again(monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app()
    path = "/api/v1/namespaces/default/configmaps"
    first = await app.router.resolve(make_mocked_request("POST", path, app=app))
    first["rest"] = "changed"  # a request's match info is its own: the memo keeps the path's match

    def matched_again(self: ResourceRouter, path: str) -> None:
        raise AssertionError("matched again")

    monkeypatch.setattr(ResourceRouter, "_fast_match", matched_again)
    again = await app.router.resolve(make_mocked_request("GET", path, app=app))
    assert again.handler is _handler and dict(again) == {"version": "v1", "rest": "namespaces/default/configmaps"}
    assert again is not first


async def test_the_memo_of_paths_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kinformer.server.endpoints.routing.MATCH_MEMO", 2)
    app = _app()
    for name in ("a", "b", "c", "d", "e"):
        request = make_mocked_request("GET", f"/api/v1/namespaces/default/configmaps/{name}", app=app)
        assert (await app.router.resolve(request))["rest"] == f"namespaces/default/configmaps/{name}"
        assert len(app.router._matched) <= 2
