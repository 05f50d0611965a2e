"""Authorization for the embedded API server: kube's request attributes, the authorizer chain, the 403 Status.

Invariants:

* Request attributes follow kube's ``RequestInfo``: the verb comes from the HTTP method, a GET on a
  collection is ``list`` (``watch`` with ``?watch=true`` or the ``/watch/`` prefix; a list or watch pinned
  to one name by ``fieldSelector=metadata.name=`` carries that name), a DELETE on a collection is
  ``deletecollection``; ``/api/v1`` and ``/apis/<group>/<version>`` alone are non-resource paths.
* The authorizer is RBAC (:mod:`kinformer.server.auth.rbac`), which allows ``system:masters`` everything first,
  as kube's privileged-group authorizer. A server without authentication configured makes every request
  the admin (in ``system:masters``), so only impersonated users and ServiceAccount tokens meet RBAC there.
* A denial is decided again after the authorizer caught up with the store, so a request right after the
  write of a Role or binding that allows it is allowed; a final denial is a 403 ``Forbidden`` Status worded
  as kube-apiserver words it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from ..machinery import status as st
from .authentication import ANONYMOUS, UserInfo

__all__ = ["ANONYMOUS", "RBAC_GROUP", "SUPERUSER_GROUP", "Authorizer", "RequestAttributes", "authorize_fresh",
           "forbidden", "parse_request", "request_attributes"]

SUPERUSER_GROUP = "system:masters"
RBAC_GROUP = "rbac.authorization.k8s.io"
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


# ------------------------------------------------------------------------------------------ enforcement


class Authorizer(Protocol):
    """What the middleware asks: (allowed, reason); the reason is appended to a denial's message."""

    def authorize(self, user: UserInfo, a: RequestAttributes) -> tuple[bool, str]: ...

    async def refresh(self) -> None:
        """Catch up with the store (so a denial is never due to a policy write not yet seen)."""
        ...


async def authorize_fresh(authorizer: Authorizer, user: UserInfo, a: RequestAttributes) -> tuple[bool, str]:
    """``authorizer.authorize``; a denial is re-decided once after :meth:`Authorizer.refresh`."""
    allowed, reason = authorizer.authorize(user, a)
    if not allowed:
        await authorizer.refresh()
        allowed, reason = authorizer.authorize(user, a)
    return allowed, reason


def forbidden(user: UserInfo, a: RequestAttributes, reason: str = "") -> st.StatusError:
    """The 403 kube-apiserver answers when ``user`` may not do ``a`` (``reason``: the authorizer's, if any)."""
    suffix = f": {reason}" if reason else ""
    if not a.resource_request:
        why = f'User "{user.name}" cannot {a.verb} path "{a.path}"{suffix}'
        return st.StatusError(403, "Forbidden", f"forbidden: {why}", details={})
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    where = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
    why = f'User "{user.name}" cannot {a.verb} resource "{resource}" in API group "{a.api_group}" {where}{suffix}'
    qualified = f"{a.resource}.{a.api_group}" if a.api_group else a.resource
    message = f'{qualified} "{a.name}" is forbidden: {why}' if a.name else f"{qualified} is forbidden: {why}"
    details: dict[str, Any] = {}
    if a.name:
        details["name"] = a.name
    if a.api_group:
        details["group"] = a.api_group
    details["kind"] = a.resource
    return st.StatusError(403, "Forbidden", message, details=details)
