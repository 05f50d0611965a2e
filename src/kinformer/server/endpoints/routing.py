"""Request routing of the resource API: a path under ``/api/v1`` or ``/apis/<group>/<version>`` to a :class:`Target`.

:class:`ResourceRouter` finds the resource API's route for aiohttp without its walk over every prefix of
the path; :func:`resolve_target` then parses the path after the group version.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_urldispatcher import MatchInfoError

from ..machinery import status as st
from ..registry.resources import GENERIC_SUBRESOURCES, Registry, ResourceInfo

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MATCH_MEMO = 4096  # paths whose catch-all match ResourceRouter remembers
Wrapper = Callable[[Handler], Handler]  # a handler -> that handler behind the handler chain


@dataclass(slots=True, frozen=True)
class Target:
    """What a request addresses: a resource, optionally a namespace, an object and a subresource.

    Frozen: one is shared by every request of its path (:meth:`.handlers.ResourceAPI.resolve`)."""

    info: ResourceInfo
    namespace: str
    name: str
    subresource: str
    watch: bool


def resolve_target(registry: Registry, group: str, version: str, rest: str,
                   kubelet: frozenset[str] = frozenset()) -> Target:
    """The :class:`Target` of the path ``rest`` under a group version; 404 for anything not served.
    ``kubelet`` names the kubelet subresources served (those the server's simulated kubelets answer)."""
    parts = rest.split("/")
    if parts and parts[-1] == "":
        parts.pop()
    watch = False
    if parts and parts[0] == "watch":
        watch = True
        parts = parts[1:]
    if not parts or "" in parts:
        raise st.route_not_found()
    namespace = ""
    if parts[0] == "namespaces" and len(parts) >= 3 and not (len(parts) == 3 and not group
                                                             and _namespace_subresource(registry, version, parts[2])):
        namespace = parts[1]
        parts = parts[2:]
        info = registry.get(group, version, parts[0])
        if info is None or not info.namespaced:
            raise st.route_not_found()
    else:
        info = registry.get(group, version, parts[0])
        if info is None:
            raise st.route_not_found()
        if info.namespaced and len(parts) > 1:
            raise st.route_not_found()
    sub = parts[2] if len(parts) > 2 else ""
    if len(parts) > 3 and sub != "proxy":
        raise st.route_not_found()
    name = parts[1] if len(parts) > 1 else ""
    if sub and sub not in info.subresources:
        raise st.route_not_found()
    if sub and sub not in GENERIC_SUBRESOURCES and sub not in kubelet:
        raise st.subresource_not_served(info, name, sub)
    return Target(info, namespace, name, sub, watch)


def _namespace_subresource(registry: Registry, version: str, name: str) -> bool:
    """Whether ``namespaces/<ns>/<name>`` of the core group names a subresource of a namespace (``finalize``)."""
    info = registry.get("", version, "namespaces")
    return info is not None and name in info.subresources


_WRITE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def request_verb(method: str, t: Target, watch_param: bool) -> str:
    """kube's verb for a request (get, list, watch, create, update, patch, delete, deletecollection)."""
    if method in ("GET", "HEAD"):
        if t.watch or (watch_param and not t.name):
            return "watch"
        return "get" if t.name else "list"
    if method == "DELETE":
        return "delete" if t.name else "deletecollection"
    return _WRITE_VERBS.get(method, method.lower())


def check_verb(t: Target, verb: str) -> None:
    """405 MethodNotAllowed unless the resource (or its subresource) serves ``verb``, as kube-apiserver answers.

    A namespaced custom resource is served across namespaces only to list and watch: any other verb on that path
    is a 404, as kube's custom resource handler passes a request whose scope differs from the CRD's to the
    not-found handler (a built-in resource's path answers 405 there, as kube's router does).
    """
    if (not t.info.builtin and t.info.namespaced and not t.namespace and verb not in ("list", "watch")):
        raise st.route_not_found()
    if t.subresource:
        sub = t.info.subresource(t.subresource)
        allowed = sub.verbs if sub is not None else ("get", "patch", "update")
    else:
        allowed = t.info.verbs
    if verb not in allowed:
        raise st.method_not_allowed()


class ResourceRouter(web.UrlDispatcher):
    """aiohttp's router, with exact paths and the resource API's catch-all routes found without its walk.

    aiohttp resolves a path by looking up each of its prefixes, longest first, among the routes' static
    prefixes, and tries the routes found there in registration order: for ``/api/v1/namespaces/a/pods/b``,
    six lookups and the routes under ``/api/v1/namespaces`` before ``/api/{version}/{rest}``. Here:

    * a path with a plain route of that very path (``/healthz``, ``/version``), when no route before it in
      aiohttp's order can match the path, is answered by one lookup when that route serves the method;
    * a path under ``/api/`` or ``/apis/`` (without ``%``, whose decoding stays aiohttp's) goes straight to
      the catch-all route once no route registered under a longer prefix of it could match it (a plain
      route: the same path; any other: its pattern matches).

    Invariant: :meth:`resolve` answers what aiohttp's walk answers; anything it cannot decide cheaply (a
    possible match of another route, sub-applications, routes of other kinds) is left to that walk. With a
    ``chain`` (what wraps a handler in the handler chain, :meth:`.filters.handlerchain.HandlerChain.wrapper`;
    :meth:`behind`), a path without a route (404) or without the method (405) is answered through the chain
    too. A path the catch-all matched is remembered with its match (at most :data:`MATCH_MEMO` paths,
    forgotten all at once beyond, and at each :meth:`freeze`): the routes cannot change once frozen, so the
    same path matches the same way again.
    """

    def __init__(self, chain: Wrapper | None = None) -> None:
        super().__init__()
        self._chain = chain
        self._exact: dict[str, dict[str, web.AbstractRoute]] = {}  # path -> method -> route
        # (path prefix, catch-all route, its pattern, [(prefix + "/", other route's exact path or pattern)])
        self._fast: list[tuple[str, web.AbstractRoute, re.Pattern[str], dict[str, list[tuple[str, Any]]]]] = []
        self._matched: dict[str, tuple[dict[str, str], web.AbstractRoute]] = {}  # path -> catch-all's match

    def behind(self, handler: Any) -> Any:
        """``handler`` run through the chain: what a route is registered with."""
        if self._chain is None:
            return handler
        return functools.update_wrapper(self._chain(handler), handler)

    def freeze(self) -> None:
        super().freeze()
        self._exact, self._fast, self._matched = {}, [], {}
        index: dict[str, list[web.AbstractResource]] = {}  # as aiohttp indexes the resources
        for res in self.resources():
            if type(res) not in (web.PlainResource, web.DynamicResource):
                return  # sub-applications, static files: aiohttp's walk decides
            canonical = res.canonical
            key = canonical.partition("{")[0].rstrip("/") or "/" if "{" in canonical else canonical
            index.setdefault(key, []).append(res)
        for key, resources in index.items():
            for res in resources:  # the first plain route of the path, unless a route before it may match
                if type(res) is web.PlainResource:
                    self._exact[key] = {route.method: route for route in res}
                    break
                if res.get_info()["pattern"].fullmatch(key) is not None:
                    break
        for key in ("/api", "/apis"):
            first = index.get(key, [None])[0]
            if not isinstance(first, web.DynamicResource):
                continue
            routes = list(first)
            if len(routes) != 1 or routes[0].method != "*":
                continue
            shadows: dict[str, list[tuple[str, Any]]] = {}  # by _head: the only ones a path of that head may meet
            for other, resources in index.items():
                if other.startswith(key + "/"):
                    for res in resources:
                        shadow = res.get_info()["path"] if type(res) is web.PlainResource else res.get_info()["pattern"]
                        shadows.setdefault(_head(other + "/", len(key) + 1), []).append((other + "/", shadow))
            self._fast.append((key + "/", routes[0], first.get_info()["pattern"], shadows))

    async def resolve(self, request: web.Request) -> web.UrlMappingMatchInfo:
        path = request.rel_url.path_safe
        matched = self._matched.get(path)
        if matched is not None:
            return web.UrlMappingMatchInfo(*matched)  # copies the match: the memo's stays as it is
        exact = self._exact.get(path)
        if exact is not None:
            route = exact.get(request.method) or exact.get("*")
            if route is not None:
                return web.UrlMappingMatchInfo({}, route)
        elif "%" not in path:
            matched = self._fast_match(path)
            if matched is not None:
                if len(self._matched) >= MATCH_MEMO:
                    self._matched.clear()
                self._matched[path] = matched
                return web.UrlMappingMatchInfo(*matched)
        found = await super().resolve(request)
        if self._chain is not None and isinstance(found, MatchInfoError):
            return _ChainedError(found.http_exception, self._chain)
        return found

    def _fast_match(self, path: str) -> tuple[dict[str, str], web.AbstractRoute] | None:
        """The catch-all route's match of ``path`` (and that route) when no other route may match it; else None."""
        for prefix, route, pattern, shadows in self._fast:
            if path.startswith(prefix):
                for shadow_prefix, shadow in shadows.get(_head(path, len(prefix)), ()):
                    if (path.startswith(shadow_prefix) or path == shadow_prefix[:-1]) and (
                            path == shadow if type(shadow) is str else shadow.fullmatch(path) is not None):
                        return None  # another route may match: aiohttp decides
                match = pattern.fullmatch(path)
                return (match.groupdict(), route) if match is not None else None
        return None


def _head(path: str, start: int) -> str:
    """``path`` up to the first ``/`` from ``start`` on, that ``/`` included (all of it and a ``/`` if none).

    A path that starts with ``p`` (``p`` ending in ``/``, its first ``/`` from ``start`` on included), or
    equals ``p`` without its last ``/``, has the head of ``p``: a route shadowing the catch-all only for
    such paths needs trying only for paths of its head.
    """
    end = path.find("/", start)
    return path + "/" if end < 0 else path[:end + 1]


class _ChainedError(MatchInfoError):
    """No route (404) or not this method (405), answered through the chain like any request."""

    __slots__ = ("_chain",)

    def __init__(self, http_exception: web.HTTPException, chain: Wrapper) -> None:
        super().__init__(http_exception)
        self._chain = chain

    @property
    def handler(self) -> Handler:
        return self._chain(super().handler)
