"""Admission webhooks, called as kube-apiserver calls them (admissionregistration.k8s.io/v1).

For every write the server runs, after defaulting and before storage:

1. the **mutating** webhooks of every MutatingWebhookConfiguration, in order (configurations by name,
   webhooks in their listed order); each one's JSONPatch is applied before the next is called; when a
   later webhook changed the object, the earlier ones with ``reinvocationPolicy: IfNeeded`` run once more;
   a patch that changes who the object is (``apiVersion``, ``kind``, ``metadata.name``, ``namespace`` or
   ``uid``: :data:`IDENTITY`) is an invalid answer; after the last one, what the server owns is put back
   (:func:`reimpose`: server-set metadata, the status or the rest around a status write, the generation)
   and the object is validated again, as if the client had sent it;
2. the **validating** webhooks of every ValidatingWebhookConfiguration, concurrently; the first denial
   in configuration order is the answer.

A webhook is called when one of its ``rules`` matches (operations, apiGroups, apiVersions, resources with
``*``, ``*/*``, ``pods/*``, ``*/status`` forms, scope), its ``namespaceSelector`` matches the namespace's
labels (a Namespace object is matched by its own labels; other cluster-scoped objects always match), its
``objectSelector`` matches the labels of the new or the old object, and every ``matchConditions`` CEL
expression is true (evaluated with cel-python over ``object``, ``oldObject`` and ``request``).

Answers, worded as kube-apiserver's:

* a denial is the webhook's status code (at least 400) with the message
  ``admission webhook "<name>" denied the request: <message>``;
* a webhook that cannot be called, times out (``timeoutSeconds``, default 10, at most 30), answers
  non-JSON, a wrong ``uid``, a patch that does not apply or changes who the object is, or fails a
  matchCondition is, with ``failurePolicy: Fail`` (the default), a 500 ``failed calling webhook "<name>":
  ...`` (a 504 on timeout); with ``Ignore`` the webhook is skipped and the failure logged;
* a dry-run request reaching a webhook whose ``sideEffects`` is not ``None``/``NoneOnDryRun`` is refused
  (400), as kube does;
* ``warnings`` of every webhook are collected for the response's ``Warning`` headers.

How a webhook is reached (``url`` or ``service``, TLS trust) is :mod:`kinformer.server.admission.webhook_client`'s.

Limits: at most :data:`MAX_WARNINGS` warnings of :data:`MAX_WARNING_LENGTH` characters are kept per request.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...errors import SelectorError
from ...selectors import label_selector_from_dict
from ..machinery import status as st
from ..registry.patch import PatchError, json_patch
from ..registry.resources import ResourceInfo
from ..schema.builtin_conversion import convert, equivalent_versions
from .webhook_client import CallFailed, WebhookClient

log = logging.getLogger(__name__)

__all__ = ["AdmissionAttributes", "WebhookDispatcher", "dispatcher_over_cache", "reimpose", "rule_matches"]

MUTATING = "admissionregistration.k8s.io/mutatingwebhookconfigurations"
VALIDATING = "admissionregistration.k8s.io/validatingwebhookconfigurations"
MAX_WARNINGS = 32
MAX_WARNING_LENGTH = 256
DEFAULT_TIMEOUT = 10
MAX_TIMEOUT = 30


@dataclass(slots=True)
class AdmissionAttributes:
    """What admission knows of one request (kube's admission.Attributes)."""

    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    info: ResourceInfo
    namespace: str
    name: str
    subresource: str = ""
    user: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    dry_run: bool = False
    options: Mapping[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    #: the version the client sent the request to, when it is served through another (storage) version
    request_version: str = ""

    def warn(self, text: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(text[:MAX_WARNING_LENGTH])


# -- matching --------------------------------------------------------------------------------------


def _resource_matches(patterns: Iterable[str], plural: str, subresource: str) -> bool:
    want = f"{plural}/{subresource}" if subresource else plural
    for pattern in patterns:
        if pattern in ("*/*", want):
            return True
        if pattern == "*" and not subresource:
            return True
        res, _, sub = pattern.partition("/")
        if sub and subresource and (res == "*" or res == plural) and (sub == "*" or sub == subresource):
            return True
    return False


def rule_matches(rule: Mapping[str, Any], attrs: AdmissionAttributes) -> bool:
    """Whether one RuleWithOperations selects the request (kube's admission rule matcher)."""
    info = attrs.info
    ops = rule.get("operations") or []
    if "*" not in ops and attrs.operation not in ops:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and info.group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if "*" not in versions and info.version not in versions:
        return False
    if not _resource_matches(rule.get("resources") or [], info.plural, attrs.subresource):
        return False
    scope = rule.get("scope") or "*"
    return scope == "*" or (scope == "Namespaced") == info.namespaced


def matched_version(hook: Mapping[str, Any], attrs: AdmissionAttributes) -> str | None:
    """The version ``hook`` sees the request in: the client's own when a rule selects it; else, under
    ``matchPolicy: Equivalent`` (the default), another version of the same built-in resource that a rule
    selects (the object is converted to it, see :mod:`.schema.builtin_conversion`); None when nothing matches."""
    rules = hook.get("rules") or []
    requested = attrs.request_version or attrs.info.version
    candidates = [requested]
    if hook.get("matchPolicy", "Equivalent") != "Exact":
        candidates += [v for v in equivalent_versions(attrs.info.group, attrs.info.plural) if v != requested]
    for version in candidates:
        seen = attrs if version == attrs.info.version else \
            dataclasses.replace(attrs, info=dataclasses.replace(attrs.info, version=version))
        if any(rule_matches(r, seen) for r in rules):
            return version
    return None


def shown_as(attrs: AdmissionAttributes, obj: Any, version: str) -> Any:
    """``obj`` as ``version`` of the request's resource; unchanged when it is that version, None, or not
    an object of a built-in with converters (a subresource's Scale or Eviction, a custom resource)."""
    group = attrs.info.group
    api_version = f"{group}/{version}" if group else version
    if not isinstance(obj, dict) or obj.get("apiVersion") == api_version or obj.get("kind") != attrs.info.kind \
            or not attrs.info.builtin or not equivalent_versions(group, attrs.info.plural):
        return obj
    return convert(group, attrs.info.plural, obj, api_version)


def _selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    if selector is None:
        return True
    try:
        return label_selector_from_dict(selector).matches(labels or {})
    except SelectorError:
        return False


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str] | None:
    if obj is None:
        return None
    return (obj.get("metadata") or {}).get("labels") or {}


# -- the dispatcher --------------------------------------------------------------------------------


class WebhookDispatcher:
    """Finds the webhooks that apply to a request and calls them; owns one HTTP session.

    ``objects(prefix)`` returns the current objects of a resource (``"group/plural"``) from the server's
    cache; ``namespace_labels(name)`` the labels of a namespace (None when it does not exist);
    ``configured()``, when given, whether any webhook configuration exists, without listing them.
    """

    def __init__(self, objects: Any, namespace_labels: Any, lookup: Any, configured: Any = None) -> None:
        self._objects = objects
        self._configured = configured
        self._namespace_labels = namespace_labels
        self.client = WebhookClient(lookup)

    async def close(self) -> None:
        await self.client.close()

    def _webhooks(self, resource: str) -> list[tuple[str, dict[str, Any]]]:
        configs = sorted(self._objects(resource), key=lambda o: o["metadata"]["name"])
        return [(c["metadata"]["name"], hook) for c in configs for hook in (c.get("webhooks") or [])]

    def active(self) -> bool:
        """Whether any webhook configuration exists (no configuration: admission costs nothing)."""
        if self._configured is not None:
            return bool(self._configured())
        return bool(self._objects(MUTATING) or self._objects(VALIDATING))

    # -- entry points ---------------------------------------------------------------------------

    async def mutate(self, attrs: AdmissionAttributes, obj: dict[str, Any] | None,
                     old: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """Run the matching mutating webhooks in order; return the (possibly patched) object."""
        hooks = [h for h in self._webhooks(MUTATING) if await self._applies(h[1], attrs, obj, old)]
        if not hooks:
            return obj
        ran: list[tuple[str, dict[str, Any]]] = []
        changed_after: dict[int, bool] = {}
        for i, (config, hook) in enumerate(hooks):
            obj, changed = await self._mutate_one(hook, attrs, obj, old)
            ran.append((config, hook))
            if changed:
                for j in range(i):
                    changed_after[j] = True
        for j, (_config, hook) in enumerate(ran):
            if changed_after.get(j) and hook.get("reinvocationPolicy") == "IfNeeded":
                obj, _ = await self._mutate_one(hook, attrs, obj, old)
        return obj

    async def validate(self, attrs: AdmissionAttributes, obj: Mapping[str, Any] | None,
                       old: Mapping[str, Any] | None) -> None:
        """Run the matching validating webhooks concurrently; raise the first denial in order."""
        hooks = [h for h in self._webhooks(VALIDATING) if await self._applies(h[1], attrs, obj, old)]
        if not hooks:
            return
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(self._outcome(hook, attrs, obj, old)) for _, hook in hooks]
        for task in tasks:
            err = task.result()
            if err is not None:
                raise err

    # -- one webhook ----------------------------------------------------------------------------

    async def _applies(self, hook: Mapping[str, Any], attrs: AdmissionAttributes, obj: Mapping[str, Any] | None,
                       old: Mapping[str, Any] | None) -> bool:
        if matched_version(hook, attrs) is None:
            return False
        if not _selector_matches(hook.get("objectSelector"), _labels(obj)) and \
                not (old is not None and _selector_matches(hook.get("objectSelector"), _labels(old))):
            return False
        ns_selector = hook.get("namespaceSelector")
        if ns_selector is not None:
            if attrs.info.group == "" and attrs.info.plural == "namespaces":
                labels = _labels(obj if obj is not None else old)
            elif attrs.info.namespaced:
                labels = self._namespace_labels(attrs.namespace)
            else:
                labels = None
            if (attrs.info.namespaced or attrs.info.plural == "namespaces") and \
                    not _selector_matches(ns_selector, labels):
                return False
        return True

    def _request(self, attrs: AdmissionAttributes, obj: Mapping[str, Any] | None,
                 old: Mapping[str, Any] | None, version: str) -> dict[str, Any]:
        info = attrs.info
        kind = {"group": info.group, "version": version, "kind": info.kind}
        resource = {"group": info.group, "version": version, "resource": info.plural}
        requested = attrs.request_version or info.version
        req: dict[str, Any] = {
            "uid": str(uuid.uuid4()), "kind": kind, "resource": resource, "requestKind": {**kind, "version": requested},
            "requestResource": {**resource, "version": requested}, "name": attrs.name, "namespace": attrs.namespace,
            "operation": attrs.operation,
            "userInfo": {"username": attrs.user, "uid": attrs.uid, "groups": list(attrs.groups)},
            "object": obj, "oldObject": old, "dryRun": attrs.dry_run, "options": attrs.options}
        if attrs.subresource:
            req["subResource"] = req["requestSubResource"] = attrs.subresource
        return req

    def _check_dry_run(self, name: str, hook: Mapping[str, Any], attrs: AdmissionAttributes) -> None:
        if attrs.dry_run and hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise st.bad_request(f'admission webhook "{name}" does not support dry run')

    async def _conditions_hold(self, hook: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
        conditions = hook.get("matchConditions") or []
        if not conditions:
            return True
        from .cel import evaluate_conditions

        try:
            return evaluate_conditions(conditions, request)
        except ValueError as exc:
            raise CallFailed(str(exc)) from None

    async def _review(self, hook: Mapping[str, Any], attrs: AdmissionAttributes, obj: Mapping[str, Any] | None,
                      old: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """Call ``hook``; its ``response``, or None when it was skipped (matchConditions, Ignore policy)."""
        name = hook.get("name", "")
        self._check_dry_run(name, hook, attrs)
        version = matched_version(hook, attrs) or attrs.info.version
        request = self._request(attrs, shown_as(attrs, obj, version), shown_as(attrs, old, version), version)
        try:
            if not await self._conditions_hold(hook, request):
                return None
            timeout = min(int(hook.get("timeoutSeconds") or DEFAULT_TIMEOUT), MAX_TIMEOUT)
            response = await self.client.post(hook.get("clientConfig") or {}, {
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}, timeout)
            if response.get("uid") != request["uid"]:
                raise CallFailed(f"expected response.uid=\"{request['uid']}\", got \"{response.get('uid')}\"")
        except CallFailed as exc:
            if hook.get("failurePolicy", "Fail") == "Ignore":
                log.warning('failed calling webhook "%s" (failurePolicy Ignore): %s', name, exc)
                return None
            if exc.timeout:
                raise st.StatusError(504, "Timeout", f'failed calling webhook "{name}": {exc}') from None
            raise st.internal_error(f'failed calling webhook "{name}": {exc}') from None
        for text in (response.get("warnings") or [])[:MAX_WARNINGS]:
            if isinstance(text, str):
                attrs.warn(text)
        if not response.get("allowed"):
            raise _denied(name, response.get("status"))
        return response

    async def _outcome(self, hook: Mapping[str, Any], attrs: AdmissionAttributes, obj: Mapping[str, Any] | None,
                       old: Mapping[str, Any] | None) -> st.StatusError | None:
        try:
            await self._review(hook, attrs, obj, old)
        except st.StatusError as err:
            return err
        return None

    async def _mutate_one(self, hook: Mapping[str, Any], attrs: AdmissionAttributes, obj: dict[str, Any] | None,
                          old: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, bool]:
        response = await self._review(hook, attrs, obj, old)
        if response is None or not response.get("patch") or obj is None:
            return obj, False
        name = hook.get("name", "")
        try:
            if response.get("patchType") != "JSONPatch":
                raise CallFailed(f"unsupported patch type {response.get('patchType')!r}")
            ops = orjson.loads(base64.b64decode(response["patch"], validate=True))
            version = matched_version(hook, attrs) or attrs.info.version
            shown = shown_as(attrs, obj, version)
            patched = json_patch(copy.deepcopy(shown), ops)
            if not isinstance(patched, dict):
                raise CallFailed("the patch does not leave an object")
            changed = [name for name, read in IDENTITY if read(patched) != read(shown)]
            if changed:
                raise CallFailed(f"a webhook may not change {', '.join(changed)}")
            patched = shown_as(attrs, patched, attrs.info.version)
        except (CallFailed, PatchError, ValueError, TypeError) as exc:
            if hook.get("failurePolicy", "Fail") == "Ignore":
                log.warning('webhook "%s" patch ignored (failurePolicy Ignore): %s', name, exc)
                return obj, False
            raise st.internal_error(f'admission webhook "{name}" returned an invalid patch: {exc}') from None
        return patched, patched != obj


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


#: What a mutating webhook may not change: who the object is (a patch that does is an invalid answer).
IDENTITY: tuple[tuple[str, Callable[[Mapping[str, Any]], Any]], ...] = (
    ("apiVersion", lambda o: o.get("apiVersion")), ("kind", lambda o: o.get("kind")),
    ("metadata.name", lambda o: _meta(o).get("name")), ("metadata.namespace", lambda o: _meta(o).get("namespace")),
    ("metadata.uid", lambda o: _meta(o).get("uid")))

#: Metadata the server sets on every write, whatever a mutating webhook answers.
SERVER_METADATA = ("creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion",
                   "generation", "selfLink", "managedFields")


def reimpose(info: ResourceInfo, prepared: dict[str, Any], mutated: dict[str, Any], old: Mapping[str, Any] | None,
             subresource: str) -> dict[str, Any]:
    """``mutated`` (what the mutating webhooks made of ``prepared``) with what the server owns put back.

    The server's metadata (:data:`SERVER_METADATA`) is ``prepared``'s, and so is the status of a kind with a
    status subresource (written through the main resource) or everything but the status (written through
    ``status``). A webhook that changed the desired state (anything but metadata and status) of an update
    bumps a generation the preparation left alone, as the kind's update strategy would have.
    """
    if mutated is prepared:
        return mutated
    if subresource == "status":
        return {**prepared, "status": mutated["status"]} if "status" in mutated else \
            {k: v for k, v in prepared.items() if k != "status"}
    result = dict(mutated)
    meta = dict(_meta(mutated))
    before = _meta(prepared)
    for key in SERVER_METADATA:
        if key in before:
            meta[key] = before[key]
        else:
            meta.pop(key, None)
    generation = before.get("generation")
    if old is not None and isinstance(generation, int) and generation == _meta(old).get("generation") and \
            _desired(mutated) != _desired(prepared):
        meta["generation"] = generation + 1
    result["metadata"] = meta
    if info.has_status and not subresource:
        if "status" in prepared:
            result["status"] = prepared["status"]
        else:
            result.pop("status", None)
    return result


def _desired(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _denied(name: str, status: Any) -> st.StatusError:
    """kube's ToStatusErr: the webhook's code (at least 400) and its message, prefixed with who denied.

    The webhook's Status is untrusted: a field of the wrong type is left out (``details`` that is not an
    object, causes that are not objects), never a failure of the denial.
    """
    status = status if isinstance(status, Mapping) else {}
    code = status.get("code")
    code = code if type(code) is int and 400 <= code <= 599 else 400
    denied_by = f'admission webhook "{name}" denied the request'
    message, reason = _text(status.get("message")), _text(status.get("reason"))
    text = f"{denied_by}: {message}" if message else f"{denied_by}: {reason}" if reason else \
        f"{denied_by} without explanation"
    return st.StatusError(code, reason, text, details=_details(status.get("details")))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _details(details: Any) -> dict[str, Any] | None:
    """A webhook's ``status.details`` when it is an object, with only its object causes."""
    if not isinstance(details, Mapping):
        return None
    out = dict(details)
    if "causes" in out:
        causes = out["causes"]
        out["causes"] = [c for c in causes if isinstance(c, Mapping)] if isinstance(causes, list) else []
    return out


def admission_attributes(request: Any, t: Any, operation: str, dry_run: bool, *, namespace: str | None = None,
                         name: str | None = None) -> AdmissionAttributes:
    """The attributes of an HTTP request to resource target ``t`` (a
    :class:`~kinformer.server.endpoints.routing.Target`).

    A server without authentication serves everyone as the admin, so such requests carry that identity.
    """
    from ..auth.authentication import ADMIN, USER_KEY
    from ..endpoints.bodies import REQUEST_VERSION_KEY

    user = request.get(USER_KEY) or ADMIN
    username, uid, groups = user.name, user.uid, tuple(user.groups)
    kinds = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
    options: dict[str, Any] = {"apiVersion": "meta.k8s.io/v1", "kind": kinds.get(operation, "CreateOptions")}
    if dry_run:
        options["dryRun"] = ["All"]
    manager = request.query.get("fieldManager")
    if manager and operation != "DELETE":
        options["fieldManager"] = manager
    return AdmissionAttributes(operation=operation, info=t.info,
                               namespace=t.namespace if namespace is None else namespace,
                               name=t.name if name is None else name, subresource=t.subresource, user=username,
                               uid=uid, groups=groups, dry_run=dry_run, options=options,
                               request_version=request.get(REQUEST_VERSION_KEY) or "")


def dispatcher_over_cache(cache: Any) -> WebhookDispatcher:
    """A dispatcher reading configurations, namespaces, Services and Endpoints from the server's watch cache."""

    def bucket_objects(resource: str) -> dict[str, Any]:
        bucket = cache.buckets.get(f"/registry/{resource}/")
        return bucket.objects if bucket is not None else {}

    def objects(resource: str) -> list[dict[str, Any]]:
        return [co.obj for co in bucket_objects(resource).values()]

    def lookup(resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        key = f"/registry/{resource}/{namespace}/{name}" if namespace else f"/registry/{resource}/{name}"
        co = bucket_objects(resource).get(key)
        return co.obj if co is not None else None

    def namespace_labels(name: str) -> Mapping[str, str] | None:
        ns = lookup("core/namespaces", "", name)
        return _labels(ns) if ns is not None else None

    prefixes = (f"/registry/{MUTATING}/", f"/registry/{VALIDATING}/")

    def configured() -> bool:
        buckets = cache.buckets  # read each time: a reload replaces the dict
        for prefix in prefixes:
            bucket = buckets.get(prefix)
            if bucket is not None and bucket.objects:
                return True
        return False

    return WebhookDispatcher(objects, namespace_labels, lookup, configured)
