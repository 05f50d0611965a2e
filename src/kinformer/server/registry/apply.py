"""Server-side apply (``application/apply-patch+yaml``) over managed fields (see :mod:`.managedfields`).

An applied configuration owns its leaves plus the membership of each associative-list item, as
structured-merge-diff's ``ToFieldSet`` does.

Invariants kept by :func:`server_side_apply`:
  * the applier's Apply entry owns exactly the fields of its latest applied configuration;
  * fields the applier owned before and no longer applies are removed from the object unless another
    manager still owns them (or something beneath them);
  * a field in the applied configuration owned by another manager with a different live value is a conflict,
    unless ``force``, which moves ownership of the conflicting fields to the applier.
Non-apply writes are recorded by :func:`~kinformer.server.registry.managedfields.update_managed_fields`.
"""

from __future__ import annotations

import copy
import json
import operator
from collections.abc import Mapping
from typing import Any

import orjson

from ..machinery.jsoncopy import json_copy
from .managedfields import (
    ABSENT,
    MEMO_PATHS,
    Entry,
    FieldSet,
    Path,
    all_keyed,
    entry_id,
    field_parts,
    field_set,
    fields_to_set,
    key_value,
    meta_of,
    object_fields,
    parse_entries,
    set_to_fields,
    strategy_of,
    update_managed_fields,
    upsert,
    value_element,
    with_managed_fields,
)
from .patch import PatchError, ResourceInfoLike, freeze, merge_set, only_strings

__all__ = [
    "ApplyConflict",
    "fields_to_set",
    "server_side_apply",
    "set_to_fields",
    "update_managed_fields",
]

_BEFORE_FIRST_APPLY = "before-first-apply"


class ApplyConflict(Exception):
    """An apply that would change fields other managers own; ``causes`` are Status causes (409 Conflict)."""

    code = 409

    def __init__(self, message: str, causes: list[dict[str, str]]) -> None:
        super().__init__(message)
        self.message = message
        self.causes = causes


# ------------------------------------------------------------------------------------------- navigation

_GONE: Any = object()  # a list item removed by a _Finder, until it compacts the list


class _Finder:
    """Finds list items by FieldsV1 path element through an index of each list, built once per list.

    Every lookup is one hash lookup (never a scan), so walking n paths into lists of n items is linear.
    Removed list items leave a placeholder until :meth:`compact`, so that the indexes stay valid; the
    lists a finder indexed must not change in any other way while it is in use.
    """

    __slots__ = ("_indexes", "_parents", "_removed", "_wanted")

    def __init__(self) -> None:
        self._indexes: dict[tuple[int, Any], tuple[list[Any], dict[Any, int]]] = {}
        self._removed: dict[int, tuple[list[Any], int]] = {}
        self._wanted: dict[str, tuple[tuple[str, ...] | None, Any]] = {}  # element -> (its keys, frozen value)
        self._parents: dict[tuple[int, Path], tuple[Any, Any]] = {}  # (id(obj), path) -> (obj, value at path)

    def _index(self, items: list[Any], keys: tuple[str, ...] | None) -> dict[Any, int]:
        """Item -> its first position: by its key fields ``keys``, or by value when None."""
        found = self._indexes.get((id(items), keys))
        if found is None:
            index: dict[Any, int] = {}
            for i, item in enumerate(items):
                if keys is None:
                    index.setdefault(freeze(item), i)
                elif isinstance(item, dict):
                    index.setdefault(freeze({k: key_value(item, k) for k in keys}), i)
            found = self._indexes[(id(items), keys)] = (items, index)
        return found[1]

    def find(self, items: list[Any], element: str) -> int:
        """The position of the item ``element`` names in ``items``; -1 when there is none."""
        if element.startswith("i:"):
            index = int(element[2:])
            index = index if 0 <= index < len(items) else -1
        else:
            wanted = self._wanted.get(element)
            if wanted is None:
                wanted = self._wanted[element] = _decode_element(element)
            keys, frozen = wanted
            index = -1 if frozen is _GONE else self._index(items, keys).get(frozen, -1)
        return index if index < 0 or items[index] is not _GONE else -1

    def child(self, node: Any, element: str) -> Any:
        if element.startswith("f:") and isinstance(node, dict):
            return node.get(element[2:], ABSENT)
        if isinstance(node, list):
            index = self.find(node, element)
            return node[index] if index >= 0 else ABSENT
        return ABSENT

    def get(self, obj: Any, path: Path) -> Any:
        """The value at ``path`` in ``obj`` (ABSENT when there is none); its parent's lookup is remembered."""
        if len(path) > 1:
            key = (id(obj), path[:-1])
            parent = self._parents.get(key)
            if parent is None:
                parent = self._parents[key] = (obj, self.get(obj, path[:-1]))
            return self.child(parent[1], path[-1])
        return self.child(obj, path[0]) if path else obj

    def remove(self, container: Any, element: str) -> None:
        if isinstance(container, dict):
            container.pop(element[2:], None)
            return
        index = self.find(container, element)
        if index >= 0:
            container[index] = _GONE
            removed = self._removed.get(id(container), (container, 0))[1]
            self._removed[id(container)] = (container, removed + 1)

    def holds_something(self, node: Any) -> bool:
        if isinstance(node, list):
            return len(node) > self._removed.get(id(node), (node, 0))[1]
        return bool(node)

    def compact(self) -> None:
        """Drop the placeholders of removed items (the indexes are then stale: the finder is done)."""
        for items, _ in self._removed.values():
            items[:] = [item for item in items if item is not _GONE]
        self._removed.clear()
        self._indexes.clear()
        self._parents.clear()


def _decode_element(element: str) -> tuple[tuple[str, ...] | None, Any]:
    """(key fields, frozen key values) of a ``k:`` element, (None, frozen value) of a ``v:`` one; the value is
    ``_GONE`` for an element that names no item."""
    if element.startswith("k:"):
        wanted = _load(element[2:])
        return (tuple(sorted(wanted)), freeze(wanted)) if isinstance(wanted, dict) else (None, _GONE)
    if element.startswith("v:"):
        return None, freeze(_load(element[2:]))
    return None, _GONE


def _load(text: str) -> Any:
    """``json.loads(text)``, by orjson when it can (it refuses what json alone reads: NaN, huge integers)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _remove_path(obj: Any, path: Path, keep: FieldSet, finder: _Finder) -> None:
    """Remove ``path`` from ``obj``; parents it leaves empty go too unless owned (``keep``) or ``metadata``."""
    chain: list[tuple[Any, str]] = []
    node = obj
    for element in path:
        child = finder.child(node, element)
        if child is ABSENT:
            return
        chain.append((node, element))
        node = child
    for depth in range(len(chain) - 1, -1, -1):
        container, element = chain[depth]
        if depth < len(chain) - 1:
            emptied = finder.child(container, element)
            if finder.holds_something(emptied) or path[:depth + 1] in keep or path[:depth + 1] == ("f:metadata",):
                return
        finder.remove(container, element)


# ---------------------------------------------------------------------------------------------- merging

def _merge(live: Any, applied: Any, names: tuple[str, ...], info: ResourceInfoLike | None) -> Any:
    if isinstance(live, dict) and isinstance(applied, dict):
        result = dict(live)
        for key, value in applied.items():
            if value is not None:
                result[key] = _merge(live.get(key), value, (*names, key), info)
        return result
    if isinstance(live, list) and isinstance(applied, list):
        strategy = strategy_of(info, names)
        if strategy.kind == "map" and strategy.keys and all_keyed(live, strategy.keys) and \
                all_keyed(applied, strategy.keys):
            return _merge_keyed(live, applied, strategy.keys, names, info)
        if strategy.kind == "set":
            return merge_set(live, applied)
    return copy.deepcopy(applied)


def _merge_keyed(live: list[Any], applied: list[Any], keys: tuple[str, ...], names: tuple[str, ...],
                 info: ResourceInfoLike | None) -> list[Any]:
    """Each applied item merged into the first live item with its keys (appended when none has them)."""
    result = list(live)
    where: dict[Any, int] = {}
    for i, item in enumerate(result):
        where.setdefault(_item_key(item, keys), i)
    for item in applied:
        i = where.setdefault(_item_key(item, keys), len(result))
        if i < len(result):
            result[i] = _merge(result[i], item, names, info)
        else:
            result.append(copy.deepcopy(item))
    return result


def _item_key(item: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    return freeze({k: key_value(item, k) for k in keys})


def _strip_nulls(value: Any) -> Any:
    """``value`` without the null fields of its objects, at any depth (list items stay, null or not); a list of
    scalars only is copied as it is, its items' types looked at rather than each item."""
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        if not any(issubclass(kind, dict | list) for kind in set(map(type, value))):
            return list(value)
        return [_strip_nulls(v) if isinstance(v, dict | list) else v for v in value]
    return value


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
    if meta_of(applied).get("managedFields") is not None:
        raise PatchError("metadata.managedFields must be nil", 400)
    applied = _strip_nulls(dict(applied))
    api_version = str(applied.get("apiVersion") or (live or {}).get("apiVersion") or "")
    entries = parse_entries(live)
    if live is not None and not entries:
        entries = [({"manager": _BEFORE_FIRST_APPLY, "operation": "Update", "apiVersion": api_version},
                    field_set(live, info, subresource))]
    base = _content_copy(live) if live is not None else {}
    merged = _merge(base, applied, (), info) if live is not None else json_copy(dict(applied))
    rest, sets = field_parts(applied, info, subresource)
    me = (manager, "Apply", subresource or "")
    _resolve_conflicts(entries, me, rest, sets, base, merged, force)
    previous = next((paths for entry, paths in entries if entry_id(entry) == me), None)
    large = len(rest) + sum(map(len, sets.values())) > MEMO_PATHS
    if previous is None and large:
        new_set: FieldSet = set(rest)  # stands for the new entry's set: rendered as ``given``, its members unlisted
    else:
        new_set = rest.union(*(map(parent.__add__, zip(elements)) for parent, elements in sets.items()))
        _remove_abandoned(merged, (previous or set()) - new_set, new_set,
                          [p for e, p in entries if entry_id(e) != me])
    upsert(entries, manager, "Apply", api_version, subresource, new_set, now)
    # a large configuration's tree is rendered from it, as a create's (no tree built from its paths)
    given = (new_set, object_fields(applied, info, subresource)) if large else None
    return with_managed_fields(merged, entries, given)


def _content_copy(live: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``live`` but its managedFields (apply renders new ones; copying a long list's
    FieldsV1 trees cost more than copying the list)."""
    meta = live.get("metadata")
    if type(meta) is dict and "managedFields" in meta:
        live = {**live, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return json_copy(dict(live))


def _resolve_conflicts(entries: list[Entry], me: tuple[str, str, str],
                       rest: set[Path], sets: dict[Path, list[str]], live: Any, merged: Any,
                       force: bool) -> None:
    """Raise :class:`ApplyConflict` when the configuration (``rest`` and ``sets``, see ``field_parts``) changes
    paths other managers own, unless ``force``: then those paths leave the other managers' sets."""
    others = [i for i, (entry, _) in enumerate(entries) if entry_id(entry) != me]
    if not others:
        return
    conflicts: list[tuple[str, Path]] = []
    finder = _Finder()
    flips: dict[Path, set[str] | None] = {}  # shared by the managers: see _flipped
    general, flipping = _split_members(rest, sets, live, merged, finder)
    for i in others:
        entry, paths = entries[i]
        clashing = _changed(live, merged, paths & general, finder, flips)
        clashing.update(path for path in flipping if path in paths)
        if not clashing:
            continue
        if force:
            entries[i] = (entry, paths - clashing)
        else:
            conflicts.extend((_manager_label(entry), p) for p in sorted(clashing))
    if conflicts:
        raise _conflict_error(conflicts)


def _split_members(rest: set[Path], sets: dict[Path, list[str]], live: Any, merged: Any,
                   finder: _Finder) -> tuple[set[Path], list[Path]]:
    """(the configuration's paths whose change is checked one by one, the paths of the set members whose
    presence applying flips).

    A set that is a non-empty list of strings both before and after (``_flipped``) changes in the members
    of one side only, found by a set difference: its other members are never visited, whichever manager
    owns them. Every other path of the configuration is checked one by one (``_changed``)."""
    general = set(rest)
    flipping: list[Path] = []
    for parent, elements in sets.items():
        flipped = _flipped(finder.get(live, parent), finder.get(merged, parent))
        if flipped is None:
            general.update(map(parent.__add__, zip(elements)))
        elif flipped:
            flipping.extend((*parent, e) for e in flipped.intersection(elements))
    return general, flipping


_PARENT = operator.itemgetter(slice(None, -1))
_LAST = operator.itemgetter(-1)
_IS_MEMBER = operator.methodcaller("startswith", "v:")


def _changed(live: Any, merged: Any, paths: FieldSet, finder: _Finder,
             flips: dict[Path, set[str] | None]) -> set[Path]:
    """The ``paths`` (canonical, as :func:`field_set` writes them) whose value applying changes; list-item
    memberships only compare presence.

    The members of a list of strings are compared as sets (``flips``, by parent, see :func:`_flipped`): their
    paths are never visited one by one. The other paths are taken by parent, each parent looked up once on
    each side."""
    out: set[Path] = set()
    strings = set()
    parents = set(map(_PARENT, paths))
    for parent in parents:
        if parent not in flips:
            flips[parent] = _flipped(finder.get(live, parent), finder.get(merged, parent))
        flipped = flips[parent]
        if flipped is not None:
            strings.add(parent)
            out.update(path for path in ((*parent, e) for e in flipped) if path in paths)
    if strings == parents and all(map(_IS_MEMBER, map(_LAST, paths))):
        return out  # only members of lists of strings (no loop over them here)
    by_parent: dict[Path, list[str]] = {}
    for path in paths:
        parent = path[:-1]
        if parent not in strings or path[-1][:2] != "v:":
            by_parent.setdefault(parent, []).append(path[-1])
    for parent, elements in by_parent.items():
        before, after = finder.get(live, parent), finder.get(merged, parent)
        for element in elements:
            old, new = finder.child(before, element), finder.child(after, element)
            if element[:2] in ("k:", "v:"):
                differs = (old is ABSENT) != (new is ABSENT)
            else:
                differs = old != new or type(old) is not type(new)
            if differs:
                out.add((*parent, element))
    return out


def _flipped(before: Any, after: Any) -> set[str] | None:
    """When ``before`` and ``after`` are both non-empty lists of strings: the canonical ``v:`` elements of the
    strings in one of them only (a canonical element names a string of the list exactly when it is one of
    its members, and is a function of the string, one to one); None otherwise."""
    old_members, new_members = _strings(before), _strings(after)
    if old_members is None or new_members is None:
        return None
    if old_members == new_members:
        return set()
    return {value_element(text) for text in old_members ^ new_members}


def _strings(node: Any) -> set[str] | None:
    """The members of ``node`` when it is a non-empty list of strings only; None otherwise."""
    if isinstance(node, list) and node and only_strings(node):
        return set(node)
    return None


def _remove_abandoned(obj: dict[str, Any], abandoned: FieldSet, kept_by_me: FieldSet,
                      others: list[FieldSet]) -> None:
    if not abandoned:
        return
    owned = set(kept_by_me).union(*others) if others else set(kept_by_me)
    held = {p[:n] for p in owned for n in range(1, len(p) + 1)}  # owned paths and all their parents
    finder = _Finder()
    # Shortest first: dropping a list item takes its fields with it.
    for path in sorted(abandoned, key=len):
        if path in held or _is_item_key(path):
            continue
        _remove_path(obj, path, owned, finder)
    finder.compact()


def _is_item_key(path: Path) -> bool:
    """A key field of an associative-list item: it stays while the item does."""
    return len(path) >= 2 and path[-2].startswith("k:") and path[-1][2:] in json.loads(path[-2][2:])
