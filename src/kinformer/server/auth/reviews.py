"""The review APIs: authorization.k8s.io/v1 access and rules reviews, authentication.k8s.io/v1 self and token reviews.

Invariants:

* Every review is a create-only virtual resource: ``POST`` answers ``201`` with the request object and its
  ``status`` filled in, nothing is stored, any other method is ``405``.
* Who may create a review is decided before, by the authorization middleware (the bootstrap policy gives
  every authenticated user the self reviews, ``system:auth-delegator`` the subject and token reviews).
* Access reviews ask the same authorizer requests meet, so ``kubectl auth can-i`` answers what a request
  would get. A SubjectAccessReview names a user or a group (422 otherwise); a LocalSubjectAccessReview's
  resourceAttributes namespace must be its own (400 otherwise).
* A SelfSubjectRulesReview lists the RBAC rules that apply in ``spec.namespace`` (privileged groups first
  get every permission, as kube's union authorizer lists them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from ..endpoints.bodies import content_type, decode_object, parse_document, read_body
from ..endpoints.responses import json_response
from ..machinery import status as st
from .authentication import ANONYMOUS, USER_KEY, Authenticator, InvalidToken, UserInfo
from .authorization import SUPERUSER_GROUP, RequestAttributes, authorize_fresh
from .rbac import RBACAuthorizer
from .serviceaccount import TokenIssuer

__all__ = ["Reviews", "attributes_of"]

AUTHZ = "authorization.k8s.io"
AUTHN = "authentication.k8s.io"
_Handler = Callable[[web.Request, dict[str, Any]], Awaitable[dict[str, Any]]]


def _invalid(kind: str, group: str, field: str, message: str) -> st.StatusError:
    return st.StatusError(422, "Invalid", f'{kind}.{group} "" is invalid: {field}: {message}',
                          details={"group": group, "kind": kind,
                                   "causes": [{"reason": "FieldValueInvalid", "field": field, "message": message}]})


def attributes_of(kind: str, spec: Mapping[str, Any]) -> RequestAttributes:
    """The request an access review asks about (422 unless exactly one kind of attributes is given)."""
    ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if bool(ra) == bool(nra) or not isinstance(ra or nra, Mapping):
        raise _invalid(kind, AUTHZ, "spec.resourceAttributes",
                       "Invalid value: exactly one of nonResourceAttributes or resourceAttributes must be specified")

    def text(doc: Mapping[str, Any] | None, key: str) -> str:
        value = (doc or {}).get(key)
        return value if isinstance(value, str) else ""

    if nra:
        return RequestAttributes(verb=text(nra, "verb"), path=text(nra, "path"))
    return RequestAttributes(verb=text(ra, "verb"), path="", resource_request=True, api_group=text(ra, "group"),
                             api_version=text(ra, "version"), namespace=text(ra, "namespace"),
                             resource=text(ra, "resource"), subresource=text(ra, "subresource"), name=text(ra, "name"))


def _user_of_spec(spec: Mapping[str, Any]) -> UserInfo:
    user, groups = spec.get("user") or "", spec.get("groups") or []
    extra = spec.get("extra") or {}
    if not isinstance(user, str) or not isinstance(spec.get("uid") or "", str):
        raise _invalid("SubjectAccessReview", AUTHZ, "spec.user", "Invalid value: must be a string")
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise _invalid("SubjectAccessReview", AUTHZ, "spec.groups", "Invalid value: must be a list of strings")
    if not isinstance(extra, Mapping) or not all(isinstance(v, list) and all(isinstance(x, str) for x in v)
                                                 for v in extra.values()):
        raise _invalid("SubjectAccessReview", AUTHZ, "spec.extra",
                       "Invalid value: must map keys to lists of strings")
    if not user and not groups:
        raise _invalid("SubjectAccessReview", AUTHZ, "spec.user",
                       'Invalid value: "": at least one of user or group must be specified')
    return UserInfo(name=user, uid=spec.get("uid") or "", groups=tuple(groups),
                    extra={k: tuple(v) for k, v in extra.items()})


class Reviews:
    """The review endpoints of one server (see the module invariants)."""

    def __init__(self, authorizer: RBACAuthorizer, authenticator: Authenticator, issuer: TokenIssuer) -> None:
        self.authorizer = authorizer
        self.authenticator = authenticator
        self.issuer = issuer

    async def _decide(self, user: UserInfo, a: RequestAttributes) -> dict[str, Any]:
        if SUPERUSER_GROUP in user.groups:
            return {"allowed": True}
        allowed, reason = await authorize_fresh(self.authorizer, user, a)
        if allowed:
            reason = self.authorizer.explain(user, a)
        status: dict[str, Any] = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        return status

    async def self_access(self, request: web.Request, doc: dict[str, Any]) -> dict[str, Any]:
        a = attributes_of("SelfSubjectAccessReview", doc["spec"])
        return await self._decide(request.get(USER_KEY) or ANONYMOUS, a)

    async def subject_access(self, request: web.Request, doc: dict[str, Any]) -> dict[str, Any]:
        a = attributes_of("SubjectAccessReview", doc["spec"])
        return await self._decide(_user_of_spec(doc["spec"]), a)

    async def local_access(self, request: web.Request, doc: dict[str, Any]) -> dict[str, Any]:
        ns = request.match_info["namespace"]
        spec = doc["spec"]
        if spec.get("nonResourceAttributes"):
            raise _invalid("LocalSubjectAccessReview", AUTHZ, "spec.nonResourceAttributes",
                           "Invalid value: disallowed on this kind of request")
        a = attributes_of("LocalSubjectAccessReview", spec)
        if a.namespace != ns:
            raise st.bad_request(f"spec.resourceAttributes.namespace must match namespace: {ns}")
        doc["metadata"]["namespace"] = ns
        return await self._decide(_user_of_spec(spec), a)

    async def self_rules(self, request: web.Request, doc: dict[str, Any]) -> dict[str, Any]:
        user = request.get(USER_KEY) or ANONYMOUS
        ns = doc["spec"].get("namespace") or ""
        resource_rules: list[dict[str, Any]] = []
        url_rules: list[dict[str, Any]] = []
        if SUPERUSER_GROUP in user.groups:
            resource_rules.append({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
            url_rules.append({"verbs": ["*"], "nonResourceURLs": ["*"]})
        await self.authorizer.refresh()
        rules, errors = self.authorizer.rules_for(user, ns if isinstance(ns, str) else "")
        for r in rules:
            if r.resources:
                rule: dict[str, Any] = {"verbs": list(r.verbs), "apiGroups": list(r.api_groups),
                                        "resources": list(r.resources)}
                if r.resource_names:
                    rule["resourceNames"] = list(r.resource_names)
                resource_rules.append(rule)
            if r.non_resource_urls:
                url_rules.append({"verbs": list(r.verbs), "nonResourceURLs": list(r.non_resource_urls)})
        status: dict[str, Any] = {"resourceRules": resource_rules, "nonResourceRules": url_rules,
                                  "incomplete": bool(errors)}
        if errors:
            status["evaluationError"] = ", ".join(errors)
        return status

    async def self_subject(self, request: web.Request, doc: dict[str, Any]) -> dict[str, Any]:
        return {"userInfo": (request.get(USER_KEY) or ANONYMOUS).to_dict()}

    async def token(self, request: web.Request, doc: dict[str, Any]) -> dict[str, Any]:
        spec = doc["spec"]
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise st.bad_request("token is required for TokenReview in authentication.k8s.io")
        asked = [a for a in spec.get("audiences") or () if isinstance(a, str)]
        try:
            found = self.issuer.review(token, asked)
            if found is None:
                user = self.authenticator.authenticate_token(token)
                found = (user, asked or list(self.issuer.audiences)) if user is not None else None
        except InvalidToken:
            found = None
        if found is None:
            return {"authenticated": False, "user": {}, "error": "[invalid bearer token]"}
        user, audiences = found
        return {"authenticated": True, "user": user.with_group("system:authenticated").to_dict(),
                "audiences": audiences}

    # -------------------------------------------------------------------------- HTTP

    def _endpoint(self, group: str, kind: str, fill: _Handler) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            if request.method != "POST":
                raise st.method_not_allowed()
            doc = decode_object(parse_document(await read_body(request), content_type(request)))
            if doc.get("kind") not in (None, "", kind):
                raise st.bad_request(f"the body of the request must be a {kind}, got {doc.get('kind')!r}")
            if not isinstance(doc.get("spec"), dict):
                doc["spec"] = {}
            doc["apiVersion"], doc["kind"] = f"{group}/v1", kind
            doc["metadata"] = {**(meta if isinstance(meta := doc.get("metadata"), dict) else {}),
                               "creationTimestamp": None}
            doc["status"] = await fill(request, doc)
            return json_response(doc, 201)

        return handle

    def routes(self) -> list[web.RouteDef]:
        z, n = f"/apis/{AUTHZ}/v1", f"/apis/{AUTHN}/v1"
        table = [
            (f"{z}/selfsubjectaccessreviews", AUTHZ, "SelfSubjectAccessReview", self.self_access),
            (f"{z}/subjectaccessreviews", AUTHZ, "SubjectAccessReview", self.subject_access),
            (f"{z}/namespaces/{{namespace}}/localsubjectaccessreviews", AUTHZ, "LocalSubjectAccessReview",
             self.local_access),
            (f"{z}/selfsubjectrulesreviews", AUTHZ, "SelfSubjectRulesReview", self.self_rules),
            (f"{n}/selfsubjectreviews", AUTHN, "SelfSubjectReview", self.self_subject),
            (f"{n}/tokenreviews", AUTHN, "TokenReview", self.token),
        ]
        return [web.route("*", path, self._endpoint(group, kind, fill)) for path, group, kind, fill in table]
