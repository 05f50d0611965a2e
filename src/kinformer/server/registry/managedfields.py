"""Managed-fields bookkeeping: field sets, FieldsV1 conversion and the entries of ``metadata.managedFields``.

A field set is a set of paths; a path is a tuple of FieldsV1 path elements: ``f:<name>`` (object field),
``k:<json>`` (associative list item by its keys), ``v:<json>`` (set member), ``i:<n>`` (atomic-list index,
unused here because atomic lists are owned whole). An object's content owns its leaves plus the
membership of each associative-list item, as structured-merge-diff's ``ToFieldSet`` does.

:func:`update_managed_fields` records non-apply writes (PUT/PATCH/POST): the writer takes ownership of the
fields it changed; removed fields leave every set. It runs on every write, so it is built for speed:

* the changed and removed paths come from one walk over the old and new objects together that skips
  every subtree whose encoding did not change (:func:`changed_paths`);
* parsing a FieldsV1 tree into its field set and rendering a field set back are memoised by content
  (bounded caches), and an entry whose set did not change keeps the FieldsV1 tree it came with;
* the managedFields of a create of a built-in kind are memoised by the object's tracked content and the
  client's entries (objects stamped from one template share them).

Invariant: a FieldsV1 tree, once in an object's managedFields, is an immutable value. This module builds
new trees and never changes one in place, and nothing else in the server does, so objects (and the
memos) share them freely.
"""

from __future__ import annotations

import json
import operator
import time
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from ...timestamps import rfc3339
from ..machinery.nesting import encoding_of
from .patch import ListStrategy, ResourceInfoLike, list_strategy, only_strings

Path = tuple[str, ...]
FieldSet = set[Path] | frozenset[Path]
Entry = tuple[dict[str, Any], FieldSet]

IGNORED_META = frozenset({"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                          "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"})
ABSENT: Any = object()
CACHE_SIZE = 2048  # distinct FieldsV1 trees (and rendered field sets) remembered; oldest dropped first
# A field set of more paths is rendered afresh, never remembered: the memo is for the many small sets objects
# share, and a large one (a list of 140,000 items) costs more to freeze, encode and decode than to render.
MEMO_PATHS = 4096

# (group, version, kind, path) of a built-in list -> its merge strategy (built-in schemas never change)
_builtin_lists: dict[tuple[Any, ...], ListStrategy] = {}
# FieldsV1 encoding -> (its field set, whether the tree is already in canonical form)
_parsed: dict[bytes, tuple[frozenset[Path], bool]] = {}
# field set -> canonical FieldsV1 encoding
_rendered: dict[frozenset[Path], bytes] = {}
# a create of a built-in kind, by its key (see _create_key) -> the shapes remembered under that key, oldest
# first: (the encoding of the tracked content, its managedFields as (entry but fieldsV1, FieldsV1 tree) pairs,
# whether the last entry is the writer's)
_Shape = tuple[bytes, tuple[tuple[dict[str, Any], dict[str, Any]], ...], bool]
_creates: dict[tuple[Any, ...], list[_Shape]] = {}
# a create of a built-in kind without history whose content holds no non-empty array (an Event, a ConfigMap), by
# (group, version, kind, subresource, the content's shape: see _flat_shape) -> the FieldsV1 tree it owns
_flat_creates: dict[tuple[Any, ...], dict[str, Any]] = {}
# built-in kinds (group, version, kind) a create of which held an array: their creates skip the shape walk and
# take the encoding memo (a Pod's walk would stop at its containers every time)
_arrayed: set[tuple[str, str, str]] = set()
CREATE_CACHE_SIZE = 256  # create keys remembered (a shape holds the object's tracked content, ~10 KB)
CREATE_KEY_SHAPES = 4  # shapes remembered under one key (encodings of one length)


def _remember(cache: dict[Any, Any], key: Any, value: Any, size: int = CACHE_SIZE) -> None:
    if len(cache) >= size:
        del cache[next(iter(cache))]
    cache[key] = value


# ------------------------------------------------------------------------------------------ path elements

_CONTAINERS = (dict, list)  # a tuple: isinstance of a union written in a loop builds the union each time
_SCALARS = (str, int, bool, type(None))  # encoded alike by json and orjson (no floats: 1e+16 vs 1e16)


def _json_element(value: Any) -> str:
    """Compact, key-sorted JSON exactly as Python's ``json`` writes it; orjson's faster output when identical.

    They agree on scalars other than floats and on flat objects of them, as long as the output is ASCII
    without escapes (json escapes non-ASCII, orjson does not).
    """
    if type(value) in _SCALARS or (type(value) is dict and all(type(v) in _SCALARS for v in value.values())):
        try:
            data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:  # integers beyond 64 bits
            data = b"\\"
        if data.isascii() and b"\\" not in data:
            return data.decode()
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


# Key fields of associative lists that an item may omit, with the default structured-merge-diff completes the
# key with (from the schema). In kube 1.32's built-in API that is only ``protocol`` (TCP) of container,
# ephemeral container and Service ports, keyed by (containerPort, protocol) and (port, protocol).
KEY_DEFAULTS: dict[str, Any] = {"protocol": "TCP"}


def key_value(item: Mapping[str, Any], key: str) -> Any:
    """The value of key field ``key`` of a list item (its default when the item omits it or sets null)."""
    value = item.get(key)
    return KEY_DEFAULTS.get(key) if value is None else value


def key_element(item: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    if len(keys) == 1:  # most lists: one key holding a string (a condition's type, a pod IP), written as is
        key = keys[0]
        value = item.get(key)
        if type(value) is str and _verbatim(value) and _verbatim(key):
            return f'k:{{"{key}":"{value}"}}'
    return "k:" + _json_element({k: key_value(item, k) for k in sorted(keys)})


def _verbatim(text: str) -> bool:
    """Whether :func:`_json_element` writes ``text`` between its quotes as it is: printable ASCII (space to
    ``~``) without a quote or a backslash (the others take its encoding)."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def value_element(value: Any) -> str:
    return "v:" + _json_element(value)


def _plain_strings(values: list[str]) -> list[str] | None:
    """Each string as its JSON encoding holds it between the quotes (itself), when no string of ``values``
    needs an escape or non-ASCII (json and orjson then agree); None otherwise. One encoding of the list:
    with no escape in it no string holds a quote, so ``","`` only ever separates two of them."""
    data = orjson.dumps(values)
    if not data.isascii() or b"\\" in data:
        return None
    return data[2:-2].decode().split('","')


def value_elements(items: list[Any]) -> list[str]:
    """``[value_element(item) for item in items]``, encoded in one go when every item is a string."""
    if len(items) > 1 and only_strings(items):
        plain = _plain_strings(items)
        if plain is not None:
            return ['v:"' + text + '"' for text in plain]
    return [value_element(item) for item in items]


def key_elements(items: list[dict[str, Any]], keys: tuple[str, ...]) -> list[str]:
    """``[key_element(item, keys) for item in items]``, encoded in one go when a single key holds strings."""
    if len(items) > 1 and len(keys) == 1:
        key = keys[0]
        values: list[Any] = [item.get(key) for item in items]
        if all(type(value) is str for value in values):
            plain = _plain_strings([key, *values])
            if plain is not None:
                head = 'k:{"' + plain[0] + '":"'
                return [head + text + '"}' for text in plain[1:]]
    return [key_element(item, keys) for item in items]


_SHORT_LIST = 8  # at most this many items: a loop beats the per-list setup of the item-free checks


def all_keyed(items: list[Any], keys: tuple[str, ...]) -> bool:
    """Whether every item is an object that has each of ``keys`` (or a default for it, ``KEY_DEFAULTS``);
    checked a key at a time, with no call per item (a short list, most of them, item by item in one loop)."""
    if len(items) <= _SHORT_LIST:
        needed = [k for k in keys if k not in KEY_DEFAULTS]
        for item in items:
            if not isinstance(item, dict):
                return False
            for k in needed:
                if k not in item:
                    return False
        return True
    if not all(issubclass(kind, dict) for kind in set(map(type, items))):
        return False
    return all(all(map(operator.methodcaller("__contains__", k), items)) for k in keys if k not in KEY_DEFAULTS)


def field_set(obj: Mapping[str, Any], info: ResourceInfoLike | None, subresource: str | None) -> set[Path]:
    """The paths an object's content sets (leaves and associative-list item memberships)."""
    return set(field_values(obj, info, subresource))


def field_values(obj: Mapping[str, Any], info: ResourceInfoLike | None,
                 subresource: str | None) -> dict[Path, Any]:
    """Each path of :func:`field_set` with its value (``True`` for list-item and set memberships)."""
    out: dict[Path, Any] = {}
    _fill(obj, info, subresource, out)
    return out


class _SetsApart(dict[Path, Any]):
    """A :func:`collect` target that keeps the members of each set out of itself: ``sets`` maps each set's path
    to its members' path elements (a member's path is the set's path and its element), none made a path."""

    __slots__ = ("sets",)

    def __init__(self) -> None:
        super().__init__()
        self.sets: dict[Path, list[str]] = {}


def field_parts(obj: Mapping[str, Any], info: ResourceInfoLike | None,
                subresource: str | None) -> tuple[set[Path], dict[Path, list[str]]]:
    """:func:`field_set` in two parts: (its paths but the members of sets, each set's path -> its members' path
    elements, repeats kept). The field set is the first part and, for each set, its path plus each element."""
    out = _SetsApart()
    _fill(obj, info, subresource, out)
    return set(out), out.sets


def _fill(obj: Mapping[str, Any], info: ResourceInfoLike | None, subresource: str | None,
          out: dict[Path, Any]) -> None:
    """Add the paths (with values) of ``obj``'s tracked content to ``out`` (see :func:`collect`)."""
    for name, value in obj.items():
        if name in ("apiVersion", "kind") or value is None or not tracked(name, subresource, info):
            continue
        if name == "metadata" and isinstance(value, Mapping):
            for meta_name, meta_value in value.items():
                if meta_name not in IGNORED_META and meta_value is not None:
                    collect(meta_value, ("metadata", meta_name), ("f:metadata", f"f:{meta_name}"), out, info)
            continue
        collect(value, (name,), (f"f:{name}",), out, info)


def tracked(top: str, subresource: str | None, info: ResourceInfoLike | None) -> bool:
    if subresource == "status":
        return top == "status"
    if top == "status" and info is not None:
        return "status" not in (getattr(info, "subresources", None) or ())
    return True


def strategy_of(info: ResourceInfoLike | None, names: tuple[str, ...]) -> ListStrategy:
    """How server-side apply and managedFields key the list at ``names``, remembered for built-in kinds.

    :func:`~kinformer.server.registry.patch.list_strategy` (strategic merge patch's rules), except that a built-in
    list with ``x-kubernetes-list-map-keys`` is keyed by all of them, as structured-merge-diff keys it
    (container ports by containerPort and protocol, where the patch merge key is containerPort alone).
    """
    if info is None or not getattr(info, "builtin", True):
        return list_strategy(info, names)
    key = (info.group, getattr(info, "version", ""), info.kind, names)
    strategy = _builtin_lists.get(key)
    if strategy is None:
        strategy = _builtin_apply_strategy(info, names)
        _remember(_builtin_lists, key, strategy)
    return strategy


def _builtin_apply_strategy(info: ResourceInfoLike, names: tuple[str, ...]) -> ListStrategy:
    from ..schema.schemas import kind_node, node_at

    strategy = list_strategy(info, names)
    if strategy.kind == "map":
        node = node_at(kind_node(info.group, getattr(info, "version", "v1"), info.kind), names)
        if node is not None and node.list_type == "map" and node.list_map_keys:
            return ListStrategy("map", tuple(node.list_map_keys))
    return strategy


def _map_keys(value: list[Any], names: tuple[str, ...], info: ResourceInfoLike | None) -> tuple[str, ...] | None:
    """The item keys when ``value`` is an associative list whose every item has them; None otherwise."""
    strategy = strategy_of(info, names)
    if strategy.kind == "map" and strategy.keys and all_keyed(value, strategy.keys):
        return strategy.keys
    return None


def _is_set(value: list[Any], names: tuple[str, ...], info: ResourceInfoLike | None) -> bool:
    """Whether ``value`` is a set (by the schema) of scalars; its items' types are looked at, not each item."""
    return strategy_of(info, names).kind == "set" and not any(
        issubclass(kind, dict | list) for kind in set(map(type, value)))


def collect(value: Any, names: tuple[str, ...], path: Path, out: dict[Path, Any],
            info: ResourceInfoLike | None) -> None:
    """Add the paths (with values) that ``value`` at ``path`` sets to ``out``."""
    if isinstance(value, dict) and value:
        _collect_fields(value, names, path, out, info)
        return
    if isinstance(value, list) and value:
        keys = _map_keys(value, names, info)
        if keys is not None:
            for item, element in zip(value, key_elements(value, keys), strict=True):
                item_path = (*path, element)
                out[item_path] = True
                _collect_fields(item, names, item_path, out, info)
            return
        if _is_set(value, names, info):
            elements = value_elements(value)
            if type(out) is _SetsApart:
                out.sets[path] = elements
            else:
                out.update(dict.fromkeys(map(path.__add__, zip(elements)), True))  # no call per member
            return
    out[path] = value


def _collect_fields(obj: Mapping[str, Any], names: tuple[str, ...], path: Path, out: dict[Path, Any],
                    info: ResourceInfoLike | None) -> None:
    """:func:`collect` of each field of ``obj`` but nulls; a leaf (most fields are) without a call."""
    for key, item in obj.items():
        if item is None:
            continue
        if item and isinstance(item, _CONTAINERS):
            collect(item, (*names, key), (*path, f"f:{key}"), out, info)
        else:
            out[(*path, f"f:{key}")] = item


# ------------------------------------------------------------------------------------------ FieldsV1 of an object

class _Duplicate(Exception):
    """Two items of one associative list have the same keys (their field sets merge: take the general path)."""


def object_fields(obj: Mapping[str, Any], info: ResourceInfoLike | None, subresource: str | None) -> dict[str, Any]:
    """``set_to_fields(field_set(obj))`` built in one walk over the object, with no path sets.

    Falls back to the path sets when an associative list holds two items with the same keys.
    """
    try:
        out: dict[str, Any] = {}
        for name in sorted(obj):
            value = obj[name]
            if name in ("apiVersion", "kind") or value is None or not tracked(name, subresource, info):
                continue
            if name == "metadata" and isinstance(value, Mapping):
                meta = {k: v for k, v in value.items() if k not in IGNORED_META}
                node = _tree(meta, ("metadata",), info) if meta else None
                if node:
                    out["f:metadata"] = node
                continue
            node = _tree(value, (name,), info)
            if node is not None:
                out[f"f:{name}"] = node
        return out
    except _Duplicate:
        return set_to_fields(field_set(obj, info, subresource))


def _tree(value: Any, names: tuple[str, ...], info: ResourceInfoLike | None) -> dict[str, Any] | None:
    """The FieldsV1 node of ``value`` (None when it sets nothing: a non-empty object of nulls only)."""
    if isinstance(value, dict) and value:
        return _children(value, names, info) or None
    if isinstance(value, list) and value:
        keys = _map_keys(value, names, info)
        if keys is not None:
            items: dict[str, dict[str, Any]] = {}
            for item, element in zip(value, key_elements(value, keys), strict=True):
                if element in items:
                    raise _Duplicate(element)
                children = _children(item, names, info)
                items[element] = {".": {}, **children} if children else {}
            return {element: items[element] for element in sorted(items)}
        if _is_set(value, names, info):
            return {element: {} for element in sorted(set(value_elements(value)))}
    return {}


def _children(obj: Mapping[str, Any], names: tuple[str, ...], info: ResourceInfoLike | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in sorted(obj):
        item = obj[key]
        if item is None:
            continue
        if item and isinstance(item, dict | list):
            node = _tree(item, (*names, key), info)
            if node is not None:
                out["f:" + key] = node
        else:  # a leaf (inlined: most fields are)
            out["f:" + key] = {}
    return out


# ------------------------------------------------------------------------------------------ changed paths

def _same(old: Any, new: Any) -> bool:
    """Equal values with equal types throughout (``1``, ``1.0`` and ``true`` differ), by their encodings.

    One object is the same as itself: a write that shares what it did not change with the version it read (a
    status patch) skips those subtrees without encoding them."""
    if old is new:
        return True
    if old != new:
        return False
    try:
        return orjson.dumps(old) == orjson.dumps(new)
    except orjson.JSONEncodeError:  # integers beyond 64 bits: let the walk compare them
        return False


class Changes(set[Path]):
    """The changed paths of :func:`changed_paths`, remembering how they were found: ``wholes``, each subtree
    ``new`` sets where ``old`` has nothing (path, field names, value), whose paths all lie below it; and
    ``singles``, every other path added. So :func:`changes_tree` can render them without their paths.

    With ``defer``, a whole that is a list of more than ``MEMO_PATHS`` items (it sets at least one path) is
    also listed in ``deferred`` and its paths are left out of the set until :meth:`materialize` adds them:
    a caller that renders it from its value and finds no other path at or below its root never needs them.
    """

    __slots__ = ("deferred", "info", "singles", "wholes")

    def __init__(self, info: ResourceInfoLike | None = None, defer: bool = False) -> None:
        super().__init__()
        self.wholes: list[tuple[Path, tuple[str, ...], Any]] = []
        self.singles: list[Path] = []
        self.deferred: list[tuple[Path, tuple[str, ...], Any]] | None = [] if defer else None
        self.info = info

    def add(self, path: Path) -> None:
        set.add(self, path)  # not super(): no proxy object per path
        self.singles.append(path)

    def add_whole(self, path: Path, names: tuple[str, ...], value: Any) -> None:
        """Record ``value``, set at ``path`` where the old object had nothing."""
        self.wholes.append((path, names, value))
        if not value or (type(value) is not dict and type(value) is not list):  # a leaf: its one path, no walk
            set.add(self, path)
        elif self.deferred is not None and isinstance(value, list) and len(value) > MEMO_PATHS:
            self.deferred.append((path, names, value))
        else:
            self.update(_values(value, names, path, self.info))

    def add_fields(self, path: Path, names: tuple[str, ...], item: dict[str, Any]) -> None:
        """:meth:`add_whole` of each non-null field of ``item``, a new object at ``path`` (a new list item); a
        leaf field (most are) without a call."""
        wholes = self.wholes
        for key, value in item.items():
            if value is None:
                continue
            field = (*path, f"f:{key}")
            if not value or (type(value) is not dict and type(value) is not list):
                wholes.append((field, (*names, key), value))
                set.add(self, field)
            else:
                self.add_whole(field, (*names, key), value)

    def reaches_deferred(self, paths: Iterable[Path]) -> bool:
        """Whether a path of ``paths`` is the root of a deferred whole or lies below one."""
        roots = {root for root, _, _ in self.deferred or ()}
        depths = {len(root) for root in roots}
        return any(path[:n] in roots for path in paths for n in depths if len(path) >= n)

    def materialize(self) -> None:
        """Add the paths of the deferred wholes: the set is then every changed path."""
        for path, names, value in self.deferred or ():
            self.update(_values(value, names, path, self.info))
        if self.deferred:
            self.deferred = []


def changes_tree(changes: Changes, info: ResourceInfoLike | None,
                 also: FieldSet = frozenset()) -> dict[str, Any] | None:
    """``set_to_fields(changes | also)``, each wholly new subtree rendered from its value (as
    :func:`object_fields` renders an object: no paths, no sorting of them), under a tree of the other paths
    and the subtrees' roots. None when a subtree's associative list repeats a key (its paths merge), or when
    a path of ``also`` is a subtree's root or lies below one: then render the set instead.

    Exact because nothing else lies below a whole subtree's root, which is owned only when it is a leaf
    (then ``_tree`` gives ``{}``, as the set's tree has it)."""
    try:
        grafts = [(path, _tree(value, names, info)) for path, names, value in changes.wholes]
    except _Duplicate:
        return None
    roots = {path for path, node in grafts if node is not None}
    if any(path[:n] in roots for path in also for n in range(1, len(path) + 1)):
        return None
    tree = set_to_fields({*changes.singles, *roots, *also})
    for path, node in grafts:
        if node:
            parent = tree
            for element in path[:-1]:
                parent = parent[element]
            parent[path[-1]] = node
    return tree


def changed_paths(old: Mapping[str, Any], new: Mapping[str, Any], info: ResourceInfoLike | None,
                  subresource: str | None, defer: bool = False) -> tuple[Changes, set[Path]]:
    """(paths ``new`` sets with another value than ``old``, paths only ``old`` sets), in one walk over both.

    Exactly the comparison of :func:`field_values` of both objects (a leaf changes when its value or its
    type does), but a subtree whose encoding is unchanged is never visited. ``defer``: see :class:`Changes`.
    """
    changed = Changes(info, defer)
    removed: set[Path] = set()
    for name in {**old, **new}:
        if name in ("apiVersion", "kind") or not tracked(name, subresource, info):
            continue
        before, after = old.get(name), new.get(name)
        if name != "metadata":
            _diff(before, after, (name,), (f"f:{name}",), info, changed, removed)
        elif isinstance(before, Mapping | None) and isinstance(after, Mapping | None):
            before, after = before or {}, after or {}
            for meta_name in {**before, **after}:
                if meta_name not in IGNORED_META:
                    _diff(before.get(meta_name), after.get(meta_name), ("metadata", meta_name),
                          ("f:metadata", f"f:{meta_name}"), info, changed, removed)
        else:  # a malformed metadata: compare what field_values makes of each side
            old_values = field_values({name: before}, info, subresource)
            new_values = field_values({name: after}, info, subresource)
            _compare(old_values, new_values, changed, removed)
    return changed, removed


def _compare(old_values: dict[Path, Any], new_values: dict[Path, Any], changed: set[Path],
             removed: set[Path]) -> None:
    for p, value in new_values.items():
        was = old_values.get(p, ABSENT)
        if was != value or type(was) is not type(value):
            changed.add(p)
    removed.update(old_values.keys() - new_values.keys())


def _diff(before: Any, after: Any, names: tuple[str, ...], path: Path, info: ResourceInfoLike | None,
          changed: Changes, removed: set[Path]) -> None:
    """Add what changes between ``before`` and ``after`` at ``path`` (None stands for absent)."""
    if before is None or after is None:
        if after is not None:
            changed.add_whole(path, names, after)
        elif before is not None:
            removed.update(_values(before, names, path, info))
        return
    if _same(before, after):
        return
    if isinstance(before, dict) and isinstance(after, dict) and before and after:
        for key in {**before, **after}:
            old_value, new_value = before.get(key), after.get(key)
            if old_value is not new_value:  # the same object (a status write's untouched field) never changes
                _diff(old_value, new_value, (*names, key), (*path, f"f:{key}"), info, changed, removed)
        return
    if isinstance(before, list) and isinstance(after, list) and before and after and \
            _diff_map(before, after, names, path, info, changed, removed):
        return
    if _leaf(before) and _leaf(after):  # one path each side, the same: _compare of the two, without the walks
        if before != after or type(before) is not type(after):
            changed.add(path)
        return
    _compare(_values(before, names, path, info), _values(after, names, path, info), changed, removed)


def _leaf(value: Any) -> bool:
    """Whether :func:`collect` sets ``value``'s own path alone (a scalar, or an empty object or array)."""
    return not value or not isinstance(value, _CONTAINERS)


def _diff_map(before: list[Any], after: list[Any], names: tuple[str, ...], path: Path,
              info: ResourceInfoLike | None, changed: Changes, removed: set[Path]) -> bool:
    """:func:`_diff` of two associative lists item by item; False (nothing added) when they are not both one."""
    strategy = strategy_of(info, names)  # once for both lists (what _map_keys of each would look up)
    keys = strategy.keys
    if strategy.kind != "map" or not keys or not all_keyed(before, keys) or not all_keyed(after, keys):
        return False
    old_items = dict(zip(key_elements(before, keys), before, strict=True))
    new_items = dict(zip(key_elements(after, keys), after, strict=True))
    if len(old_items) != len(before) or len(new_items) != len(after):
        return False  # duplicate keys: the general comparison handles them
    for element in {**old_items, **new_items}:
        item_path = (*path, element)
        old_item, new_item = old_items.get(element), new_items.get(element)
        if old_item is None:
            changed.add(item_path)
            if type(new_item) is dict:  # a new item: each field is set where nothing was (_diff's first case)
                changed.add_fields(item_path, names, new_item)
                continue
        elif new_item is None:
            removed.add(item_path)
        elif _same(old_item, new_item):  # an item the write left as it was (most of them)
            continue
        for key in {**(old_item or {}), **(new_item or {})}:
            _diff((old_item or {}).get(key), (new_item or {}).get(key), (*names, key), (*item_path, f"f:{key}"),
                  info, changed, removed)
    return True


def _values(value: Any, names: tuple[str, ...], path: Path, info: ResourceInfoLike | None) -> dict[Path, Any]:
    out: dict[Path, Any] = {}
    collect(value, names, path, out, info)
    return out


# ---------------------------------------------------------------------------------- FieldsV1 conversion

def set_to_fields(paths: Iterable[Path]) -> dict[str, Any]:
    """FieldsV1 JSON for a field set; a node that is itself owned and has children gets a ``"."`` entry.

    Children come in sorted order (each node's keys are sorted, never the paths: strings compare faster
    than tuples of them).
    """
    root: dict[str, Any] = {}
    owned = []
    for path in paths:
        node = root
        for element in path:
            child = node.get(element)
            if child is None:
                child = node[element] = {}
            node = child
        owned.append(node)
    for node in owned:
        if node:  # owned, with children (no "." yet: every node is listed once, and children come first)
            node["."] = {}
    return _sorted_fields(root)


def _sorted_fields(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its keys sorted at every level (leaves, fresh empty dicts of ``set_to_fields``, are kept)."""
    if not any(node.values()):  # leaves only (the items of a set, say): no call per child
        return {key: node[key] for key in sorted(node)}
    out = {}
    for key in sorted(node):
        child = node[key]
        out[key] = _sorted_fields(child) if child else child
    return out


def fields_to_set(fields: Mapping[str, Any] | None) -> set[Path]:
    """The field set described by FieldsV1 JSON (inverse of :func:`set_to_fields`)."""
    out: set[Path] = set()
    _add_paths(fields or {}, (), out)
    return out


def _add_paths(node: Mapping[str, Any], path: Path, out: set[Path]) -> None:
    """Add the paths of the FieldsV1 subtree ``node`` at ``path`` to ``out``. A module function, not a closure:
    a recursive closure refers to itself through its cell, a cycle each call would leave to the collector."""
    if not any(node.values()):  # leaves only (the members of a set, say): their paths without a call each
        out.update(map(path.__add__, zip(node)))
        if "." in node:
            out.discard((*path, "."))
            out.add(path)
        return
    for key, child in node.items():
        if key == ".":
            out.add(path)
            continue
        child_path = (*path, key)
        if isinstance(child, Mapping) and child:
            _add_paths(child, child_path, out)
        else:
            out.add(child_path)


def parse_fields(fields: Any) -> frozenset[Path]:
    """:func:`fields_to_set`, memoised by the tree's encoding."""
    return _parse(fields)[0]


def _parse(fields: Any) -> tuple[frozenset[Path], bool]:
    """(:func:`parse_fields`, whether ``fields`` is the tree :func:`set_to_fields` renders of that set)."""
    if not isinstance(fields, dict):
        return frozenset(fields_to_set(fields)), False
    try:
        data = orjson.dumps(fields)
    except orjson.JSONEncodeError:
        return frozenset(fields_to_set(fields)), False
    hit = _parsed.get(data)
    if hit is None:
        hit = (frozenset(fields_to_set(fields)), _canonical(fields))
        _remember(_parsed, data, hit)
    return hit


def _canonical(node: Mapping[str, Any]) -> bool:
    """Whether a FieldsV1 tree is exactly what :func:`set_to_fields` renders of its field set: every node's
    children sorted, and ``"."`` an empty leaf beside the children of an owned node (never alone).

    Linear in the tree (sorting sorted keys is), where rendering the set again sorts all its paths."""
    keys = list(node)
    if keys != sorted(keys):
        return False
    for key, child in node.items():
        if not isinstance(child, dict) or (key == "." and (child or len(keys) == 1)):
            return False
        if child and not _canonical(child):
            return False
    return True


def render_fields(entry: Mapping[str, Any], paths: FieldSet) -> dict[str, Any]:
    """The canonical FieldsV1 tree of ``paths``; the entry's own tree when that already is it."""
    fields = entry.get("fieldsV1")
    if isinstance(fields, dict) and isinstance(paths, frozenset):
        try:
            hit = _parsed.get(orjson.dumps(fields))
        except orjson.JSONEncodeError:
            hit = None
        if hit is not None and hit[1] and hit[0] is paths:
            return fields
    if len(paths) > MEMO_PATHS:
        return set_to_fields(paths)
    key = paths if isinstance(paths, frozenset) else frozenset(paths)
    data = _rendered.get(key)
    if data is not None:
        rendered: dict[str, Any] = orjson.loads(data)
        return rendered
    tree = set_to_fields(key)
    _remember(_rendered, key, orjson.dumps(tree))
    return tree  # the memo holds only its encoding: each caller gets a tree of its own


# --------------------------------------------------------------------------------------- managed entries

def _now() -> str:
    return rfc3339(time.time())


def entry_id(entry: Mapping[str, Any]) -> tuple[str, str, str]:
    return entry.get("manager", ""), entry.get("operation", ""), entry.get("subresource", "") or ""


def meta_of(obj: Any) -> Mapping[str, Any]:
    if obj is None:  # a create's old object
        return {}
    meta = obj.get("metadata") if type(obj) is dict or isinstance(obj, Mapping) else None
    return meta if type(meta) is dict or isinstance(meta, Mapping) else {}


def entry_dicts(obj: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Copies of the managedFields entries of ``obj`` that name a manager."""
    entries = meta_of(obj).get("managedFields")
    if not isinstance(entries, list):
        return []
    return [dict(entry) for entry in entries
            if (type(entry) is dict or isinstance(entry, Mapping)) and entry.get("manager") is not None]


def parse_entries(obj: Mapping[str, Any] | None) -> list[Entry]:
    return with_paths(entry_dicts(obj))


def with_paths(entries: list[dict[str, Any]], canonical: dict[int, FieldSet] | None = None) -> list[Entry]:
    """Each entry with its field set; ``canonical`` gets, by the entry's identity, the set of each entry whose
    tree is already the canonical rendering of it (for :func:`render_entries`, within the same call)."""
    if canonical is None:
        return [(entry, parse_fields(entry.get("fieldsV1"))) for entry in entries]
    out: list[Entry] = []
    for entry in entries:
        paths, exact = _parse(entry.get("fieldsV1"))
        if exact:
            canonical[id(entry)] = paths
        out.append((entry, paths))
    return out


def decodable(entries: Any) -> bool:
    """Whether a request's managedFields decode (a list of objects whose ``fieldsV1`` is an object when set).

    Like kube's field manager, an undecodable list is ignored in favour of the live object's history.
    """
    if not isinstance(entries, list):
        return False
    for entry in entries:
        if type(entry) is not dict and not isinstance(entry, Mapping):
            return False
        fields = entry.get("fieldsV1")
        if fields is not None and type(fields) is not dict and not isinstance(fields, Mapping):
            return False
    return True


def render_entries(entries: list[Entry], given: tuple[FieldSet, dict[str, Any]] | None = None,
                   canonical: dict[int, FieldSet] | None = None) -> list[dict[str, Any]]:
    """The managedFields of ``entries`` (those with paths); ``given``: a field set (by identity) whose tree is
    already known, rendered as that tree even when the set lists no path (see :func:`_writer_paths`);
    ``canonical``: from :func:`with_paths` of these entries, an entry still holding its very set keeps its tree
    (what :func:`render_fields` would answer, without encoding it again)."""
    out = []
    for entry, paths in entries:
        tree = given[1] if given is not None and paths is given[0] else None
        if tree is None and canonical is not None and paths and canonical.get(id(entry)) is paths:
            tree = entry["fieldsV1"]
        if tree is None and not paths:
            continue
        rendered = {k: v for k, v in entry.items() if k != "fieldsV1"}
        rendered["fieldsType"] = "FieldsV1"
        rendered["fieldsV1"] = tree if tree is not None else render_fields(entry, paths)
        out.append(rendered)
    return out


def upsert(entries: list[Entry], manager: str, operation: str, api_version: str, subresource: str | None,
           paths: FieldSet, now: str | None, grown: bool = False) -> None:
    """Set the entry of (``manager``, ``operation``, ``subresource``) to ``paths``, stamped with ``now`` when
    they differ from its old set; ``grown``: the new set also holds paths ``paths`` does not list, none of
    them in the old set (so it differs)."""
    wanted = (manager, operation, subresource or "")
    for i, (entry, old_paths) in enumerate(entries):
        if entry_id(entry) == wanted:
            if grown or old_paths != paths or entry.get("apiVersion") != api_version:
                entry = {**entry, "apiVersion": api_version, "time": now or _now()}
            else:
                paths = old_paths  # the same set: the entry keeps its FieldsV1 tree
            entries[i] = (entry, paths)
            return
    entry = {"manager": manager, "operation": operation, "apiVersion": api_version, "time": now or _now()}
    if subresource:
        entry["subresource"] = subresource
    entries.append((entry, paths))


def with_managed_fields(obj: dict[str, Any], entries: list[Entry],
                        given: tuple[FieldSet, dict[str, Any]] | None = None) -> dict[str, Any]:
    """``obj`` with the managedFields of ``entries`` (``given``: see :func:`render_entries`)."""
    return _set_managed_fields(obj, render_entries(entries, given))


def _set_managed_fields(obj: dict[str, Any], rendered: list[dict[str, Any]]) -> dict[str, Any]:
    """``obj`` with a new metadata dict holding ``rendered`` as managedFields (none when empty)."""
    meta = dict(meta_of(obj))
    if rendered:
        meta["managedFields"] = rendered
    else:
        meta.pop("managedFields", None)
    obj["metadata"] = meta
    return obj


def _create_key(obj: Mapping[str, Any], identity: tuple[Any, ...], info: ResourceInfoLike | None,
                subresource: str | None) -> tuple[tuple[Any, ...], bytes] | None:
    """What the managedFields of a create are a function of: the kind (built-in: its list rules never
    change), the writer, and the encoding of the object's tracked content with the managedFields the client
    sent (the entries a create starts from are a function of those). None: not memoisable.

    The client's entries are encoded apart, after the rest (where they sit in the metadata changes no result):
    a decoded body's were encoded by its depth measure already (:func:`nesting.encoding_of`).

    Returned as (a small key naming the encoding by its length, the encoding): the memo finds the key without
    hashing the encoding (a pod's costs more than comparing it), and a hit needs equal encodings.
    Objects a controller stamps from one template (a ReplicaSet's pods) differ only in ignored metadata, so
    they share a key. Different key orders give different keys, never a wrong answer.
    """
    if info is None or not getattr(info, "builtin", True):
        return None
    content: dict[str, Any] = {}
    entries: Any = ABSENT
    for name, value in obj.items():
        if value is None or name == "apiVersion" or name == "kind":
            continue
        if name == "metadata" and (type(value) is dict or isinstance(value, Mapping)):
            entries = value.get("managedFields", ABSENT)
            value = {k: v for k, v in value.items() if k not in IGNORED_META}
        if (name == "status" or subresource == "status") and not tracked(name, subresource, info):
            continue
        content[name] = value
    try:  # the content's encoding (an object: it ends where it closes) and the client's entries' after it
        data = orjson.dumps(content) if entries is ABSENT else orjson.dumps(content) + encoding_of(entries)
    except (orjson.JSONEncodeError, TypeError):  # integers beyond 64 bits, non-JSON values
        return None
    return (info.group, getattr(info, "version", ""), info.kind, subresource, *identity, len(data)), data


def _creator_absent(entries: list[Any], me: tuple[str, str, str]) -> bool:
    """Whether no entry of ``entries`` (decodable) naming a manager is ``me``'s, and each has a FieldsV1 object or
    none: then a create starts from them (:func:`_first_entry`)."""
    for entry in entries:
        if entry.get("manager") is not None and (entry_id(entry) == me or not isinstance(entry.get("fieldsV1"),
                                                                                        dict | None)):
            return False
    return True


class _HasArray(Exception):
    """The content holds a non-empty array (its paths depend on its items' values)."""


def _flat_shape(obj: Mapping[str, Any], subresource: str | None, info: ResourceInfoLike) -> tuple[Any, ...]:
    """What :func:`object_fields` of ``obj`` is a function of when its content holds no non-empty array: the
    tracked top-level fields and, within each object, the keys of its non-null fields, with the shape of each
    non-empty object among them (a leaf is its key alone). Raises _HasArray when the content holds an array."""
    only_status = subresource == "status"  # which top-level fields are tracked (:func:`tracked`), decided once
    skip_status = not only_status and not tracked("status", subresource, info)
    out: list[Any] = []
    for name, value in obj.items():
        if value is None or name == "apiVersion" or name == "kind":
            continue
        if only_status:
            if name != "status":
                continue
        elif skip_status and name == "status":
            continue
        if name == "metadata" and isinstance(value, Mapping):
            out.append((name, _dict_shape(value, IGNORED_META)))  # () when it sets nothing: no f:metadata
        elif value.__class__ is str or not value:
            out.append(name)
        elif isinstance(value, dict):
            out.append((name, _dict_shape(value)))
        elif isinstance(value, list):
            raise _HasArray
        else:
            out.append(name)
    return tuple(out)


def _dict_shape(value: Mapping[str, Any], skip: frozenset[str] = frozenset()) -> tuple[Any, ...]:
    """The shape of one object's fields (see :func:`_flat_shape`), those named in ``skip`` left out."""
    out: list[Any] = []
    for key, item in value.items():
        if item is None or key in skip:
            continue
        if item.__class__ is str or not item:  # a leaf: a string or an empty value
            out.append(key)
        elif isinstance(item, dict):
            out.append((key, _dict_shape(item)))
        elif isinstance(item, list):
            raise _HasArray
        else:
            out.append(key)
    return tuple(out)


def _flat_fields(obj: Mapping[str, Any], info: ResourceInfoLike | None,
                 subresource: str | None) -> dict[str, Any] | None:
    """:func:`object_fields` of a built-in kind's ``obj`` holding no non-empty array, remembered by its shape
    (objects of one shape own one tree: shared, immutable); None for any other object, and for any object of a
    kind one create of which held an array (see ``_arrayed``)."""
    if info is None or not getattr(info, "builtin", True):
        return None
    kind = (info.group, getattr(info, "version", ""), info.kind)
    if kind in _arrayed:
        return None
    try:
        key = (*kind, subresource, _flat_shape(obj, subresource, info))
    except _HasArray:
        _arrayed.add(kind)
        return None
    fields = _flat_creates.get(key)
    if fields is None:
        fields = object_fields(obj, info, subresource)
        _remember(_flat_creates, key, fields)
    return fields


def _first_entry(obj: dict[str, Any], entries: list[dict[str, Any]] | None, manager: str, operation: str,
                 api_version: str, info: ResourceInfoLike | None, subresource: str | None,
                 now: str | None) -> dict[str, Any]:
    """:func:`update_managed_fields` of a create, on FieldsV1 trees: ``manager`` owns all ``obj`` sets.

    ``entries`` (none of ``manager``'s) keep what ``obj`` does not set; they must be those of ``obj``'s own
    managedFields (as a create's request sent them), which the memo key holds instead; None: those very ones,
    taken from ``obj`` only when the memo has no answer. The result is a
    pure function of :func:`_create_key` and the time: built-in kinds' results are memoised (bounded). A hit
    builds new entry dicts around the remembered FieldsV1 trees (immutable, see the module docstring). A create
    without entries whose content holds no array takes its tree from :func:`_flat_fields` instead.
    """
    fields = _flat_fields(obj, info, subresource) if entries is not None and not entries else None
    if fields is not None:
        writer = _writer_entry(manager, operation, api_version, subresource, now, fields)
        return _set_managed_fields(obj, [writer] if fields else [])
    key, content = _create_key(obj, (manager, operation, api_version), info, subresource) or (None, b"")
    shapes = _creates.get(key) if key is not None else None
    for encoding, remembered, mine in shapes or ():
        if encoding == content:
            rendered = [{**head, "fieldsV1": tree} for head, tree in remembered]
            if mine:
                rendered[-1]["time"] = now or _now()
            return _set_managed_fields(obj, rendered)
    heads = with_paths(entry_dicts(obj) if entries is None else entries)
    rendered, mine = _first_entries(obj, heads, manager, operation, api_version, info, subresource, now)
    if key is not None:
        shape = (content, tuple(({k: v for k, v in e.items() if k != "fieldsV1"}, e["fieldsV1"]) for e in rendered),
                 mine)
        if shapes is None:
            _remember(_creates, key, [shape], CREATE_CACHE_SIZE)
        else:
            if len(shapes) >= CREATE_KEY_SHAPES:
                del shapes[0]
            shapes.append(shape)
    return _set_managed_fields(obj, rendered)


def _first_entries(obj: dict[str, Any], entries: list[Entry], manager: str, operation: str, api_version: str,
                   info: ResourceInfoLike | None, subresource: str | None,
                   now: str | None) -> tuple[list[dict[str, Any]], bool]:
    """:func:`_first_entry`'s managedFields, computed, and whether the last entry is the writer's."""
    fields = object_fields(obj, info, subresource)
    rendered = []
    for entry, paths in entries:
        rest = _subtract(render_fields(entry, paths), fields, False) if paths else None
        if rest is not None:
            out = {k: v for k, v in entry.items() if k != "fieldsV1"}
            out["fieldsType"] = "FieldsV1"
            out["fieldsV1"] = rest
            rendered.append(out)
    if fields:
        rendered.append(_writer_entry(manager, operation, api_version, subresource, now, fields))
    return rendered, bool(fields)


def _writer_entry(manager: str, operation: str, api_version: str, subresource: str | None, now: str | None,
                  fields: dict[str, Any]) -> dict[str, Any]:
    """The managedFields entry of a writer owning ``fields`` (kube's key order)."""
    mine: dict[str, Any] = {"manager": manager, "operation": operation, "apiVersion": api_version,
                            "time": now or _now()}
    if subresource:
        mine["subresource"] = subresource
    mine["fieldsType"] = "FieldsV1"
    mine["fieldsV1"] = fields
    return mine


def _subtract(have: dict[str, Any], drop: dict[str, Any] | None, drop_owns: bool) -> dict[str, Any] | None:
    """The canonical FieldsV1 node of paths under ``have`` that ``drop`` (the same node of another tree) lacks.

    ``drop_owns``: ``drop``'s tree owns this node's own path. None when nothing remains; ``{}`` when only
    the node itself does.
    """
    out: dict[str, Any] = {}
    for key, child in have.items():
        if key == ".":
            if not drop_owns:
                out["."] = {}
            continue
        other = drop.get(key) if drop else None
        other_owns = other is not None and (not other or "." in other)
        if not child:
            if not other_owns:
                out[key] = {}
        elif other is None:
            out[key] = child
        else:
            rest = _subtract(child, other, other_owns)
            if rest is not None:
                out[key] = rest
    if not out:
        return None
    return {} if len(out) == 1 and "." in out else out


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
    requested = meta_of(new).get("managedFields")
    if old is None and requested is None:  # a create without history: the writer owns everything it sets
        return _first_entry(result, [], manager, operation, api_version, info, subresource, now)
    me = (manager, operation, subresource or "")
    if not old and requested and requested != [{}] and decodable(requested) and _creator_absent(requested, me):
        # A create: the writer owns everything the object sets, taken from the entries the client sent.
        return _first_entry(result, None, manager, operation, api_version, info, subresource, now)
    previous = meta_of(old).get("managedFields")
    if requested == [{}]:
        heads: list[dict[str, Any]] = []
    elif requested and requested != previous and decodable(requested):
        heads = entry_dicts(new)
    else:
        heads = entry_dicts(old)
    if not old and _creator_absent(heads, me):  # a create starting from the old object's entries (none)
        return _first_entry(result, heads, manager, operation, api_version, info, subresource, now)
    canonical: dict[int, FieldSet] = {}
    entries = with_paths(heads, canonical)
    changed, removed = changed_paths(old or {}, new, info, subresource, defer=True)
    if changed.deferred and any(changed.reaches_deferred(paths) for _, paths in entries):
        changed.materialize()  # a claim at or below a deferred subtree: take the plain path
    tree, mine, grown = _writer_paths(entries, me, changed, removed, info)
    if mine or grown or any(entry_id(e) == me for e, _ in entries):
        upsert(entries, manager, operation, api_version, subresource, mine, now, grown)
    return _set_managed_fields(result, render_entries(entries, (mine, tree) if tree is not None else None,
                                                      canonical))


def _writer_paths(entries: list[Entry], me: tuple[str, str, str], changed: Changes, removed: set[Path],
                  info: ResourceInfoLike | None) -> tuple[dict[str, Any] | None, FieldSet, bool]:
    """Take ``changed`` and ``removed`` out of the other entries' sets; (the FieldsV1 tree of the writer's new
    set when it is rendered from the changes' values, else None; the writer's new set; whether that set also
    holds the paths of deferred wholes, which it then lacks: only ``tree`` has them).

    No entry holds a path at or below a deferred whole (the caller made sure), so leaving their paths out of
    ``gone`` subtracts the same, and the writer's set grows by at least one path there."""
    gone = changed | removed
    mine: FieldSet = set()
    for i, (entry, paths) in enumerate(entries):
        if entry_id(entry) == me:
            mine = paths - removed if removed and not paths.isdisjoint(removed) else paths
        elif gone and not paths.isdisjoint(gone):
            entries[i] = (entry, paths - gone)
    if not changed and not changed.deferred:
        return None, mine, False
    tree = None
    if len(changed) > MEMO_PATHS or changed.deferred:  # a large set: render the new subtrees from their values
        tree = changes_tree(changed, info, mine)
        if tree is None and changed.deferred:  # a repeated key in a deferred list: its paths merge
            changed.materialize()
    return tree, mine | changed, bool(tree is not None and changed.deferred)
