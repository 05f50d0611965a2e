"""User impersonation as kube-apiserver's impersonation filter does it (``kubectl --as`` / ``--as-group``).

Invariants:

* ``Impersonate-User`` (a ``system:serviceaccount:<ns>:<name>`` name means that ServiceAccount),
  ``Impersonate-Group`` (repeatable), ``Impersonate-Uid`` and ``Impersonate-Extra-<key>`` (key
  percent-decoded and lower-cased; repeatable) replace the authenticated user for the rest of the request.
* Each requested value needs the ``impersonate`` verb for the requesting user: ``users`` / ``groups`` (core
  group) with the name, ``serviceaccounts`` in the account's namespace, ``uids`` and ``userextras/<key>``
  (group ``authentication.k8s.io``) with the value; the first refusal is kube's 403.
* Groups, uid or extras without ``Impersonate-User`` are a 400 (kube answers 500 for that).
* Without ``Impersonate-Group`` a ServiceAccount gets its fixed groups; any impersonated user other than
  ``system:anonymous`` gets ``system:authenticated`` unless the groups already name it or
  ``system:unauthenticated``; ``system:anonymous`` gets ``system:unauthenticated``.
* Every impersonation is logged at INFO on ``kinformer.server.audit`` (who, as whom, method and path).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from urllib.parse import unquote

from aiohttp import web

from ..machinery import status as st
from .authentication import AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP, UserInfo
from .authorization import Authorizer, RequestAttributes, authorize_fresh, forbidden

audit = logging.getLogger("kinformer.server.audit")

__all__ = ["IMPERSONATOR_KEY", "asks_impersonation", "impersonation_hook"]

USER_HEADER = "Impersonate-User"
GROUP_HEADER = "Impersonate-Group"
UID_HEADER = "Impersonate-Uid"
EXTRA_PREFIX = "impersonate-extra-"
_SA_PREFIX = "system:serviceaccount:"
_MAX_VALUES = 100
# Who actually sent an impersonating request: ``request[IMPERSONATOR_KEY]``.
IMPERSONATOR_KEY = web.RequestKey("kinformer_impersonator", UserInfo) if hasattr(web, "RequestKey") \
    else "kinformer_impersonator"


def _attrs(resource: str, name: str, *, group: str = "", namespace: str = "", sub: str = "") -> RequestAttributes:
    return RequestAttributes(verb="impersonate", path="", resource_request=True, api_group=group, api_version="",
                             namespace=namespace, resource=resource, subresource=sub, name=name)


def asks_impersonation(request: web.Request) -> bool:
    """Whether the request has any ``Impersonate-*`` header (decided without decoding every header)."""
    for name, _ in request.raw_headers:
        if len(name) > 12 and name[:12].lower() == b"impersonate-":
            return True
    return False


def requested(request: web.Request) -> tuple[str, list[str], str, dict[str, list[str]]] | None:
    """(user, groups, uid, extra) the headers ask for; None when they ask nothing. 400 when inconsistent."""
    if not asks_impersonation(request):
        return None
    headers = request.headers
    user = headers.get(USER_HEADER, "")
    groups = headers.getall(GROUP_HEADER, [])
    uid = headers.get(UID_HEADER, "")
    extra: dict[str, list[str]] = {}
    for key, value in headers.items():
        if key.lower().startswith(EXTRA_PREFIX):
            extra.setdefault(unquote(key[len(EXTRA_PREFIX):]).lower(), []).append(value)
    if not (user or groups or uid or extra):
        return None
    if not user:
        raise st.bad_request("requested impersonation of groups, a uid or extra values without impersonating a user")
    if len(groups) + sum(len(v) for v in extra.values()) > _MAX_VALUES:
        raise st.bad_request(f"too many impersonation values (limit {_MAX_VALUES})")
    return user, groups, uid, extra


def impersonation_hook(authorizer: Authorizer) -> Callable[[web.Request, UserInfo], Awaitable[UserInfo]]:
    """The authentication middleware's impersonation step (see the module invariants)."""

    async def allow(user: UserInfo, a: RequestAttributes) -> None:
        ok, reason = await authorize_fresh(authorizer, user, a)
        if not ok:
            raise forbidden(user, a, reason)

    async def impersonate(request: web.Request, user: UserInfo) -> UserInfo:
        asked = requested(request)
        if asked is None:
            return user
        name, groups, uid, extra = asked
        if name.startswith(_SA_PREFIX) and name.count(":") == 3:
            ns, sa = name[len(_SA_PREFIX):].split(":")
            await allow(user, _attrs("serviceaccounts", sa, namespace=ns))
            if not groups:
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{ns}"]
        else:
            await allow(user, _attrs("users", name))
        for g in request.headers.getall(GROUP_HEADER, []):
            await allow(user, _attrs("groups", g))
        if uid:
            await allow(user, _attrs("uids", uid, group="authentication.k8s.io"))
        for key, values in extra.items():
            for v in values:
                await allow(user, _attrs("userextras", v, group="authentication.k8s.io", sub=key))
        if name == "system:anonymous":
            if UNAUTHENTICATED_GROUP not in groups:
                groups = [*groups, UNAUTHENTICATED_GROUP]
        elif AUTHENTICATED_GROUP not in groups and UNAUTHENTICATED_GROUP not in groups:
            groups = [*groups, AUTHENTICATED_GROUP]
        acting = UserInfo(name=name, uid=uid, groups=tuple(dict.fromkeys(groups)),
                          extra={k: tuple(v) for k, v in extra.items()})
        request[IMPERSONATOR_KEY] = user
        audit.info("%s is acting as %s (groups %s): %s %s", user.name, acting.name, list(acting.groups),
                   request.method, request.path)
        return acting

    return impersonate
