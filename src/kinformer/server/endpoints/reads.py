"""Get and list: served from the watch cache, or from storage history for an exact or paginated snapshot."""

from __future__ import annotations

import asyncio
import builtins
from typing import Any

import orjson
from aiohttp import web

from ...clock import Clock
from ..filters.flowcontrol import seat_released
from ..machinery import status as st
from ..registry.objects import ObjectStore, parse_rv, served
from ..registry.resources import Registry, ResourceInfo
from ..schema.builtin_conversion import served_as
from ..storage.base import Compacted, FutureRevision, Storage
from ..storage.watchcache import CachedObject, WatchCache
from .query import CONTINUE_TOO_OLD, Filter, decode_continue, encode_continue, make_filter, parse_int64
from .responses import json_response, reencode
from .routing import Target

RV_WAIT_SECONDS = 3.0


class ReadHandlers:
    """get/list of the resource API; the state every handler group shares is declared here."""

    storage: Storage
    registry: Registry
    cache: WatchCache
    store: ObjectStore
    clock: Clock
    bookmark_interval: float
    rv_wait: float
    closing: asyncio.Event

    async def _wait_rv(self, rv: int) -> None:
        """Wait (bounded) until the cache has reached ``rv``; 504 ResourceVersionTooLarge otherwise."""
        if self.cache.revision >= rv:
            return
        async with seat_released():
            fresh = await self.cache.wait_fresh(rv, self.rv_wait)
        if not fresh:
            raise st.too_large_rv(rv)

    async def get(self, request: web.Request, t: Target) -> web.Response:
        rv_text = request.query.get("resourceVersion", "")
        info = t.info
        key = ObjectStore.key(info, t.namespace, t.name)
        if rv_text == "":
            kv = await self.storage.get(key)
            if kv is None:
                raise st.not_found(info, t.name)
            co = self._cached_at(info, key, kv.mod_revision)
            if co is not None:
                return json_response(reencode(co, info.api_version))
            obj = served(kv)
            if obj.get("apiVersion") != info.api_version:
                obj = served_as(obj, info.api_version)
            return json_response(obj)
        rv = parse_rv(rv_text)
        if rv:
            await self._wait_rv(rv)
        co = self.cache.bucket(info.storage_prefix).objects.get(key)
        if co is None:
            raise st.not_found(info, t.name)
        return json_response(reencode(co, info.api_version))

    def _cached_at(self, info: ResourceInfo, key: str, rev: int) -> CachedObject | None:
        """The watch cache's copy of ``key`` when it is the version at ``rev`` (a storage read's): its bytes are
        what decoding the stored value would serve (see :class:`~..storage.watchcache.CachedObject`), so a
        quorum read answers them instead of decoding and encoding the object again. None otherwise."""
        bucket = self.cache.buckets.get(info.storage_prefix)
        co = bucket.objects.get(key) if bucket is not None else None
        return co if co is not None and co.rev == rev else None

    async def list(self, request: web.Request, t: Target) -> web.Response:
        q = request.query
        info = t.info
        flt = make_filter(info, q)
        rv_text = q.get("resourceVersion", "")
        match = q.get("resourceVersionMatch", "")
        token = q.get("continue", "")
        limit_text = q.get("limit", "")
        limit = max(parse_int64(limit_text, "limit"), 0) if limit_text else 0  # kube: a negative limit is none
        if match not in ("", "Exact", "NotOlderThan"):
            raise st.invalid(info, "", [{"reason": "FieldValueNotSupported", "field": "resourceVersionMatch",
                                         "message": f'Unsupported value: "{match}": supported values: "Exact", '
                                                    '"NotOlderThan"'}])
        if match and not rv_text:
            raise st.invalid(info, "", [{"reason": "FieldValueForbidden", "field": "resourceVersionMatch",
                                         "message": "Forbidden: resourceVersionMatch is forbidden unless "
                                                    "resourceVersion is provided"}])
        if token:
            if rv_text:
                raise st.bad_request("specifying resource version is not allowed when using continue")
            rv, start = decode_continue(token)
            return await self._list_storage(t, flt, rv, limit, start, from_token=True)
        if match == "Exact" and rv_text == "0":
            raise st.invalid(info, "", [{"reason": "FieldValueForbidden", "field": "resourceVersionMatch",
                                         "message": "Forbidden: resourceVersionMatch \"exact\" is forbidden for "
                                                    "resourceVersion \"0\""}])
        if rv_text == "0":
            return self._list_cache(t, flt)
        if rv_text == "":
            if limit:
                return await self._list_storage(t, flt, 0, limit, "")
            await self._sync()
            return self._list_cache(t, flt)
        rv = parse_rv(rv_text)
        if match == "Exact" or (limit and match != "NotOlderThan"):
            return await self._list_storage(t, flt, rv, limit, "")
        await self._wait_rv(rv)
        return self._list_cache(t, flt)

    async def _sync(self) -> None:
        try:
            await self.cache.sync(timeout=max(self.rv_wait, 3.0))
        except TimeoutError:
            raise st.StatusError(504, "Timeout", "Timeout: watch cache did not catch up with storage",
                                 headers={"Retry-After": "1"}) from None

    def _list_cache(self, t: Target, flt: Filter) -> web.Response:
        info = t.info
        rev = self.cache.revision
        objs = self.cache.bucket(info.storage_prefix).snapshot(t.namespace)
        av = info.api_version
        if flt.empty:
            items = [co.raw if co.api_version == av else reencode(co, av) for co in objs]
        else:
            items = [reencode(co, av) for co in objs if flt(co.obj)]
        return json_response(self._list_bytes(info, rev, items))

    @staticmethod
    def _list_bytes(info: ResourceInfo, rev: int, items: builtins.list[bytes], cont: str = "",
                    remaining: int | None = None) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rev)}
        if cont:
            meta["continue"] = cont
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        head = orjson.dumps({"kind": info.list_kind, "apiVersion": info.api_version, "metadata": meta})
        return head[:-1] + b',"items":[' + b",".join(items) + b"]}\n"

    async def _list_storage(self, t: Target, flt: Filter, rev: int, limit: int, start: str, *,
                            from_token: bool = False) -> web.Response:
        """A (paginated) list at a fixed revision, read from storage history."""
        info = t.info
        prefix = info.storage_prefix + (f"{t.namespace}/" if t.namespace else "")
        start_key = prefix + start if start else ""
        items: list[bytes] = []
        last = start_key
        more = False
        read_rev = max(rev, 0)
        av = info.api_version
        while True:
            want = 0 if not limit else (limit - len(items) if flt.empty else max(limit, 256))
            res = await self._storage_list(prefix, read_rev, last, want, from_token=from_token)
            read_rev = res.revision
            kvs = res.kvs
            for i, kv in enumerate(kvs):
                last = kv.key
                obj = served(kv)
                if not flt.empty and not flt(obj):
                    continue
                if obj.get("apiVersion") != av:
                    obj = served_as(obj, av)
                items.append(orjson.dumps(obj))
                if limit and len(items) >= limit:
                    more = i + 1 < len(kvs) or res.more
                    break
            else:
                more = res.more
                if more and (not limit or len(items) < limit):
                    continue
            break
        cont = ""
        remaining = None
        if more:
            cont = encode_continue(read_rev, last[len(prefix):])
            if flt.empty:
                remaining = await self.storage.count(prefix, read_rev, last)
        return json_response(self._list_bytes(info, read_rev, items, cont, remaining))

    async def _storage_list(self, prefix: str, read_rev: int, last: str, want: int, *, from_token: bool) -> Any:
        """One storage page; 410 (with a fresh continue token for pagination) when compacted, 504 when ahead."""
        for _ in range(2):
            try:
                return await self.storage.list(prefix, read_rev, last, want)
            except Compacted as e:
                if from_token:
                    raise st.expired(CONTINUE_TOO_OLD, continue_token=self._fresh_token(prefix, last)) from None
                raise st.expired(f"too old resource version: {read_rev} ({e.compacted})") from None
            except FutureRevision:
                async with seat_released():
                    fresh = await self.cache.wait_for(read_rev, self.rv_wait)
                if not fresh:
                    raise st.too_large_rv(read_rev) from None
        raise st.too_large_rv(read_rev)

    @staticmethod
    def _fresh_token(prefix: str, last: str) -> str:
        """A continue token that resumes after ``last`` at the latest revision (an inconsistent continuation)."""
        return encode_continue(-1, last[len(prefix):]) if last else ""
