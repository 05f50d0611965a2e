"""A simple allow-only authorization policy for the embedded API server (RBAC-like).

A policy file (YAML or JSON) is a list of rules, or a mapping with a ``rules`` list::

    - user: alice                      # or users: [...], group: ..., groups: [...]
      verbs: [get, list, watch]        # get list watch create update patch delete deletecollection "*"
      resources: [configmaps, deployments.apps, pods/status, "*"]
      namespaces: [team-a]             # absent or "*": every namespace and cluster-scoped resources
    - group: monitoring
      verbs: [get]
      nonResourceURLs: [/metrics, "/debug/*"]

Invariants:

* A request is allowed when any rule naming its user, or one of its groups, matches it; nothing is
  ever denied explicitly. Every authenticated user is in ``system:authenticated``, an anonymous one is
  ``system:anonymous`` in ``system:unauthenticated``; members of ``system:masters`` are allowed
  everything (as kube's privileged group).
* Request attributes follow kube's ``RequestInfo``: the verb comes from the HTTP method, a GET on a
  collection is ``list`` (``watch`` with ``?watch=true`` or the ``/watch/`` prefix), a DELETE on a
  collection is ``deletecollection``; ``/api/v1`` and ``/apis/<group>/<version>`` alone are
  non-resource paths.
* Resource patterns: ``plural`` (core group), ``plural.group``, ``*`` (every resource and subresource
  in every group), ``*.group``, ``plural/sub``, ``plural/*`` (every subresource of plural) and
  ``*/sub``; a bare plural never matches its subresources.
* Discovery, OpenAPI, ``/version`` and the health paths are readable (``get``) by every authenticated
  user, like kube's ``system:discovery`` role; health and ``/version`` also anonymously.
* A denial is a 403 ``Forbidden`` Status worded as kube-apiserver words it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from . import status as st
from .auth import USER_KEY, UserInfo, is_public

__all__ = ["ANONYMOUS", "Policy", "RequestAttributes", "Rule", "authorization_middleware", "forbidden",
           "load_policy", "request_attributes"]

RESOURCE_VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"})
HTTP_VERBS = frozenset({"get", "head", "post", "put", "patch", "delete", "options"})
SUPERUSER_GROUP = "system:masters"
AUTHENTICATED_GROUP = "system:authenticated"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
ANONYMOUS = UserInfo(name="system:anonymous", groups=(UNAUTHENTICATED_GROUP,))
DISCOVERY_URLS = ("/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/",
                  "/healthz", "/healthz/*", "/livez", "/livez/*", "/readyz", "/readyz/*")
_RULE_KEYS = frozenset({"user", "users", "group", "groups", "verbs", "resources", "namespaces", "nonResourceURLs"})
_METHOD_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_NS_SUBRESOURCES = frozenset({"status", "finalize"})


# ------------------------------------------------------------------------------------------ request attributes


@dataclass(frozen=True, slots=True)
class RequestAttributes:
    """What a request asks to do, as kube's authorizer sees it (``resource_request`` False: a plain path)."""

    verb: str
    path: str
    resource_request: bool = False
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


def _selected_name(field_selector: str) -> str:
    """The name a field selector pins with ``metadata.name=`` / ``==`` (and nothing else on that field)."""
    found = ""
    for term in field_selector.split(","):
        field, sep, value = term.partition("==") if "==" in term else term.partition("=")
        if field.strip() == "metadata.name" and sep and not field.endswith("!"):
            if found:
                return ""
            found = value.strip()
    return found if found and "/" not in found and found not in (".", "..") else ""


def parse_request(method: str, path: str, query: Mapping[str, str]) -> RequestAttributes:
    """Kube's RequestInfo for ``method path?query`` (see the module invariants)."""
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) < 3 or parts[0] not in ("api", "apis") or (parts[0] == "apis" and len(parts) < 4):
        return RequestAttributes(verb=method.lower(), path=path)
    group = parts[1] if parts[0] == "apis" else ""
    rest = parts[3:] if parts[0] == "apis" else parts[2:]
    version = parts[2] if parts[0] == "apis" else parts[1]
    verb = _METHOD_VERBS.get(method, "")
    if rest[0] == "watch":
        if len(rest) < 2:
            return RequestAttributes(verb=method.lower(), path=path)
        verb, rest = "watch", rest[1:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NS_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        watch = query.get("watch")
        verb = "watch" if watch is not None and watch not in ("0", "false", "False", "FALSE") else "list"
        name = _selected_name(query.get("fieldSelector", ""))
    elif not name and verb == "delete":
        verb = "deletecollection"
    return RequestAttributes(verb=verb, path=path, resource_request=True, api_group=group, api_version=version,
                             namespace=namespace, resource=resource, subresource=sub, name=name)


# Where the parsed attributes are cached on the request: ``request[ATTRIBUTES_KEY]``.
ATTRIBUTES_KEY: Any = web.RequestKey("kinformer_request_attributes", RequestAttributes) \
    if hasattr(web, "RequestKey") else "kinformer_request_attributes"


def request_attributes(request: web.Request) -> RequestAttributes:
    """The request's :class:`RequestAttributes`, parsed once and cached on the request."""
    attrs = request.get(ATTRIBUTES_KEY)
    if attrs is None:
        attrs = request[ATTRIBUTES_KEY] = parse_request(request.method, request.path, request.query)
    return attrs


# ------------------------------------------------------------------------------------------ rules


@dataclass(frozen=True, slots=True)
class _ResourcePattern:
    """``plural``/``group`` are a name or "*"; ``sub`` is None (any, even none), "" (none), "*" (any) or a name."""

    plural: str
    group: str
    sub: str | None

    @classmethod
    def parse(cls, text: str) -> _ResourcePattern:
        head, slash, sub = text.partition("/")
        plural, dot, group = head.partition(".")
        if not plural or (slash and not sub) or (dot and not group) or "/" in sub:
            raise ValueError(f"invalid resource pattern {text!r}")
        if not dot:
            group = "*" if plural == "*" else ""
        return cls(plural, group, sub if slash else (None if plural == "*" else ""))

    def matches(self, a: RequestAttributes) -> bool:
        if self.group != "*" and self.group != a.api_group:
            return False
        if self.plural != "*" and self.plural != a.resource:
            return False
        sub = self.sub
        return sub is None or sub == a.subresource or (sub == "*" and a.subresource != "")


def _url_matches(pattern: str, path: str) -> bool:
    if pattern.endswith("*"):
        return path.startswith(pattern[:-1])
    return pattern == path


@dataclass(frozen=True, slots=True)
class Rule:
    """One allow rule: its subjects, verbs, and the resources (in ``namespaces``) or paths it grants."""

    users: frozenset[str]
    groups: frozenset[str]
    verbs: frozenset[str]
    resources: tuple[_ResourcePattern, ...] = ()
    namespaces: frozenset[str] | None = None  # None: every namespace and the cluster scope
    non_resource_urls: tuple[str, ...] = ()

    def matches(self, a: RequestAttributes) -> bool:
        if "*" not in self.verbs and a.verb not in self.verbs:
            return False
        if not a.resource_request:
            return any(_url_matches(p, a.path) for p in self.non_resource_urls)
        if self.namespaces is not None and a.namespace not in self.namespaces:
            return False
        return any(p.matches(a) for p in self.resources)


def _names(doc: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = doc.get(key)
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v for v in items):
        raise ValueError(f"{where}: {key} must be a non-empty string or a list of them")
    return items


def parse_rule(doc: Any, where: str = "rule") -> Rule:
    """Validate one rule document (see the module docstring); ``ValueError`` names what is wrong."""
    if not isinstance(doc, Mapping):
        raise ValueError(f"{where}: a rule must be a mapping")
    unknown = set(doc) - _RULE_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}")
    users = _names(doc, "user", where) + _names(doc, "users", where)
    groups = _names(doc, "group", where) + _names(doc, "groups", where)
    if not users and not groups:
        raise ValueError(f"{where}: a rule needs a user or a group")
    verbs = _names(doc, "verbs", where)
    if not verbs:
        raise ValueError(f"{where}: verbs must not be empty")
    bad = [v for v in verbs if v != "*" and v not in RESOURCE_VERBS | HTTP_VERBS]
    if bad:
        raise ValueError(f"{where}: unknown verb(s) {bad}")
    resources = tuple(_ResourcePattern.parse(r) for r in _names(doc, "resources", where))
    urls = tuple(_names(doc, "nonResourceURLs", where))
    if not resources and not urls:
        raise ValueError(f"{where}: a rule needs resources or nonResourceURLs")
    if any(not u.startswith("/") and u != "*" for u in urls):
        raise ValueError(f"{where}: nonResourceURLs must start with /")
    namespaces = _names(doc, "namespaces", where)
    ns = None if not namespaces or "*" in namespaces else frozenset(namespaces)
    return Rule(frozenset(users), frozenset(groups), frozenset(verbs), resources, ns, urls)


class Policy:
    """Rules indexed by subject; :meth:`allows` answers whether any rule grants a request."""

    __slots__ = ("_by_group", "_by_user", "rules")

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = tuple(rules)
        self._by_user: dict[str, list[Rule]] = {}
        self._by_group: dict[str, list[Rule]] = {}
        for rule in self.rules:
            for u in rule.users:
                self._by_user.setdefault(u, []).append(rule)
            for g in rule.groups:
                self._by_group.setdefault(g, []).append(rule)

    @classmethod
    def from_document(cls, doc: Any, source: str = "policy") -> Policy:
        """A policy from a parsed document: a list of rules or ``{"rules": [...]}``."""
        if isinstance(doc, Mapping) and set(doc) == {"rules"}:
            doc = doc["rules"]
        if doc is None:
            doc = []
        if not isinstance(doc, list):
            raise ValueError(f"{source}: expected a list of rules")
        return cls(parse_rule(r, f"{source}: rule {i}") for i, r in enumerate(doc))

    def allows(self, user: UserInfo, a: RequestAttributes) -> bool:
        groups = user.groups
        if SUPERUSER_GROUP in groups:
            return True
        authenticated = user is not ANONYMOUS
        if authenticated and a.verb == "get" and not a.resource_request \
                and any(_url_matches(p, a.path) for p in DISCOVERY_URLS):
            return True
        for rule in self._by_user.get(user.name, ()):
            if rule.matches(a):
                return True
        implicit = (AUTHENTICATED_GROUP,) if authenticated else ()
        for g in (*groups, *implicit):
            for rule in self._by_group.get(g, ()):
                if rule.matches(a):
                    return True
        return False


def load_policy(path: str | os.PathLike[str]) -> Policy:
    """Read a policy file: JSON when it ends in ``.json``, YAML otherwise. ``ValueError`` when it is invalid."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        doc = json.loads(text) if os.fspath(path).endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: not valid {'JSON' if os.fspath(path).endswith('.json') else 'YAML'}: {exc}"
                         ) from None
    return Policy.from_document(doc, os.fspath(path))


# ------------------------------------------------------------------------------------------ enforcement


def forbidden(user: UserInfo, a: RequestAttributes) -> st.StatusError:
    """The 403 kube-apiserver answers when ``user`` may not do ``a``."""
    if not a.resource_request:
        why = f'User "{user.name}" cannot {a.verb} path "{a.path}"'
        return st.StatusError(403, "Forbidden", f"forbidden: {why}", details={})
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    where = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
    why = f'User "{user.name}" cannot {a.verb} resource "{resource}" in API group "{a.api_group}" {where}'
    qualified = f"{a.resource}.{a.api_group}" if a.api_group else a.resource
    message = f'{qualified} "{a.name}" is forbidden: {why}' if a.name else f"{qualified} is forbidden: {why}"
    details: dict[str, Any] = {}
    if a.name:
        details["name"] = a.name
    if a.api_group:
        details["group"] = a.api_group
    details["kind"] = a.resource
    return st.StatusError(403, "Forbidden", message, details=details)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def authorization_middleware(policy: Policy) -> Callable[..., Awaitable[web.StreamResponse]]:
    """An aiohttp middleware answering 403 to requests ``policy`` does not allow (runs after authentication)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        user = request.get(USER_KEY) or ANONYMOUS
        if request.method in ("GET", "HEAD") and is_public(request.path):
            return await handler(request)
        attrs = request_attributes(request)
        if not policy.allows(user, attrs):
            return forbidden(user, attrs).response()
        return await handler(request)

    return middleware
