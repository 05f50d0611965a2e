"""Writes of the resource API: create, update, patch, server-side apply, scale and delete."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, cast

import orjson
from aiohttp import web

from ..admission.certificates import CertificateAdmission
from ..admission.defaultstorageclass import default_storage_class
from ..admission.quota import QuotaAdmission
from ..admission.serviceaccount import ServiceAccountAdmission
from ..admission.storageprotection import protect
from ..admission.webhooks import WebhookDispatcher, admission_attributes, reimpose
from ..auth.authentication import ADMIN, USER_KEY
from ..machinery import status as st
from ..machinery.jsoncopy import json_copy
from ..registry.apply import update_managed_fields
from ..registry.generatename import create_generating_name
from ..registry.objects import parse_rv, timestamp
from ..registry.resources import ResourceInfo
from ..registry.validation import decoded_fine, prune_builtin, unknown_fields
from ..schema.conversion import Conversion
from .bodies import (
    ANSWER_OBJECT_KEY,
    OBJECT_KEY,
    check_delete_options,
    check_kind,
    content_type,
    decode_object,
    load_json,
    parse_document,
    read_body,
)
from .offloop import OFF_LOOP_BYTES, run_sized
from .query import make_filter, truthy
from .reads import ReadHandlers
from .responses import json_response
from .routing import Target
from .scale import scale_of, set_replicas

_QUOTE_ESCAPES = {"\\": "\\\\", '"': '\\"', "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n",
                  "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _quote_warning(text: str) -> str:
    """``text`` as the quoted-string of a Warning header, escaped as Go's strconv.Quote does (kube's form).

    The result holds no control characters, so a client-chosen field name can never break the header.
    """
    out = ['"']
    for ch in text:
        esc = _QUOTE_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


WARNINGS_TOTAL_CHARS = 4096
WARNING_ITEM_CHARS = 256


def bounded_warnings(texts: list[str]) -> list[str]:
    """kube's warning limits: past 4096 characters in all, each warning is cut to 256 and the rest dropped."""
    if sum(map(len, texts)) <= WARNINGS_TOTAL_CHARS:
        return texts
    kept: list[str] = []
    total = 0
    for text in texts:
        text = text[:WARNING_ITEM_CHARS]
        if total + len(text) > WARNINGS_TOTAL_CHARS:
            break
        kept.append(text)
        total += len(text)
    return kept


def add_warnings(headers: dict[str, str], texts: list[str]) -> None:
    """Append ``texts`` to the response's ``Warning`` header as kube's ``299 - "text"`` entries."""
    texts = bounded_warnings(texts)
    if not texts:
        return
    entries = [headers["Warning"]] if headers.get("Warning") else []
    entries += ["299 - " + _quote_warning(text) for text in texts]
    headers["Warning"] = ", ".join(entries)


class WriteHandlers(ReadHandlers):
    """create/update/patch/apply/scale/delete of the resource API."""

    #: The admission webhooks called on every write (None: none are called).
    admission: WebhookDispatcher | None = None
    #: The ServiceAccount admission lookup of new pods (None: none).
    service_accounts: ServiceAccountAdmission | None = None
    #: CRD conversion webhooks (None: versions are only relabelled, as strategy None does).
    conversion: Conversion | None = None
    #: Who may approve and sign CertificateSigningRequests, and for which subjects (None: not checked).
    certificates: CertificateAdmission | None = None
    #: The ResourceQuota admission plugin (None: quotas are not enforced).
    quotas: QuotaAdmission | None = None

    @classmethod
    async def _body(cls, request: web.Request, info: ResourceInfo) -> dict[str, Any]:
        """The request's object: one a conversion made (:data:`OBJECT_KEY`) as is, else the body decoded."""
        obj = request.get(OBJECT_KEY)
        if obj is not None:
            return cast(dict[str, Any], obj)
        return cls._decode(request, info, await read_body(request))

    @staticmethod
    def _decode(request: web.Request, info: ResourceInfo, body: bytes) -> dict[str, Any]:
        """``body`` (:func:`read_body`'s) as an object; a built-in's is checked by its schema as it is decoded
        (bounding its depth)."""
        bounded = functools.partial(decoded_fine, info) if info.builtin else None
        return decode_object(parse_document(body, content_type(request), bounded))

    @staticmethod
    def _dry_run(request: web.Request) -> bool:
        values = request.query.getall("dryRun", [])
        for v in values:
            if v != "All":
                raise st.bad_request(f'Invalid dry run value: "{v}"; supported values: "All"')
        return bool(values)

    def _field_validation(self, request: web.Request, info: ResourceInfo, obj: Mapping[str, Any],
                          old: Mapping[str, Any] | None = None) -> dict[str, str]:
        """Apply ``fieldValidation``: Strict -> 400 on unknown fields; Warn -> Warning headers. ``old``: the stored
        object ``obj`` is a patch of (what they share has no unknown field)."""
        mode = request.query.get("fieldValidation", "Warn")
        if mode not in ("Strict", "Warn", "Ignore"):
            raise st.bad_request(f'fieldValidation "{mode}" is not a valid value; valid values are '
                                 '"Strict", "Warn" and "Ignore"')
        if mode == "Ignore":
            return {}
        unknown = unknown_fields(info, obj, old)
        if not unknown:
            return {}
        if mode == "Strict":
            msg = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise st.bad_request(f"strict decoding error: {msg}")
        headers: dict[str, str] = {}
        add_warnings(headers, [f'unknown field "{u}"' for u in unknown])
        return headers

    def _prepare_custom(self, info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
        """Drop what a built-in kind does not define; prune and default a custom resource by its schema."""
        if info.builtin:
            return prune_builtin(info, obj)
        if not info.schema:
            return obj
        from ..registry.validation import apply_defaults, prune

        pruned, _ = prune(info.schema, obj)
        return apply_defaults(info.schema, pruned)

    @staticmethod
    def _manager(request: web.Request) -> str:
        fm = request.query.get("fieldManager", "")
        if fm:
            return fm
        agent = request.headers.get("User-Agent", "unknown")
        return agent.split("/", 1)[0] or "unknown"

    def _managed(self, info: ResourceInfo, old: dict[str, Any] | None, new: dict[str, Any], manager: str,
                 subresource: str = "") -> dict[str, Any]:
        """``new`` with ``metadata.managedFields`` recording a non-apply write by ``manager``."""
        return update_managed_fields(old, new, manager=manager, operation="Update", info=info,
                                     subresource=subresource or None, now=timestamp(self.clock))

    async def _admitted(self, request: web.Request, t: Target, obj: dict[str, Any], old: Mapping[str, Any] | None,
                        dry: bool, headers: dict[str, str], size: int = 0) -> dict[str, Any]:
        """Mutating webhooks, the store's validation, then validating webhooks (kube-apiserver's order).

        Webhook warnings are added to ``headers``. Without webhook configurations this is only the validation,
        which runs off the loop for a request body of ``size`` bytes at or above ``OFF_LOOP_BYTES``.
        """
        if old is None and not t.info.group:  # kube's built-in admission plugins, before the webhooks
            if t.info.plural == "pods" and self.service_accounts is not None:
                await self.service_accounts.admit(t.namespace, obj)
            elif t.info.plural == "persistentvolumeclaims":
                default_storage_class(self.cache, obj)
                protect(t.info.plural, obj)
            elif t.info.plural == "persistentvolumes":
                protect(t.info.plural, obj)
        hooks = self.admission
        if hooks is None or not hooks.active():  # each stage awaited only when it has work (no coroutine else)
            if size < OFF_LOOP_BYTES:
                self.store.validate(t.info, obj, old, t.subresource)
            else:
                await run_sized(size, lambda: self.store.validate(t.info, obj, old, t.subresource))
            if self._plugins_validate(t):
                await self._validating_plugins(request, t, obj, old)
            if self.quotas is not None and self.quotas.covers(t.info, t.namespace, old):
                await self._charge_quota(t, obj, old, dry)
            return obj
        attrs = admission_attributes(request, t, "CREATE" if old is None else "UPDATE", dry,
                                     name=(obj.get("metadata") or {}).get("name", ""))
        mutated = await hooks.mutate(attrs, obj, old)
        assert mutated is not None
        mutated = reimpose(t.info, obj, mutated, old, t.subresource)
        await run_sized(size, lambda: self.store.validate(t.info, mutated, old, t.subresource))
        if self._plugins_validate(t):
            await self._validating_plugins(request, t, mutated, old)
        await hooks.validate(attrs, mutated, old)
        await self._charge_quota(t, mutated, old, dry)
        add_warnings(headers, attrs.warnings)
        return mutated

    async def _charge_quota(self, t: Target, obj: dict[str, Any], old: Mapping[str, Any] | None, dry: bool) -> None:
        """ResourceQuota admission, the last validating plugin, as in kube-apiserver."""
        if self.quotas is not None:
            await self.quotas.admit(t.info, t.namespace, obj, old, dry_run=dry, subresource=t.subresource)

    def _plugins_validate(self, t: Target) -> bool:
        """Whether kube's built-in validating admission plugins that need the request's user and the authorizer
        judge a write of ``t`` (:meth:`_validating_plugins`)."""
        return self.certificates is not None and t.info.group == "certificates.k8s.io"

    async def _validating_plugins(self, request: web.Request, t: Target, obj: dict[str, Any],
                                  old: Mapping[str, Any] | None) -> None:
        """Run the built-in validating plugins of a write :meth:`_plugins_validate` says they judge."""
        assert self.certificates is not None
        await self.certificates.validate(request.get(USER_KEY) or ADMIN, t.info, t.subresource, obj, old)

    async def _admit_delete(self, request: web.Request, t: Target, namespace: str, name: str, dry: bool,
                            headers: dict[str, str]) -> None:
        """Run the webhooks of a DELETE against the object as it is (refusals raise before anything changes)."""
        hooks = self.admission
        if hooks is None or not hooks.active():
            return
        old, _ = await self.store.read(t.info, namespace, name, cached=True)
        attrs = admission_attributes(request, t, "DELETE", dry, namespace=namespace, name=name)
        await hooks.mutate(attrs, None, old)
        await hooks.validate(attrs, None, old)
        add_warnings(headers, attrs.warnings)

    async def create(self, request: web.Request, t: Target) -> web.Response:
        info = t.info
        dry = self._dry_run(request)
        obj = await self._body(request, info)
        check_kind(info, obj)
        headers = self._field_validation(request, info, obj)
        obj = self._prepare_custom(info, obj)
        manager = self._manager(request)

        async def attempt(body: dict[str, Any]) -> tuple[bytes | None, dict[str, str]]:
            answer = dict(headers)  # an attempt's webhook warnings are its own: a retried one's are dropped
            body = self.store.prepare_create(info, t.namespace, body,
                                             managed=lambda defaulted: self._managed(info, None, defaulted, manager))
            body = await self._admitted(request, t, body, None, dry, answer)
            created, raw = await self.store.create_served(info, t.namespace, body, dry_run=dry)
            request[ANSWER_OBJECT_KEY] = created
            return raw, answer

        created, answer = await create_generating_name(obj, attempt)
        return json_response(created, 201, answer)

    async def update(self, request: web.Request, t: Target) -> web.Response:
        info = t.info
        dry = self._dry_run(request)
        new = await self._body(request, info)
        check_kind(info, new)
        headers = self._field_validation(request, info, new)
        new = self._prepare_custom(info, new)
        meta = new.get("metadata") or {}
        want = meta.get("resourceVersion") or ""
        if not isinstance(want, str):
            raise st.bad_request("json: cannot unmarshal into Go struct field ObjectMeta.metadata.resourceVersion "
                                 "of type string")
        manager = self._manager(request)

        async def try_update(old: dict[str, Any] | None) -> dict[str, Any]:
            assert old is not None
            result = self.store.prepare_update(info, old, json_copy(new), subresource=t.subresource,
                                               managed=lambda o: self._managed(info, old, o, manager, t.subresource))
            return await self._admitted(request, t, result, old, dry, headers)

        out, _ = await self.store.guaranteed_update_served(info, t.namespace, t.name, try_update,
                                                           precondition_rv=parse_rv(want) if want else 0,
                                                           dry_run=dry)
        return json_response(out, 200, headers)

    async def patch(self, request: web.Request, t: Target) -> web.Response:
        from ..registry.patch import PatchError, json_merge_patch, json_patch, strategic_merge_patch

        info = t.info
        dry = self._dry_run(request)
        ctype = content_type(request)
        body = await read_body(request)
        if ctype == "application/apply-patch+yaml":
            return await self._apply(request, t, body, dry)
        kinds = {"application/json-patch+json": "json", "application/merge-patch+json": "merge",
                 "application/strategic-merge-patch+json": "strategic"}
        kind = kinds.get(ctype)
        if kind is None or (kind == "strategic" and not info.builtin):
            raise st.StatusError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
                                 f"accepted media types include: application/json-patch+json, "
                                 f"application/merge-patch+json, application/apply-patch+yaml (got {ctype})")
        try:
            doc = load_json(body) if body.strip() else None
        except orjson.JSONDecodeError as e:
            raise st.bad_request(f"error decoding patch: {e}") from None
        if kind == "json" and not isinstance(doc, list):
            raise st.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        if kind != "json" and not isinstance(doc, dict):
            raise st.bad_request("error decoding patch: the patch must be a JSON object")
        manager = self._manager(request)
        headers: dict[str, str] = {}
        # a status write takes only the patched status into a copy of the old object (ObjectStore.prepare_update):
        # the patched object may share what the patch does not reach with ``old`` (private to this attempt)
        share = t.subresource == "status"

        def patched(old: dict[str, Any]) -> dict[str, Any]:
            nonlocal headers
            try:
                if kind == "json":
                    new = json_patch(old, doc)
                elif kind == "merge":
                    new = json_merge_patch(old, doc, share=share)
                else:
                    new = strategic_merge_patch(old, doc, info, share=share)
            except PatchError as e:
                raise st.StatusError(e.code, e.reason, e.message,
                                     details={"causes": e.causes} if e.causes else None) from None
            new = decode_object(new)
            want = (new.get("metadata") or {}).get("resourceVersion")
            if want and str(want) != old["metadata"]["resourceVersion"]:
                raise st.conflict(info, t.name)
            headers = self._field_validation(request, info, new, old)
            new = self._prepare_custom(info, new)
            return self.store.prepare_update(info, old, new, subresource=t.subresource,
                                             managed=lambda o: self._managed(info, old, o, manager, t.subresource))

        async def try_update(old: dict[str, Any] | None) -> dict[str, Any]:
            assert old is not None
            result = await run_sized(len(body), lambda: patched(old))
            return await self._admitted(request, t, result, old, dry, headers, size=len(body))

        out, _ = await self.store.guaranteed_update_served(info, t.namespace, t.name, try_update, dry_run=dry)
        return json_response(out, 200, headers)

    async def _apply(self, request: web.Request, t: Target, body: bytes, dry: bool) -> web.Response:
        from ..registry.apply import ApplyConflict, server_side_apply
        from ..registry.patch import PatchError

        info = t.info
        manager = request.query.get("fieldManager", "")
        if not manager:
            raise st.bad_request("PATCH, application/apply-patch+yaml requires fieldManager to be set")
        force = truthy(request.query.get("force"))
        applied = decode_object(parse_document(body, "application/yaml"))
        check_kind(info, applied)
        ameta = applied.get("metadata") or {}
        if ameta.get("name") and ameta["name"] != t.name:
            raise st.bad_request(f'the name of the object ({ameta["name"]}) does not match the name on the URL '
                                 f"({t.name})")
        headers = self._field_validation(request, info, applied)
        want = ameta.get("resourceVersion")

        def merge(live: dict[str, Any] | None, now: str) -> dict[str, Any]:
            try:
                merged = server_side_apply(live, applied, manager=manager, force=force, info=info,
                                           subresource=t.subresource or None, now=now)
            except ApplyConflict as e:
                raise st.StatusError(409, "Conflict", e.message, details={
                    "name": t.name, "group": info.group, "kind": info.plural, "causes": list(e.causes)}) from None
            except PatchError as e:
                raise st.StatusError(e.code, e.reason, e.message,
                                     details={"causes": e.causes} if e.causes else None) from None
            return self._prepare_custom(info, merged)

        async def try_apply(live: dict[str, Any] | None) -> dict[str, Any]:
            if want and (live is None or str(want) != live["metadata"]["resourceVersion"]):
                raise st.conflict(info, t.name)
            now = timestamp(self.clock)
            if live is None:
                merged = await run_sized(len(body), lambda: merge(None, now))
                merged.setdefault("metadata", {})["name"] = t.name
                merged["metadata"].pop("resourceVersion", None)
                obj = self.store.prepare_create(info, t.namespace, merged)
                return await self._admitted(request, t, obj, None, dry, headers, size=len(body))
            result = await run_sized(len(body), lambda: self.store.prepare_update(
                info, live, merge(live, now), subresource=t.subresource))
            return await self._admitted(request, t, result, live, dry, headers, size=len(body))

        out, outcome = await self.store.guaranteed_update_served(info, t.namespace, t.name, try_apply,
                                                                 allow_create=True, dry_run=dry)
        return json_response(out, 201 if outcome == "created" else 200, headers)

    async def scale(self, request: web.Request, t: Target) -> web.Response:
        """The ``/scale`` subresource: an autoscaling/v1 Scale view of the object's replicas (see :mod:`.scale`)."""
        from ..registry.patch import PatchError, json_merge_patch, json_patch

        info = t.info
        if request.method in ("GET", "HEAD"):
            obj, _ = await self.store.read(info, t.namespace, t.name)
            return json_response(scale_of(info, obj))
        if request.method not in ("PUT", "PATCH"):
            raise st.method_not_allowed()
        dry = self._dry_run(request)
        ctype = content_type(request)
        body = await read_body(request)
        headers: dict[str, str] = {}

        async def try_scale(old: dict[str, Any] | None) -> dict[str, Any]:
            assert old is not None
            current = scale_of(info, old)
            try:
                if request.method == "PUT":
                    wanted = decode_object(parse_document(body, ctype))
                elif ctype == "application/json-patch+json":
                    wanted = json_patch(current, load_json(body))
                elif ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                    wanted = json_merge_patch(current, load_json(body))
                else:
                    raise st.unsupported_media_type(ctype)
            except orjson.JSONDecodeError as e:
                raise st.bad_request(f"error decoding patch: {e}") from None
            except PatchError as e:
                raise st.StatusError(e.code, e.reason, e.message) from None
            want = (wanted.get("metadata") or {}).get("resourceVersion")
            if want and str(want) != current["metadata"]["resourceVersion"]:
                raise st.conflict(info, t.name)
            wanted_spec = wanted.get("spec")
            if wanted_spec is not None and not isinstance(wanted_spec, dict):
                raise st.bad_request(f"json: cannot unmarshal {type(wanted_spec).__name__} into Go struct field "
                                     "Scale.spec of type v1.ScaleSpec")
            replicas = (wanted_spec or {}).get("replicas", 0)
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                raise st.invalid(info, t.name, [{"reason": "FieldValueInvalid", "field": "spec.replicas",
                                                 "message": f"Invalid value: {replicas!r}: must be greater than or "
                                                            "equal to 0"}])
            result = json_copy(old)
            set_replicas(info, result, replicas)
            result = self.store.prepare_update(info, old, result)
            return await self._admitted(request, t, result, old, dry, headers)

        out, _ = await self.store.guaranteed_update(info, t.namespace, t.name, try_scale, dry_run=dry)
        return json_response(scale_of(info, out), headers=headers)

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        body = await read_body(request)
        opts: dict[str, Any] = {}
        if body.strip():
            doc = parse_document(body, content_type(request))
            if not isinstance(doc, dict):
                raise st.bad_request("DeleteOptions must be a JSON object")
            opts.update(doc)
        q = request.query
        if "propagationPolicy" in q:
            opts["propagationPolicy"] = q["propagationPolicy"]
        if "orphanDependents" in q:
            opts["orphanDependents"] = truthy(q["orphanDependents"])
        if "gracePeriodSeconds" in q:
            opts["gracePeriodSeconds"] = q["gracePeriodSeconds"]
        if "dryRun" in opts and opts["dryRun"] not in ([], ["All"], None):
            raise st.bad_request(f'Invalid dry run value: "{opts["dryRun"]}"; supported values: "All"')
        check_delete_options(opts)
        return opts

    async def delete(self, request: web.Request, t: Target) -> web.Response:
        info = t.info
        opts = await self._delete_options(request)
        dry = self._dry_run(request) or opts.get("dryRun") == ["All"]
        headers: dict[str, str] = {}
        await self._admit_delete(request, t, t.namespace, t.name, dry, headers)
        obj, deleted = await self.store.delete(info, t.namespace, t.name, opts, dry_run=dry)
        warning = getattr(self.store.strategies.get(info), "delete_warning", "")
        if warning and opts.get("propagationPolicy") is None and opts.get("orphanDependents") is None:
            add_warnings(headers, [warning])
        if deleted and not self.store.strategies.get(info).returns_deleted_object:
            return json_response(st.success(info, t.name, obj["metadata"].get("uid")), headers=headers)
        code = 202 if (not deleted and opts.get("orphanDependents") is False) else 200
        return json_response(obj, code, headers)

    async def delete_collection(self, request: web.Request, t: Target) -> web.Response:
        info = t.info
        if info.namespaced and not t.namespace:
            raise st.method_not_allowed()
        flt = make_filter(info, request.query)
        opts = await self._delete_options(request)
        dry = self._dry_run(request) or opts.get("dryRun") == ["All"]
        await self._sync()
        objs = [co for co in self.cache.bucket(info.storage_prefix).snapshot(t.namespace)
                if flt.empty or flt(co.obj)]
        items: list[bytes] = []
        headers: dict[str, str] = {}
        for co in objs:
            try:
                await self._admit_delete(request, t, co.namespace, co.name, dry, headers)
                obj, _ = await self.store.delete(info, co.namespace, co.name, opts, dry_run=dry)
            except st.StatusError as e:
                if e.code == 404:
                    continue
                raise
            items.append(orjson.dumps(obj))
        return json_response(self._list_bytes(info, self.cache.revision, items), headers=headers)
