"""Version conversion: CRD conversion webhooks (``spec.conversion.strategy: Webhook``), as kube-apiserver
calls them, and the built-in kinds served at several versions (:mod:`.builtin_conversion`).

Objects of such a CRD, or such a built-in, are stored in its storage version. A request for another
served version is served by the storage version's handlers, with conversion at the edges:

* a body (create, replace, apply) is converted to the storage version before it is handled;
* a merge, JSON or (built-ins only) strategic merge patch is applied to the object as the client's
  version shows it (the stored object is converted, patched, converted back) and written as a replace
  with the read resourceVersion as its precondition (retried on a conflict, as kube's update loop does);
* every object answered — a get, each item of a list, each event of a watch, each object row of a
  Table — is converted to the requested version; objects of one list or one batch of watch events go
  to the webhook in one review.

Built-in conversions run in process (:func:`.builtin_conversion.convert`). The webhook gets an
apiextensions.k8s.io/v1 ConversionReview; a failure to call it, a ``Failure`` result, a wrong count of
objects, an object of another version or kind, or one whose name, namespace or uid changed is a 500
``conversion webhook for <gvk> failed: ...`` (kube's wording). Conversions are remembered per (uid,
resourceVersion, version), at most :data:`CACHE_SIZE`, so many watchers of one version cost one call per
object version.
"""

from __future__ import annotations

import copy
import dataclasses
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from aiohttp import web

from ..admission.webhook_client import CallFailed, WebhookClient
from ..endpoints.bodies import (
    ANSWER_OBJECT_KEY,
    BODY_KEY,
    OBJECT_KEY,
    REQUEST_VERSION_KEY,
    content_type,
    decode_object,
    parse_document,
    read_body,
)
from ..endpoints.query import storage_field_selector
from ..endpoints.routing import Target
from ..machinery import status as st
from ..registry.resources import Registry, ResourceInfo
from ..registry.strategies import events
from . import builtin_conversion

__all__ = ["CONVERT_WATCH_KEY", "Conversion"]

CACHE_SIZE = 10_000
TIMEOUT = 30.0
MAX_PATCH_RETRIES = 5
CRD_PREFIX = "/registry/apiextensions.k8s.io/customresourcedefinitions/"

CONVERT_WATCH_KEY: Any = (web.RequestKey("kinformer.convert_watch", object) if hasattr(web, "RequestKey")
                          else "kinformer.convert_watch")

Dispatch = Callable[[web.Request, Target], Awaitable[web.StreamResponse]]

# Rules a create through a converted version is held to beyond its storage version's (kube validates with the
# request's version in hand): (group, plural) -> causes of the body as the client sent it, in a namespace.
_CREATE_RULES: dict[tuple[str, str], Callable[[Mapping[str, Any], str], list[dict[str, str]]]] = {
    ("events.k8s.io", "events"): events.v1_create_causes,
}


def _identity(obj: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """What a conversion must keep of an object's metadata: its name, namespace and uid."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return meta.get("name"), meta.get("namespace"), meta.get("uid")


class Conversion:
    """Finds the CRDs with conversion webhooks and converts their objects (see the module docstring)."""

    def __init__(self, cache: Any, registry: Registry, client: WebhookClient) -> None:
        self.cache = cache
        self.registry = registry
        self.client = client
        self._memo: OrderedDict[tuple[str, str, str], dict[str, Any]] = OrderedDict()

    # -- which requests convert -------------------------------------------------------------------

    def _webhook(self, info: ResourceInfo) -> tuple[dict[str, Any], str] | None:
        """(clientConfig, storage version) when ``info``'s CRD converts through a webhook."""
        if info.builtin or not info.crd_name:
            return None
        bucket = self.cache.buckets.get(CRD_PREFIX)
        co = bucket.objects.get(CRD_PREFIX + info.crd_name) if bucket is not None else None
        spec = (co.obj.get("spec") or {}) if co is not None else {}
        conversion = spec.get("conversion") or {}
        if conversion.get("strategy") != "Webhook":
            return None
        storage = next((v.get("name") for v in spec.get("versions") or () if v.get("storage")), None)
        config = (conversion.get("webhook") or {}).get("clientConfig")
        if not storage or not isinstance(config, dict):
            return None
        return config, storage

    def storage_target(self, t: Target) -> Target | None:
        """The same target in the storage version (of the storage group: an events.k8s.io Event is a core
        one), when ``t`` must be converted; else None."""
        if t.info.builtin:  # a built-in converts only to another version of its own (no webhook)
            storage = builtin_conversion.storage_of(t.info.group, t.info.plural)
        else:
            found = self._webhook(t.info)
            storage = (t.info.group, found[1]) if found is not None else None
        if storage is None or storage == (t.info.group, t.info.version):
            return None
        info = self.registry.get(storage[0], storage[1], t.info.plural)
        return dataclasses.replace(t, info=info) if info is not None else None

    # -- converting -------------------------------------------------------------------------------

    async def convert(self, info: ResourceInfo, objects: list[dict[str, Any]], desired: str) -> list[dict[str, Any]]:
        """``objects`` (of ``info``'s resource, any version) as ``desired`` (an apiVersion)."""
        if info.builtin:
            return [o if o.get("apiVersion") == desired else builtin_conversion.convert(
                info.group, info.plural, o, desired) for o in objects]
        out: list[dict[str, Any] | None] = []
        todo: list[tuple[int, dict[str, Any]]] = []
        for obj in objects:
            memo = self._memo.get(self._memo_key(obj, desired)) if obj.get("apiVersion") != desired else obj
            out.append(memo)
            if memo is None:
                todo.append((len(out) - 1, obj))
        if todo:
            converted = await self._call(info, [obj for _, obj in todo], desired)
            for (i, obj), new in zip(todo, converted, strict=True):
                out[i] = new
                self._remember(self._memo_key(obj, desired), new)
        return [o for o in out if o is not None]

    async def convert_one(self, info: ResourceInfo, obj: dict[str, Any], desired: str) -> dict[str, Any]:
        if info.builtin:  # in process: no review, no memo (as :meth:`convert`)
            return obj if obj.get("apiVersion") == desired else builtin_conversion.convert(
                info.group, info.plural, obj, desired)
        return (await self.convert(info, [obj], desired))[0]

    @staticmethod
    def _memo_key(obj: Mapping[str, Any], desired: str) -> tuple[str, str, str]:
        meta = obj.get("metadata") or {}
        return (str(meta.get("uid", "")), str(meta.get("resourceVersion", "")), desired)

    def _remember(self, key: tuple[str, str, str], obj: dict[str, Any]) -> None:
        if not key[0] or not key[1]:
            return
        self._memo[key] = obj
        self._memo.move_to_end(key)
        while len(self._memo) > CACHE_SIZE:
            self._memo.popitem(last=False)

    async def _call(self, info: ResourceInfo, objects: list[dict[str, Any]], desired: str) -> list[dict[str, Any]]:
        found = self._webhook(info)
        gvk = f"{info.group}/{info.version}, Kind={info.kind}"
        if found is None:  # the CRD stopped converting through a webhook: relabel, as strategy None does
            return [{**o, "apiVersion": desired} for o in objects]
        review: dict[str, Any] = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                  "request": {"uid": str(uuid.uuid4()), "desiredAPIVersion": desired, "objects": objects}}
        try:
            response = await self.client.post(found[0], review, TIMEOUT)
        except CallFailed as exc:
            raise st.internal_error(f"conversion webhook for {gvk} failed: {exc}") from None
        result = response.get("result") or {}
        if result.get("status") != "Success":
            raise st.internal_error(f"conversion webhook for {gvk} failed: {result.get('message', 'no reason')}")
        converted = response.get("convertedObjects")
        if response.get("uid") != review["request"]["uid"] or not isinstance(converted, list) or \
                len(converted) != len(objects):
            raise st.internal_error(f"conversion webhook for {gvk} returned an invalid response")
        for old, new in zip(objects, converted, strict=True):
            if not isinstance(new, dict) or new.get("apiVersion") != desired:
                raise st.internal_error(f"conversion webhook for {gvk} returned an object of another version")
            if new.get("kind") != old.get("kind") or _identity(new) != _identity(old):
                raise st.internal_error(f"conversion webhook for {gvk} changed the kind, name, namespace or uid "
                                        "of an object")
        return converted

    # -- serving a request of a converted version ----------------------------------------------------

    async def serve(self, request: web.Request, t: Target, storage_t: Target, dispatch: Dispatch,
                    update: Dispatch, read: Callable[[Target], Awaitable[dict[str, Any]]]) -> web.StreamResponse:
        """Serve ``request`` for ``t`` through ``storage_t``'s handlers, converting at the edges."""
        desired = t.info.api_version
        if t.info.builtin and t.info.group == storage_t.info.group:
            request[REQUEST_VERSION_KEY] = t.info.version
        labels = builtin_conversion.field_labels(t.info.group, t.info.plural) if t.info.builtin else None
        if labels is not None and request.query.get("fieldSelector"):
            selector = storage_field_selector(request.query["fieldSelector"], labels)
            request = request.clone(rel_url=request.rel_url.update_query(fieldSelector=selector))
        if request.method == "GET" and (t.watch or request.query.get("watch", "") not in ("", "0", "false")):
            request[CONVERT_WATCH_KEY] = (self, t.info, desired)
            return await dispatch(request, storage_t)
        if t.subresource == "scale":
            return await dispatch(request, storage_t)
        if request.method in ("POST", "PUT") or (
                request.method == "PATCH" and request.content_type == "application/apply-patch+yaml"):
            await self._convert_body(request, storage_t, t)
        elif request.method == "PATCH":
            return await self._patch(request, t, storage_t, update, read)
        resp = await dispatch(request, storage_t)
        answered = request.get(ANSWER_OBJECT_KEY) if request.method == "POST" and resp.status == 201 else None
        return await self.convert_response(resp, t.info, desired, answered)

    async def _convert_body(self, request: web.Request, storage_t: Target, t: Target) -> None:
        ctype = "application/yaml" if request.content_type == "application/apply-patch+yaml" else content_type(request)
        obj = decode_object(parse_document(await read_body(request), ctype))
        obj["apiVersion"] = t.info.api_version
        rules = _CREATE_RULES.get((t.info.group, t.info.plural)) if request.method == "POST" else None
        causes = rules(obj, t.namespace) if rules is not None else []
        if causes:
            meta = obj.get("metadata") or {}
            raise st.invalid(t.info, str(meta.get("name") or meta.get("generateName") or ""), causes)
        if t.info.builtin:  # an apply configuration names only what its manager owns: no implied defaults
            partial = request.method == "PATCH"
            converted = builtin_conversion.convert(t.info.group, t.info.plural, obj, storage_t.info.api_version,
                                                   partial=partial)
            if not partial:  # a new object (nobody else holds it): the handler takes it without a re-decoding
                request[OBJECT_KEY] = converted
                return
        else:  # a webhook's answer may be remembered (and shared): the handler decodes a copy of its own
            converted = await self.convert_one(t.info, obj, storage_t.info.api_version)
        request[BODY_KEY] = orjson.dumps(converted)

    async def _patch(self, request: web.Request, t: Target, storage_t: Target, update: Dispatch,
                     read: Callable[[Target], Awaitable[dict[str, Any]]]) -> web.StreamResponse:
        from ..registry.patch import PatchError, json_merge_patch, json_patch, strategic_merge_patch

        kinds: dict[str, Callable[[Any, Any], Any]] = {
            "application/json-patch+json": json_patch, "application/merge-patch+json": json_merge_patch}
        if t.info.builtin:
            kinds["application/strategic-merge-patch+json"] = lambda obj, doc: strategic_merge_patch(obj, doc, t.info)
        apply = kinds.get(request.content_type)
        if apply is None:
            raise st.unsupported_media_type(request.content_type)
        try:
            doc = orjson.loads(await read_body(request))
        except orjson.JSONDecodeError as e:
            raise st.bad_request(f"error decoding patch: {e}") from None
        for attempt in range(MAX_PATCH_RETRIES):
            current = await read(storage_t)
            shown = copy.deepcopy(await self.convert_one(t.info, current, t.info.api_version))
            try:
                patched = apply(shown, doc)
            except PatchError as e:
                raise st.StatusError(e.code, e.reason, e.message) from None
            want = (patched.get("metadata") or {}).get("resourceVersion")
            if want and str(want) != current["metadata"]["resourceVersion"]:
                raise st.conflict(t.info, t.name)
            patched.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
            stored = await self.convert_one(t.info, patched, storage_t.info.api_version)
            request[BODY_KEY] = orjson.dumps(stored)
            try:
                resp = await update(request, storage_t)
            except st.StatusError as e:
                if e.code != 409 or attempt == MAX_PATCH_RETRIES - 1:
                    raise
                continue
            return await self.convert_response(resp, t.info, t.info.api_version)
        raise st.conflict(t.info, t.name)

    async def convert_response(self, resp: web.StreamResponse, info: ResourceInfo, desired: str,
                               answered: Mapping[str, Any] | None = None) -> web.StreamResponse:
        """An object or list answer of the storage version, re-encoded in ``desired``. ``answered``: the object
        whose JSON the answer is (read-only: converted, not decoded again)."""
        if not isinstance(resp, web.Response) or not resp.body or resp.status >= 300:
            return resp
        if answered is not None and answered.get("kind") == info.kind:
            # a create's own answer (json_response's: its content type and warnings only): its body replaced
            resp.body = st.json_body(await self.convert_one(info, dict(answered), desired))
            return resp
        doc = orjson.loads(resp.body)  # type: ignore[arg-type]
        if not isinstance(doc, dict):
            return resp
        if doc.get("kind") == info.kind:
            doc = await self.convert_one(info, doc, desired)
        elif doc.get("kind") == info.list_kind:
            doc["apiVersion"] = desired
            doc["items"] = await self.convert(info, list(doc.get("items") or []), desired)
        elif doc.get("kind") == "Table":  # includeObject=Object rows carry whole objects
            rows = [r for r in doc.get("rows") or () if isinstance(r, dict) and isinstance(r.get("object"), dict)
                    and r["object"].get("kind") == info.kind]
            for row, obj in zip(rows, await self.convert(info, [r["object"] for r in rows], desired), strict=True):
                row["object"] = obj
        else:
            return resp
        return self._reencoded(resp, doc)

    @staticmethod
    def _reencoded(resp: web.Response, doc: Mapping[str, Any]) -> web.Response:
        """``resp`` answering ``doc`` instead (its status, warnings and content type kept)."""
        headers = {k: v for k, v in resp.headers.items() if k.lower() == "warning"}
        headers["Content-Type"] = resp.headers.get("Content-Type", "application/json")  # a Table's stays
        return web.Response(status=resp.status, body=st.json_body(doc), headers=headers)

    async def convert_lines(self, info: ResourceInfo, desired: str, data: bytes) -> bytes:
        """Watch event lines with their objects converted to ``desired`` (one review per batch of lines)."""
        lines = data.split(b"\n")
        events: list[tuple[int, dict[str, Any]]] = []
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            event = orjson.loads(line)
            obj = event.get("object") or {}
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED") and obj.get("apiVersion") != desired:
                events.append((i, event))
            elif event.get("type") == "BOOKMARK":
                obj["apiVersion"] = desired
                lines[i] = orjson.dumps(event)
        if events:
            converted = await self.convert(info, [ev["object"] for _, ev in events], desired)
            for (i, ev), obj in zip(events, converted, strict=True):
                lines[i] = orjson.dumps({"type": ev["type"], "object": obj})
        return b"\n".join(lines)


class ConvertingWatchResponse(web.StreamResponse):
    """A watch stream whose event objects are converted before they are written."""

    def __init__(self, conversion: Conversion, info: ResourceInfo, desired: str, *,
                 headers: Mapping[str, str]) -> None:
        super().__init__(status=200, headers=headers)
        self._conversion = conversion
        self._info = info
        self._desired = desired

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        try:
            out = await self._conversion.convert_lines(self._info, self._desired, bytes(data))
        except st.StatusError as err:  # the stream is open: the client sees an ERROR event (and re-watches)
            out = orjson.dumps({"type": "ERROR", "object": err.status()}) + b"\n"
        await super().write(out)
