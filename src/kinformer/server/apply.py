"""Server-side apply and managed-fields tracking (``metadata.managedFields``, ``fieldsType: FieldsV1``).

A field set is a set of paths; a path is a tuple of FieldsV1 path elements: ``f:<name>`` (object field),
``k:<json>`` (associative list item by its keys), ``v:<json>`` (set member), ``i:<n>`` (atomic-list index,
unused here because atomic lists are owned whole). An applied configuration owns its leaves plus the
membership of each associative-list item, as structured-merge-diff's ``ToFieldSet`` does.

Invariants kept by :func:`server_side_apply`:
  * the applier's Apply entry owns exactly the fields of its latest applied configuration;
  * fields the applier owned before and no longer applies are removed from the object unless another
    manager still owns them (or something beneath them);
  * a field in the applied configuration owned by another manager with a different live value is a conflict,
    unless ``force``, which moves ownership of the conflicting fields to the applier.
:func:`update_managed_fields` records non-apply writes (PUT/PATCH/POST): the writer takes ownership of the
fields it changed; removed fields leave every set.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from kinformer.server.patch import PatchError, ResourceInfoLike, list_strategy

__all__ = [
    "ApplyConflict",
    "fields_to_set",
    "server_side_apply",
    "set_to_fields",
    "update_managed_fields",
]

Path = tuple[str, ...]
FieldSet = set[Path]

_IGNORED_META = frozenset({"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                           "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"})
_BEFORE_FIRST_APPLY = "before-first-apply"


class ApplyConflict(Exception):
    """An apply that would change fields other managers own; ``causes`` are Status causes (409 Conflict)."""

    code = 409

    def __init__(self, message: str, causes: list[dict[str, str]]) -> None:
        super().__init__(message)
        self.message = message
        self.causes = causes


# ------------------------------------------------------------------------------------------ path elements

def _key_element(item: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    return "k:" + json.dumps({k: item.get(k) for k in sorted(keys)}, separators=(",", ":"), sort_keys=True)


def _value_element(value: Any) -> str:
    return "v:" + json.dumps(value, separators=(",", ":"), sort_keys=True)


def _is_keyed(item: Any, keys: tuple[str, ...]) -> bool:
    return isinstance(item, dict) and all(k in item for k in keys)


def _field_set(obj: Mapping[str, Any], info: ResourceInfoLike | None, subresource: str | None) -> FieldSet:
    """The paths an object's content sets (leaves and associative-list item memberships)."""
    return set(_field_values(obj, info, subresource))


def _field_values(obj: Mapping[str, Any], info: ResourceInfoLike | None,
                  subresource: str | None) -> dict[Path, Any]:
    """Each path of :func:`_field_set` with its value (``True`` for list-item and set memberships)."""
    out: dict[Path, Any] = {}
    for name, value in obj.items():
        if name in ("apiVersion", "kind") or value is None:
            continue
        if not _tracked(name, subresource, info):
            continue
        if name == "metadata" and isinstance(value, Mapping):
            for meta_name, meta_value in value.items():
                if meta_name not in _IGNORED_META and meta_value is not None:
                    _collect(meta_value, ("metadata", meta_name), ("f:metadata", f"f:{meta_name}"), out, info)
            continue
        _collect(value, (name,), (f"f:{name}",), out, info)
    return out


def _tracked(top: str, subresource: str | None, info: ResourceInfoLike | None) -> bool:
    if subresource == "status":
        return top == "status"
    if top == "status" and info is not None:
        return "status" not in (getattr(info, "subresources", None) or ())
    return True


def _collect(value: Any, names: tuple[str, ...], path: Path, out: dict[Path, Any],
             info: ResourceInfoLike | None) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            if item is not None:
                _collect(item, (*names, key), (*path, f"f:{key}"), out, info)
        return
    if isinstance(value, list) and value:
        strategy = list_strategy(info, names)
        if strategy.kind == "map" and strategy.keys and all(_is_keyed(i, strategy.keys) for i in value):
            for item in value:
                item_path = (*path, _key_element(item, strategy.keys))
                out[item_path] = True
                for key, sub in item.items():
                    if sub is not None:
                        _collect(sub, (*names, key), (*item_path, f"f:{key}"), out, info)
            return
        if strategy.kind == "set" and all(not isinstance(i, dict | list) for i in value):
            for item in value:
                out[(*path, _value_element(item))] = True
            return
    out[path] = value


# ---------------------------------------------------------------------------------- FieldsV1 conversion

def set_to_fields(paths: Iterable[Path]) -> dict[str, Any]:
    """FieldsV1 JSON for a field set; a node that is itself owned and has children gets a ``"."`` entry."""
    root: dict[str, Any] = {}
    owned: list[dict[str, Any]] = []
    for path in paths:
        node = root
        for element in path:
            child = node.get(element)
            if child is None:
                child = node[element] = {}
            node = child
        owned.append(node)
    for node in owned:  # distinct paths own distinct nodes; a "." child is never a path element
        if node and "." not in node:
            node["."] = {}
    return _sorted_fields(root)


def _sorted_fields(node: dict[str, Any]) -> dict[str, Any]:
    return {key: _sorted_fields(node[key]) for key in sorted(node)}


def fields_to_set(fields: Mapping[str, Any] | None) -> FieldSet:
    """The field set described by FieldsV1 JSON (inverse of :func:`set_to_fields`)."""
    out: FieldSet = set()

    def walk(node: Mapping[str, Any], path: Path) -> None:
        for key, child in node.items():
            if key == ".":
                out.add(path)
                continue
            child_path = (*path, key)
            if isinstance(child, Mapping) and child:
                walk(child, child_path)
            else:
                out.add(child_path)

    walk(fields or {}, ())
    return out


# ------------------------------------------------------------------------------------------- navigation

def _find_item(items: list[Any], element: str) -> int:
    if element.startswith("k:"):
        wanted = json.loads(element[2:])
        for i, item in enumerate(items):
            if isinstance(item, dict) and all(item.get(k) == v for k, v in wanted.items()):
                return i
    elif element.startswith("v:"):
        wanted = json.loads(element[2:])
        for i, item in enumerate(items):
            if item == wanted:
                return i
    elif element.startswith("i:"):
        index = int(element[2:])
        if 0 <= index < len(items):
            return index
    return -1


_ABSENT = object()


def _get_path(obj: Any, path: Path) -> Any:
    node = obj
    for element in path:
        if element.startswith("f:") and isinstance(node, dict):
            node = node.get(element[2:], _ABSENT)
        elif isinstance(node, list):
            index = _find_item(node, element)
            node = node[index] if index >= 0 else _ABSENT
        else:
            return _ABSENT
        if node is _ABSENT:
            return _ABSENT
    return node


def _remove_path(obj: Any, path: Path, keep: FieldSet) -> None:
    """Remove ``path`` from ``obj``; parents it leaves empty go too unless owned (``keep``) or ``metadata``."""
    chain: list[tuple[Any, str]] = []
    node = obj
    for element in path:
        child = _get_path(node, (element,))
        if child is _ABSENT:
            return
        chain.append((node, element))
        node = child
    for depth in range(len(chain) - 1, -1, -1):
        container, element = chain[depth]
        if depth < len(chain) - 1:
            emptied = _get_path(container, (element,))
            if emptied or path[:depth + 1] in keep or path[:depth + 1] == ("f:metadata",):
                return
        if isinstance(container, dict):
            container.pop(element[2:], None)
        else:
            index = _find_item(container, element)
            if index >= 0:
                container.pop(index)


# ---------------------------------------------------------------------------------------------- merging

def _merge(live: Any, applied: Any, names: tuple[str, ...], info: ResourceInfoLike | None) -> Any:
    if isinstance(live, dict) and isinstance(applied, dict):
        result = dict(live)
        for key, value in applied.items():
            if value is not None:
                result[key] = _merge(live.get(key), value, (*names, key), info)
        return result
    if isinstance(live, list) and isinstance(applied, list):
        strategy = list_strategy(info, names)
        if strategy.kind == "map" and strategy.keys and all(_is_keyed(i, strategy.keys) for i in live + applied):
            return _merge_keyed(live, applied, strategy.keys, names, info)
        if strategy.kind == "set":
            return list(live) + [copy.deepcopy(item) for item in applied if item not in live]
    return copy.deepcopy(applied)


def _merge_keyed(live: list[Any], applied: list[Any], keys: tuple[str, ...], names: tuple[str, ...],
                 info: ResourceInfoLike | None) -> list[Any]:
    result = list(live)
    for item in applied:
        element = _key_element(item, keys)
        index = _find_item(result, element)
        if index >= 0:
            result[index] = _merge(result[index], item, names, info)
        else:
            result.append(copy.deepcopy(item))
    return result


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


# --------------------------------------------------------------------------------------- managed entries

def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry_id(entry: Mapping[str, Any]) -> tuple[str, str, str]:
    return entry.get("manager", ""), entry.get("operation", ""), entry.get("subresource", "") or ""


def _meta(obj: Any) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _parse_entries(obj: Mapping[str, Any] | None) -> list[tuple[dict[str, Any], FieldSet]]:
    entries = _meta(obj).get("managedFields")
    if not isinstance(entries, list):
        return []
    parsed = []
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("manager") is not None:
            parsed.append((dict(entry), fields_to_set(entry.get("fieldsV1"))))
    return parsed


def _decodable(entries: Any) -> bool:
    """Whether a request's managedFields decode (a list of objects whose ``fieldsV1`` is an object when set).

    Like kube's field manager, an undecodable list is ignored in favour of the live object's history.
    """
    if not isinstance(entries, list):
        return False
    for entry in entries:
        if not isinstance(entry, Mapping):
            return False
        fields = entry.get("fieldsV1")
        if fields is not None and not isinstance(fields, Mapping):
            return False
    return True


def _render_entries(entries: list[tuple[dict[str, Any], FieldSet]]) -> list[dict[str, Any]]:
    out = []
    for entry, paths in entries:
        if not paths:
            continue
        rendered = {k: v for k, v in entry.items() if k != "fieldsV1"}
        rendered["fieldsType"] = "FieldsV1"
        rendered["fieldsV1"] = set_to_fields(paths)
        out.append(rendered)
    return out


def _upsert(entries: list[tuple[dict[str, Any], FieldSet]], manager: str, operation: str, api_version: str,
            subresource: str | None, paths: FieldSet, now: str | None) -> None:
    wanted = (manager, operation, subresource or "")
    for i, (entry, old_paths) in enumerate(entries):
        if _entry_id(entry) == wanted:
            if old_paths != paths or entry.get("apiVersion") != api_version:
                entry = {**entry, "apiVersion": api_version, "time": now or _now()}
            entries[i] = (entry, paths)
            return
    entry = {"manager": manager, "operation": operation, "apiVersion": api_version, "time": now or _now()}
    if subresource:
        entry["subresource"] = subresource
    entries.append((entry, paths))


def _with_managed_fields(obj: dict[str, Any], entries: list[tuple[dict[str, Any], FieldSet]]) -> dict[str, Any]:
    meta = dict(_meta(obj))
    rendered = _render_entries(entries)
    if rendered:
        meta["managedFields"] = rendered
    else:
        meta.pop("managedFields", None)
    obj["metadata"] = meta
    return obj


# ------------------------------------------------------------------------------------------------ conflicts

def _path_string(path: Path) -> str:
    parts = []
    for element in path:
        if element.startswith("f:"):
            parts.append("." + element[2:])
        elif element.startswith("k:"):
            keys = json.loads(element[2:])
            parts.append("[" + ",".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in keys.items()) + "]")
        elif element.startswith("v:"):
            parts.append(f"[={element[2:]}]")
        else:
            parts.append(f"[{element[2:]}]")
    return "".join(parts)


def _manager_label(entry: Mapping[str, Any]) -> str:
    label = json.dumps(entry.get("manager", ""))
    if entry.get("subresource"):
        label += f" with subresource {json.dumps(entry['subresource'])}"
    if entry.get("operation") == "Update":
        label += f" using {entry.get('apiVersion', '')}"
    return label


def _conflict_error(conflicts: list[tuple[str, Path]]) -> ApplyConflict:
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {label}: {_path_string(path)}",
               "field": _path_string(path)} for label, path in conflicts]
    if len(conflicts) == 1:
        label, path = conflicts[0]
        return ApplyConflict(f"Apply failed with 1 conflict: conflict with {label}: {_path_string(path)}", causes)
    by_manager: dict[str, list[str]] = {}
    for label, path in conflicts:
        by_manager.setdefault(label, []).append(_path_string(path))
    lines = []
    for label in sorted(by_manager):
        lines.append(f"conflicts with {label}:")
        lines.extend(f"- {p}" for p in sorted(by_manager[label]))
    return ApplyConflict(f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines), causes)


# -------------------------------------------------------------------------------------------------- apply

def server_side_apply(live: Mapping[str, Any] | None, applied: Mapping[str, Any], *, manager: str, force: bool,
                      info: ResourceInfoLike | None, subresource: str | None = None,
                      now: str | None = None) -> dict[str, Any]:
    """Apply ``applied`` (the manager's full intent) to ``live`` (``None`` on create); returns a new object.

    Raises :class:`ApplyConflict` when the applied configuration changes fields other managers own and
    ``force`` is false; raises ``PatchError`` (400) for a malformed configuration.
    """
    if not manager:
        raise PatchError("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required "
                         "for apply patch", 422)
    if not isinstance(applied, Mapping):
        raise PatchError("apply patch must be an object", 400)
    if applied.get("metadata") is not None and not isinstance(applied["metadata"], Mapping):
        raise PatchError("metadata must be an object", 400)
    if _meta(applied).get("managedFields") is not None:
        raise PatchError("metadata.managedFields must be nil", 400)
    applied = _strip_nulls(dict(applied))
    api_version = str(applied.get("apiVersion") or (live or {}).get("apiVersion") or "")
    entries = _parse_entries(live)
    if live is not None and not entries:
        entries = [({"manager": _BEFORE_FIRST_APPLY, "operation": "Update", "apiVersion": api_version},
                    _field_set(live, info, subresource))]
    base = copy.deepcopy(dict(live)) if live is not None else {}
    merged = _merge(base, applied, (), info) if live is not None else copy.deepcopy(applied)
    new_set = _field_set(applied, info, subresource)
    me = (manager, "Apply", subresource or "")
    _resolve_conflicts(entries, me, new_set, base, merged, force)
    previous = next((paths for entry, paths in entries if _entry_id(entry) == me), set())
    _remove_abandoned(merged, previous - new_set, new_set, [p for e, p in entries if _entry_id(e) != me])
    _upsert(entries, manager, "Apply", api_version, subresource, new_set, now)
    return _with_managed_fields(merged, entries)


def _resolve_conflicts(entries: list[tuple[dict[str, Any], FieldSet]], me: tuple[str, str, str],
                       new_set: FieldSet, live: Any, merged: Any, force: bool) -> None:
    conflicts: list[tuple[str, Path]] = []
    for i, (entry, paths) in enumerate(entries):
        if _entry_id(entry) == me:
            continue
        clashing = {p for p in paths & new_set if _differs(live, merged, p)}
        if not clashing:
            continue
        if force:
            entries[i] = (entry, paths - clashing)
        else:
            conflicts.extend((_manager_label(entry), p) for p in sorted(clashing))
    if conflicts:
        raise _conflict_error(conflicts)


def _differs(live: Any, merged: Any, path: Path) -> bool:
    """Whether applying changes the value at ``path``; list-item memberships only compare presence."""
    before, after = _get_path(live, path), _get_path(merged, path)
    if path[-1][:2] in ("k:", "v:"):
        return (before is _ABSENT) != (after is _ABSENT)
    return before != after or type(before) is not type(after)


def _remove_abandoned(obj: dict[str, Any], abandoned: FieldSet, kept_by_me: FieldSet,
                      others: list[FieldSet]) -> None:
    owned = set(kept_by_me).union(*others) if others else set(kept_by_me)
    # Shortest first: dropping a list item takes its fields with it.
    for path in sorted(abandoned, key=len):
        if any(p[:len(path)] == path for p in owned) or _is_item_key(path):
            continue
        _remove_path(obj, path, owned)


def _is_item_key(path: Path) -> bool:
    """A key field of an associative-list item: it stays while the item does."""
    return len(path) >= 2 and path[-2].startswith("k:") and path[-1][2:] in json.loads(path[-2][2:])


# ------------------------------------------------------------------------------------------------ updates

def _changed_paths(old: Mapping[str, Any], new: Mapping[str, Any], info: ResourceInfoLike | None,
                   subresource: str | None) -> tuple[FieldSet, FieldSet]:
    old_values = _field_values(old, info, subresource)
    new_values = _field_values(new, info, subresource)
    changed = set()
    for path, value in new_values.items():
        before = old_values.get(path, _ABSENT)
        if before != value or type(before) is not type(value):
            changed.add(path)
    return changed, old_values.keys() - new_values.keys()


def update_managed_fields(old: Mapping[str, Any] | None, new: Mapping[str, Any], *, manager: str,
                          operation: str = "Update", api_version: str | None = None,
                          info: ResourceInfoLike | None = None, subresource: str | None = None,
                          now: str | None = None) -> dict[str, Any]:
    """A shallow copy of ``new`` (with a new ``metadata`` dict) whose managedFields record a write by ``manager``.

    The writer owns every field it changed (taken from other managers); removed fields leave every set. A
    managedFields list the client changed is taken as the starting point; ``[{}]`` clears the history.
    """
    result = dict(new)
    api_version = api_version or str(new.get("apiVersion") or "")
    requested = _meta(new).get("managedFields")
    previous = _meta(old).get("managedFields")
    if requested == [{}]:
        entries: list[tuple[dict[str, Any], FieldSet]] = []
    elif requested and requested != previous and _decodable(requested):
        entries = _parse_entries(new)
    else:
        entries = _parse_entries(old)
    changed, removed = _changed_paths(old or {}, new, info, subresource)
    me = (manager, operation, subresource or "")
    mine: FieldSet = set()
    for i, (entry, paths) in enumerate(entries):
        if _entry_id(entry) == me:
            mine = paths - removed
        else:
            entries[i] = (entry, paths - changed - removed)
    mine |= changed
    if mine or any(_entry_id(e) == me for e, _ in entries):
        _upsert(entries, manager, operation, api_version, subresource, mine, now)
    return _with_managed_fields(result, entries)
