"""Create-or-update in one call (controller-runtime ``controllerutil.CreateOrUpdate`` / ``CreateOrPatch``).

``op, obj = await create_or_update(client, "secrets", desired, mutate)``: reads the object named by
``desired`` (name, namespace); if it does not exist, ``mutate(copy of desired)`` is created (``"created"``);
otherwise ``mutate`` is applied to a plain copy of the live object and, when that changed anything, the
result is written (``"updated"``), else nothing is written (``"unchanged"``). ``mutate`` gets a plain,
mutable dict, may be a coroutine function, and must not change the name or namespace.

* :func:`create_or_update` writes with PUT, so the write applies only to the version it read; a Conflict
  (or an AlreadyExists from a racing create) re-reads and re-runs ``mutate``, up to ``steps`` times. The
  first read may come from a cache (``mgr.client``); retries read the server (``client.api_client``).
* :func:`create_or_patch` sends only what ``mutate`` changed, as a JSON merge patch (lists are replaced
  whole, as merge patches do), and the ``status`` changes through the status subresource when the resource
  has one. Without ``optimistic_lock`` the patch applies to whatever version is live (no conflicts);
  with it, the patch carries the resourceVersion it was computed from and conflicts are retried.

A Secret's ``stringData`` is folded into ``data`` (base64) before comparing and writing, as the API server
would store it, so a mutate that sets ``stringData`` reports ``"unchanged"`` once the data is there.
"""

from __future__ import annotations

import base64
import copy
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from kinformer.client.objects import to_plain
from kinformer.controller.retry import DEFAULT_RETRY_STEPS, retry_on_conflict
from kinformer.errors import AlreadyExists, Conflict, NotFound

__all__ = ["OperationResult", "create_or_patch", "create_or_update", "merge_patch_diff"]

OperationResult = Literal["created", "updated", "unchanged"]
MutateFunc = Callable[[dict[str, Any]], Awaitable[Any] | Any]
_MISSING = object()


def merge_patch_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The RFC 7386 merge patch that turns ``before`` into ``after`` ({} when they are equal)."""
    patch: dict[str, Any] = {key: None for key in before if key not in after}
    for key, value in after.items():
        old = before.get(key, _MISSING)
        if old == value:
            continue
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            patch[key] = merge_patch_diff(old, value)
        else:
            patch[key] = value
    return patch


def _fold_string_data(obj: dict[str, Any]) -> None:
    if obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1" and "stringData" in obj:
        string_data = obj.pop("stringData") or {}
        data = obj.get("data") or {}
        data.update({k: base64.b64encode(str(v).encode()).decode() for k, v in string_data.items()})
        obj["data"] = data


async def _mutated(mutate: MutateFunc, obj: dict[str, Any], name: str, namespace: str | None) -> dict[str, Any]:
    result = mutate(obj)
    if inspect.isawaitable(result):
        await result
    meta = obj.get("metadata") or {}
    if meta.get("name") != name or (meta.get("namespace") or None) != namespace:
        raise ValueError("mutate must not change the object's name or namespace")
    _fold_string_data(obj)
    return obj


def _key(obj: Mapping[str, Any]) -> tuple[str, str | None]:
    meta = obj.get("metadata") or {}
    if not meta.get("name"):
        raise ValueError("create_or_update needs the object's metadata.name (generateName cannot be matched)")
    return meta["name"], meta.get("namespace") or None


async def _create(client: Any, info: Any, desired: Mapping[str, Any], mutate: MutateFunc,
                  name: str, namespace: str | None) -> tuple[OperationResult, Any]:
    body = copy.deepcopy(to_plain(desired))
    body.setdefault("apiVersion", info.api_version)
    body.setdefault("kind", info.kind)
    body = await _mutated(mutate, body, name, namespace)
    try:
        return "created", await client.create(info, body, namespace)
    except AlreadyExists as exc:  # created meanwhile by someone else: retry as an update
        raise Conflict(exc.message, status=exc.status, code=409, reason="Conflict") from exc


WriteFunc = Callable[[Any, dict[str, Any], dict[str, Any]], Awaitable[Any]]


async def _create_or_write(client: Any, info: Any, obj: Mapping[str, Any], mutate: MutateFunc,
                           write: WriteFunc, steps: int) -> tuple[OperationResult, Any]:
    """Read, mutate a copy, and ``write(live, before, after)`` when it changed; retried on Conflict."""
    name, namespace = _key(obj)
    reader = [client]

    async def attempt() -> tuple[OperationResult, Any]:
        # a retry reads the server: a cache may not have the conflicting write yet
        read, reader[0] = reader[0], getattr(client, "api_client", client)
        try:
            live = await read.get(info, name, namespace)
        except NotFound:
            return await _create(client, info, obj, mutate, name, namespace)
        before = to_plain(live)
        after = await _mutated(mutate, copy.deepcopy(before), name, namespace)
        if after == before:
            return "unchanged", live
        return "updated", await write(live, before, after)

    return await retry_on_conflict(attempt, steps=steps)


async def create_or_update(client: Any, resource: str, obj: Mapping[str, Any], mutate: MutateFunc, *,
                           steps: int = DEFAULT_RETRY_STEPS) -> tuple[OperationResult, Any]:
    """Create or update (PUT) the object named by ``obj`` to what ``mutate`` makes of it (see the module doc)."""
    _key(obj)
    info = await client.resolve(resource)

    async def replace(live: Any, before: dict[str, Any], after: dict[str, Any]) -> Any:
        meta = after["metadata"]
        return await client.replace(info, after, meta["name"], meta.get("namespace"))

    return await _create_or_write(client, info, obj, mutate, replace, steps)


async def create_or_patch(client: Any, resource: str, obj: Mapping[str, Any], mutate: MutateFunc, *,
                          optimistic_lock: bool = False,
                          steps: int = DEFAULT_RETRY_STEPS) -> tuple[OperationResult, Any]:
    """Create, or merge-patch only what ``mutate`` changed (see the module doc)."""
    _key(obj)
    info = await client.resolve(resource)
    status_subresource = "status" in (getattr(info, "subresources", ()) or ())

    async def patch(live: Any, before: dict[str, Any], after: dict[str, Any]) -> Any:
        name, namespace = _key(after)
        diff = merge_patch_diff(before, after)
        status_diff = diff.pop("status", None) if status_subresource else None
        lock = {"metadata": {"resourceVersion": before["metadata"].get("resourceVersion")}}
        result = live
        if diff:
            if optimistic_lock:
                diff.setdefault("metadata", {}).update(lock["metadata"])
            result = await client.patch(info, name, diff, "merge", namespace)
        if status_diff is not None:
            body = {"status": status_diff, **(lock if optimistic_lock and not diff else {})}
            result = await client.patch_status(info, name, body, "merge", namespace)
        return result

    return await _create_or_write(client, info, obj, mutate, patch, steps)
