"""Patch formats accepted by the API server: JSON merge patch, JSON patch and strategic merge patch.

Every function here is pure: inputs are never mutated and the result shares no mutable containers with the
inputs. Errors are :class:`PatchError` carrying the HTTP code the server answers with (400 malformed patch,
415 unsupported format for the kind, 422 a JSON-patch operation that does not apply).

What a patch may build is bounded here, for every patch format, before anything validates the result:

* a JSON patch has at most :data:`MAX_JSON_PATCH_OPERATIONS` operations (413), as kube-apiserver;
* its ``copy`` operations together copy at most :data:`MAX_COPY_BYTES` of JSON (422), kube's
  ``JSONPatchMaxCopyBytes`` (the accumulated copy size of the JSON-patch library it uses);
* every patch result (JSON, merge and strategic merge) nests at most ``bodies.MAX_DEPTH`` levels (422)
  and encodes to at most :data:`MAX_PATCHED_BYTES` (413).

The list-merge rule (:func:`list_strategy`) is shared with server-side apply: built-in kinds use the patch
merge keys and strategies of kube 1.32's schemas (``x-kubernetes-patch-merge-key``/``-patch-strategy``, else
``x-kubernetes-list-type``), custom resources ``x-kubernetes-list-type`` and ``x-kubernetes-list-map-keys`` from
their structural schema.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import orjson

from ..endpoints.bodies import MAX_BODY, MAX_DEPTH, too_deep
from ..machinery.jsoncopy import json_copy
from ..machinery.nesting import encoded_size

__all__ = [
    "MAX_COPY_BYTES",
    "MAX_JSON_PATCH_OPERATIONS",
    "MAX_PATCHED_BYTES",
    "ListStrategy",
    "PatchError",
    "ResourceInfoLike",
    "json_merge_patch",
    "json_patch",
    "list_strategy",
    "strategic_merge_patch",
]


class ResourceInfoLike(Protocol):
    """The attributes of ``registry.ResourceInfo`` that the patch, apply and validation modules read."""

    # read-only (properties), so that the frozen ResourceInfo satisfies it
    @property
    def group(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def plural(self) -> str: ...
    @property
    def namespaced(self) -> bool: ...
    @property
    def schema(self) -> Mapping[str, Any] | None: ...
    @property
    def builtin(self) -> bool: ...


class PatchError(Exception):
    """A patch that cannot be applied; ``code`` is the HTTP status the server answers with.

    ``message`` is the Status message; ``causes`` (possibly empty) are Status causes for 422 answers.
    """

    _REASONS = {400: "BadRequest", 409: "Conflict", 413: "RequestEntityTooLarge", 415: "UnsupportedMediaType",
                422: "Invalid"}

    def __init__(self, message: str, code: int = 400, causes: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.causes = causes or []

    @property
    def reason(self) -> str:
        """The Status reason matching :attr:`code`."""
        return self._REASONS.get(self.code, "BadRequest")


def _unprocessable(detail: str) -> PatchError:
    # kube-apiserver wraps JSON-patch operation failures in a generic 422 whose cause carries the detail.
    return PatchError("the server rejected our request due to an error in our request", 422,
                      [{"reason": "UnexpectedServerResponse", "message": detail, "field": ""}])


MAX_JSON_PATCH_OPERATIONS = 10000
MAX_COPY_BYTES = MAX_BODY
MAX_PATCHED_BYTES = 2 * MAX_BODY


def _encoded_size(value: Any) -> int:
    """The JSON size of ``value``; a value too deep to encode is a 422 (JSON data can hold deeper than JSON text)."""
    try:
        return len(orjson.dumps(value))
    except orjson.JSONEncodeError:
        raise _unprocessable(f"the patched object nests deeper than {MAX_DEPTH} levels") from None


def checked_result(doc: Any) -> Any:
    """``doc``, the result of a patch, when within the depth and size limits; a PatchError otherwise."""
    size = encoded_size(doc, MAX_DEPTH)  # within the depth limit: both measured by one encoding
    if size is None:
        if too_deep(doc):
            raise _unprocessable(f"the patched object nests deeper than {MAX_DEPTH} levels")
        size = _encoded_size(doc)
    if size > MAX_PATCHED_BYTES:
        raise PatchError(f"Request entity too large: the patched object is {size} bytes, the limit is "
                         f"{MAX_PATCHED_BYTES}", 413)
    return doc


# --------------------------------------------------------------------------------------------- merge patch

def json_merge_patch(original: Any, patch: Any, *, share: bool = False) -> Any:
    """Apply an RFC 7386 JSON merge patch; a non-object patch replaces the document.

    Neither argument is changed. The result is independent of ``original``, or with ``share`` holds what the
    patch leaves untouched by reference (each map on the patch's paths is a new dict): for a caller that changes
    only what the patch touched, or nothing.
    """
    return checked_result(_merge_patch(original, patch, share))


def _merge_patch(original: Any, patch: Any, share: bool) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            result[key] = _merge_patch(result.get(key), value, share)
        else:
            result[key] = copy.deepcopy(value)
    if not share:  # untouched values are still the original's: copy them so the result is independent
        for key in result.keys() - patch.keys():
            result[key] = json_copy(result[key])
    return result


# ---------------------------------------------------------------------------------------------- JSON patch

_MISSING = object()
_INDEX_RE = re.compile(r"0|[1-9][0-9]*")


def _parse_pointer(pointer: Any) -> list[str]:
    if not isinstance(pointer, str):
        raise PatchError(f"invalid JSON pointer {pointer!r}: must be a string", 400)
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f'JSON pointer must be empty or start with a "/": {pointer!r}', 400)
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


def _list_index(token: str, length: int, path: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return length
    if not _INDEX_RE.fullmatch(token):
        raise _unprocessable(f"invalid array index {token!r} in {path}")
    index = int(token)
    if index > length or (index == length and not allow_end):
        raise _unprocessable(f"array index {index} out of bounds in {path}")
    return index


def _resolve_parent(doc: Any, parts: list[str], path: str, op: str) -> Any:
    node = doc
    for token in parts[:-1]:
        if isinstance(node, dict):
            node = node.get(token, _MISSING)
        elif isinstance(node, list):
            node = node[_list_index(token, len(node), path, allow_end=False)]
        else:
            node = _MISSING
        if node is _MISSING:
            raise _unprocessable(f'{op} operation does not apply: doc is missing path: "{path}": missing value')
    return node


def _get(doc: Any, path: str, op: str) -> Any:
    parts = _parse_pointer(path)
    if not parts:
        return doc
    parent = _resolve_parent(doc, parts, path, op)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_list_index(last, len(parent), path, allow_end=False)]
    raise _unprocessable(f'{op} operation does not apply: doc is missing path: "{path}": missing value')


def _add(doc: Any, path: str, value: Any, op: str = "add") -> Any:
    parts = _parse_pointer(path)
    if not parts:
        return value
    parent = _resolve_parent(doc, parts, path, op)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_list_index(last, len(parent), path, allow_end=True), value)
    else:
        raise _unprocessable(f'{op} operation does not apply: doc is missing path: "{path}": missing value')
    return doc


def _remove(doc: Any, path: str, op: str = "remove") -> tuple[Any, Any]:
    parts = _parse_pointer(path)
    if not parts:
        raise _unprocessable(f"{op} operation does not apply: cannot remove the document root")
    parent = _resolve_parent(doc, parts, path, op)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_list_index(last, len(parent), path, allow_end=False))
    raise _unprocessable(f'{op} operation does not apply: doc is missing path: "{path}": missing value')


def _json_equal(a: Any, b: Any) -> bool:
    # JSON numbers compare by value, but booleans are not numbers.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b and (type(a) is type(b) or (isinstance(a, int | float) and isinstance(b, int | float)))


def _field(op: Mapping[str, Any], name: str, kind: str) -> Any:
    if name not in op:
        raise PatchError(f'{kind} operation missing required field "{name}"', 400)
    value = op[name]
    if name in ("path", "from") and not isinstance(value, str):
        raise PatchError(f'{kind} operation has a non-string "{name}": {value!r}', 400)
    return value


class _CopyBudget:
    """The bytes the ``copy`` operations of one JSON patch may still copy."""

    __slots__ = ("copied",)

    def __init__(self) -> None:
        self.copied = 0

    def take(self, value: Any) -> None:
        self.copied += _encoded_size(value)
        if self.copied > MAX_COPY_BYTES:
            raise _unprocessable(f"Unable to complete the copy, the accumulated size increase of copy is "
                                 f"{self.copied}, exceeding the limit {MAX_COPY_BYTES}")


def _apply_op(doc: Any, op: Mapping[str, Any], budget: _CopyBudget) -> Any:
    kind = op.get("op")
    path = _field(op, "path", str(kind))
    if kind == "add":
        return _add(doc, path, copy.deepcopy(_field(op, "value", kind)))
    if kind == "remove":
        return _remove(doc, path)[0]
    if kind == "replace":
        value = copy.deepcopy(_field(op, "value", kind))
        _get(doc, path, kind)
        if not _parse_pointer(path):
            return value
        doc, _ = _remove(doc, path, kind)
        return _add(doc, path, value, kind)
    if kind == "move":
        source = _field(op, "from", kind)
        if path != source and path.startswith(source + "/"):
            raise _unprocessable(f'move operation does not apply: cannot move "{source}" into its own child "{path}"')
        doc, value = _remove(doc, source, kind)
        return _add(doc, path, value, kind)
    if kind == "copy":
        source = _get(doc, _field(op, "from", kind), kind)
        budget.take(source)
        return _add(doc, path, copy.deepcopy(source), kind)
    if kind == "test":
        expected = _field(op, "value", kind)
        try:
            actual = _get(doc, path, kind)
        except PatchError:
            actual = _MISSING
        if actual is _MISSING or not _json_equal(actual, expected):
            raise _unprocessable(f"testing value {path} failed: test failed")
        return doc
    raise PatchError(f"Unexpected kind: {kind}", 400)


def json_patch(original: Any, ops: Any) -> Any:
    """Apply an RFC 6902 JSON patch (a list of operations) atomically; the original is not modified."""
    if not isinstance(ops, list):
        raise PatchError("json: cannot unmarshal object into Go value of type jsonpatch.Patch", 400)
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise PatchError(f"The allowed count of patch operations is {MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}",
                         413)
    doc = json_copy(original)
    budget = _CopyBudget()
    for op in ops:
        if not isinstance(op, dict):
            raise PatchError("json: cannot unmarshal into Go value of type jsonpatch.Operation", 400)
        doc = _apply_op(doc, op, budget)
    return checked_result(doc)


# ------------------------------------------------------------------------------------- list merge strategies

ListKind = Literal["map", "set", "atomic"]


class ListStrategy:
    """How a list field merges: ``map`` (associative, by ``keys``), ``set`` (primitive union) or ``atomic``."""

    __slots__ = ("keys", "kind")

    def __init__(self, kind: ListKind, keys: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.keys = keys

    def __repr__(self) -> str:
        return f"ListStrategy({self.kind!r}, {self.keys!r})"


ATOMIC = ListStrategy("atomic")
SET = ListStrategy("set")

_ROOT_META = "metadata"


class _MetaCarrier:
    """A built-in kind whose schema lends custom resources the ObjectMeta list strategies."""

    group, version, kind, builtin = "", "v1", "ConfigMap", True


_META_CARRIER: Any = _MetaCarrier()


#: :func:`_builtin_strategy` by (group, version, kind, path): the built-in schemas never change. Bounded (a patch
#: names its paths), emptied when full.
_BUILTIN_STRATEGIES: dict[tuple[Any, ...], ListStrategy] = {}
BUILTIN_STRATEGIES_SIZE = 4096


def _builtin_strategy(info: ResourceInfoLike, path: tuple[str, ...]) -> ListStrategy:
    """The merge strategy kube 1.32's schema gives the list at ``path`` of a built-in kind (remembered).

    ``x-kubernetes-patch-strategy: merge`` with a ``x-kubernetes-patch-merge-key`` merges by that key, without
    one as a set; a list with neither follows ``x-kubernetes-list-type``; anything else is atomic.
    """
    key = (info.group, getattr(info, "version", "v1"), info.kind, path)
    strategy = _BUILTIN_STRATEGIES.get(key)
    if strategy is None:
        if len(_BUILTIN_STRATEGIES) >= BUILTIN_STRATEGIES_SIZE:
            _BUILTIN_STRATEGIES.clear()
        strategy = _BUILTIN_STRATEGIES[key] = _schema_strategy(info, path)
    return strategy


def _schema_strategy(info: ResourceInfoLike, path: tuple[str, ...]) -> ListStrategy:
    """:func:`_builtin_strategy`, read from the schema."""
    from ..schema.schemas import ARRAY, kind_node, node_at

    node = node_at(kind_node(info.group, getattr(info, "version", "v1"), info.kind), path)
    if node is None or node.kind != ARRAY:
        return ATOMIC
    if node.patch_strategy and "merge" in node.patch_strategy.split(","):
        return ListStrategy("map", (node.merge_key,)) if node.merge_key else SET
    if node.list_type == "map" and node.list_map_keys:
        return ListStrategy("map", node.list_map_keys)
    return SET if node.list_type == "set" else ATOMIC


def _schema_at(schema: Mapping[str, Any] | None, path: Sequence[str]) -> Mapping[str, Any] | None:
    node = schema
    for name in path:
        if node is None:
            return None
        while node.get("type") == "array" and isinstance(node.get("items"), Mapping):
            node = node["items"]
        props = node.get("properties")
        if isinstance(props, Mapping) and name in props:
            node = props[name]
        elif isinstance(node.get("additionalProperties"), Mapping):
            node = node["additionalProperties"]
        else:
            return None
    return node


def list_strategy(info: ResourceInfoLike | None, path: Sequence[str]) -> ListStrategy:
    """How the list at ``path`` (field names from the root, list items elided) merges for this kind.

    Root metadata lists follow ObjectMeta for every kind. Unknown lists are atomic (replaced whole).
    """
    if info is None:
        return ATOMIC
    path = tuple(path)
    if not getattr(info, "builtin", True):
        if path[:1] == (_ROOT_META,) and len(path) == 2:
            return _builtin_strategy(_META_CARRIER, path)  # ObjectMeta's lists, as any kind's
        node = _schema_at(getattr(info, "schema", None), path)
        if node is None:
            return ATOMIC
        list_type = node.get("x-kubernetes-list-type")
        if list_type == "map":
            return ListStrategy("map", tuple(node.get("x-kubernetes-list-map-keys") or ()))
        if list_type == "set":
            return SET
        return ATOMIC
    return _builtin_strategy(info, path)


# ------------------------------------------------------------------------------------ strategic merge patch

_CONTAINERS = (dict, list)  # a tuple: isinstance of a union written in a loop builds the union each time
_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def strategic_merge_patch(original: Mapping[str, Any], patch: Any, info: ResourceInfoLike, *,
                          share: bool = False) -> dict[str, Any]:
    """Apply a strategic merge patch to a built-in object.

    Lists merge by the kind's merge keys (:func:`list_strategy`); lists without one are replaced. Supports
    ``$patch: replace|merge|delete``, ``$retainKeys``, ``$setElementOrder/<list>``,
    ``$deleteFromPrimitiveList/<list>`` and ``null`` (delete the key). Custom resources answer 415.
    Neither argument is changed; ``share`` as for :func:`json_merge_patch` (every map and list the patch
    reaches is new, what it does not reach is ``original``'s).
    """
    if not getattr(info, "builtin", False):
        raise PatchError("the body of the request was in an unknown format - accepted media types include: "
                         "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                         415)
    if not isinstance(patch, dict):
        raise PatchError("json: cannot unmarshal into Go value of type map[string]interface {}", 400)
    merged = _StrategicMerger(info).merge_map(original, patch, ())
    return checked_result(merged if share else json_copy(merged))


class _StrategicMerger:
    """Strategic merge of one patch; lists merge by :func:`list_strategy`, ordered as kube-apiserver orders them.

    Merged associative and primitive lists follow the patch's order (or its ``$setElementOrder``), with items
    only the server has interleaved by their position in the original list.
    """

    __slots__ = ("info",)

    def __init__(self, info: ResourceInfoLike) -> None:
        self.info = info

    def merge_map(self, original: Mapping[str, Any], patch: Mapping[str, Any],
                  path: tuple[str, ...]) -> dict[str, Any]:
        """``original`` with ``patch`` merged: a new dict, sharing the values the patch does not reach."""
        original = dict(original)
        if not any(key[:1] == "$" for key in patch):  # no directive: each key merges on its own
            for key, value in patch.items():
                if value is None:
                    original.pop(key, None)
                elif isinstance(value, _CONTAINERS):
                    original[key] = self.merge_value(original.get(key, _MISSING), value, (*path, key))
                else:
                    original[key] = value  # a JSON scalar (immutable: shared with the patch)
            return original
        directive = patch.get(_DIRECTIVE)
        if directive is not None:
            if directive == "replace":
                return self.merge_map({}, {k: v for k, v in patch.items() if k != _DIRECTIVE}, path)
            if directive == "delete":
                return {}
            if directive != "merge":
                raise PatchError(f"Unknown patch type: {directive!r} in map: {dict(patch)!r}", 400)
        self._retain_keys(original, patch)
        handled: set[str] = set()
        for key, value in patch.items():
            if key.startswith(_SET_ORDER):
                field = key[len(_SET_ORDER):]
                self._merge_ordered(original, patch, field, value, (*path, field))
                handled.add(field)
        for key, value in patch.items():
            if key in handled or key in (_DIRECTIVE, _RETAIN_KEYS) or key.startswith(_SET_ORDER):
                continue
            if key.startswith(_DELETE_PRIMITIVE):
                self._delete_primitives(original, key[len(_DELETE_PRIMITIVE):], value)
            elif value is None:
                original.pop(key, None)
            else:
                original[key] = self.merge_value(original.get(key, _MISSING), value, (*path, key))
        return original

    def _retain_keys(self, original: dict[str, Any], patch: Mapping[str, Any]) -> None:
        retain = patch.get(_RETAIN_KEYS)
        if retain is None:
            return
        if not isinstance(retain, list) or not all(isinstance(k, str) for k in retain):
            raise PatchError("invalid patch format of retainKeys", 400)
        allowed = set(retain)
        for key, value in patch.items():
            if value is None or key in (_DIRECTIVE, _RETAIN_KEYS) or key.startswith((_SET_ORDER, _DELETE_PRIMITIVE)):
                continue
            if key not in allowed:
                raise PatchError("invalid patch format of retainKeys", 400)
        for key in [k for k in original if k not in allowed]:
            del original[key]

    def _merge_ordered(self, original: dict[str, Any], patch: Mapping[str, Any], field: str, order: Any,
                       path: tuple[str, ...]) -> None:
        if not isinstance(order, list):
            raise PatchError(f"invalid {_SET_ORDER}{field}: {order!r}: must be a list", 400)
        current, incoming = original.get(field), patch.get(field)
        if incoming is not None and not isinstance(incoming, list):
            raise PatchError(f"invalid patch: {field} must be a list alongside {_SET_ORDER}{field}", 400)
        if not isinstance(current, list):
            if incoming is not None:
                original[field] = self.merge_value(_MISSING, incoming, path)
            return
        strategy = list_strategy(self.info, path)
        merged = self.merge_list(current, incoming or [], strategy, path, order=order)
        original[field] = merged

    def merge_value(self, original: Any, patch: Any, path: tuple[str, ...]) -> Any:
        if isinstance(patch, dict):
            if isinstance(original, dict):
                return self.merge_map(original, patch, path)
            return self.new_map(patch, path)
        if isinstance(patch, list):
            strategy = list_strategy(self.info, path)
            if not isinstance(original, list):
                return self.merge_list([], patch, strategy, path)
            return self.merge_list(original, patch, strategy, path)
        return patch  # a JSON scalar (immutable: shared with the patch)

    def merge_list(self, original: list[Any], patch: list[Any], strategy: ListStrategy, path: tuple[str, ...], *,
                   order: list[Any] | None = None) -> list[Any]:
        if strategy.kind == "set":
            merged = merge_set(original, patch)
            if not original and order is None:
                return merged  # the patch's items, deduplicated: already in the order normalizing gives
            return _normalize_order(merged, patch if order is None else order, original, freeze)
        if strategy.kind != "map" or not strategy.keys:
            plain = [item for item in patch if not (isinstance(item, dict) and _DIRECTIVE in item)]
            return [self._strip(item, path) for item in plain]
        key = strategy.keys[0]
        original, patch = self._special_elements(original, patch, key)
        merged, appended = self._merge_keyed(original, patch, key, path)
        if order is None and (not original or appended):
            # one item per key, in the order the patch first names it: the normalized order, with the server's
            # items (distinct keys, none named by the patch) after them in their own order
            return [*merged[len(original):], *merged[:len(original)]] if original else merged

        def by_key(item: Any) -> Any:
            return freeze(item.get(key)) if isinstance(item, dict) else _MISSING
        return _normalize_order(merged, patch if order is None else order, original, by_key)

    def _special_elements(self, original: list[Any], patch: list[Any], key: str) -> tuple[list[Any], list[Any]]:
        """Apply ``$patch: delete`` items; ``$patch: replace`` makes the rest of the patch the new list."""
        plain, replace, deleted = [], False, set()
        for item in patch:
            if not isinstance(item, dict):
                raise PatchError(f"expected a map with merge key {key!r}, got {item!r}", 400)
            directive = item.get(_DIRECTIVE)
            if directive is None:
                plain.append(item)
            elif directive == "delete":
                if key not in item:
                    raise PatchError(f"map: {item!r} does not contain declared merge key: {key}", 400)
                deleted.add(freeze(item[key]))
            elif directive == "replace":
                replace = True
            elif directive == "merge":
                raise PatchError("merging lists cannot yet be specified in the patch", 400)
            else:
                raise PatchError(f"Unknown patch type: {directive!r} in map: {item!r}", 400)
        if deleted:
            original = [o for o in original if not (isinstance(o, dict) and freeze(o.get(key)) in deleted)]
        if replace:
            return [self._strip(item, ()) for item in plain], []
        return original, plain

    def _merge_keyed(self, original: list[Any], patch: list[Any], key: str,
                     path: tuple[str, ...]) -> tuple[list[Any], bool]:
        """Each patch item merged into the first item with its merge key (appended when none has it); and
        whether every patch item was appended on its own, keeping its key's very value, after original items
        that are all objects with distinct keys (then :func:`_normalize_order` puts the appended items first,
        in the patch's order, and the original ones after them in theirs)."""
        result = list(original)
        where: dict[Any, int] = {}
        for i, existing in enumerate(result):
            if isinstance(existing, dict):
                where.setdefault(freeze(existing.get(key)), i)
        appended = len(where) == len(result)
        for item in patch:
            if key not in item:
                raise PatchError(f"map: {item!r} does not contain declared merge key: {key}", 400)
            i = where.setdefault(freeze(item[key]), len(result))
            if i < len(result):
                result[i] = self.merge_map(result[i], item, path)
                appended = False
            else:
                new = self.new_map(item, path)
                appended = appended and new.get(key) is item[key]
                result.append(new)
        return result, appended

    def _strip(self, value: Any, path: tuple[str, ...]) -> Any:
        """A patch value placed where nothing merges with it: copy it without directives."""
        if isinstance(value, dict):
            return self.new_map(value, path)
        return copy.deepcopy(value)

    def new_map(self, patch: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        """``merge_map({}, patch, path)``; a patch without directives (an env var, a port, a container status:
        most items of a list) is copied without its nulls in one pass, as the merge would build it, and then
        each object or array it holds is merged into nothing, in the merge's order (its errors first)."""
        out: dict[str, Any] = {}
        nested: list[str] = []
        for key, value in patch.items():
            if key[:1] == "$":
                return self.merge_map({}, patch, path)
            if value is not None:
                out[key] = value
                if isinstance(value, _CONTAINERS):
                    nested.append(key)
        for key in nested:
            out[key] = self.merge_value(_MISSING, out[key], (*path, key))
        return out

    def _delete_primitives(self, original: dict[str, Any], key: str, values: Any) -> None:
        if not isinstance(values, list):
            raise PatchError(f"invalid {_DELETE_PRIMITIVE}{key}: {values!r}: must be a list", 400)
        current = original.get(key)
        if isinstance(current, list):
            if only_strings(values) and only_strings(current):  # their own stand-ins: no call per item
                original[key] = list(itertools.filterfalse(set(values).__contains__, current))
                return
            doomed = {freeze(value) for value in values}
            original[key] = [item for item in current if freeze(item) not in doomed]


_IMMUTABLE = (str, int, float, bool, type(None))  # JSON scalars: a merged list may share them with the patch


def merge_set(original: list[Any], patch: list[Any]) -> list[Any]:
    """``original`` and then each patch item it lacks (first mentions, copied), in the patch's order."""
    if only_strings(original) and only_strings(patch):  # finalizers, say: their own stand-ins, no call per item
        return [*original, *itertools.filterfalse(set(original).__contains__, dict.fromkeys(patch))]
    merged = list(original)
    present = {freeze(item) for item in merged}
    for item in patch:
        frozen = freeze(item)
        if frozen not in present:
            present.add(frozen)
            merged.append(item if type(item) in _IMMUTABLE else copy.deepcopy(item))
    return merged


def only_strings(values: list[Any]) -> bool:
    """Whether every item of ``values`` is a ``str`` (each is then its own :func:`freeze`); no call per item."""
    return set(map(type, values)) <= {str}


def freeze(value: Any) -> Any:
    """A hashable stand-in for a JSON value: two values are ``==`` exactly when their stand-ins are.

    List membership, merge-key lookups and deletions go through it, so that each takes one hash lookup
    instead of a scan of the list (a list merge is linear in the sizes of the lists, never their product).
    """
    if type(value) is str:  # the common case first
        return value
    if isinstance(value, dict):
        return _FrozenMap((k, freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return _FrozenList(freeze(v) for v in value)
    return value


class _FrozenMap(frozenset[Any]):
    """A frozen JSON object (never equal to a frozen list, nor to a scalar)."""

    __slots__ = ()


class _FrozenList(tuple[Any, ...]):
    """A frozen JSON array (never equal to a frozen object, nor to a scalar)."""

    __slots__ = ()


def _normalize_order(merged: list[Any], order: list[Any], original: list[Any], ident: Any) -> list[Any]:
    """Order ``merged`` like kube: items named in ``order`` follow it; server-only items keep their place.

    Server-only items (in their original order) are interleaved with the ordered items, an item going first
    when both appear in ``original`` and it came earlier there. Linear: ranks are list positions, so items
    are placed by rank (stable for equal ranks) instead of being sorted.
    """
    wanted: dict[Any, int] = {}
    for i, entry in enumerate(order):
        wanted.setdefault(ident(entry), i)
    server_rank: dict[Any, int] = {}
    for i, entry in enumerate(original):
        server_rank.setdefault(ident(entry), i)
    named: list[list[tuple[Any, int | None]]] = [[] for _ in order]
    server_only: list[list[tuple[Any, int | None]]] = [[] for _ in range(len(original) + 1)]
    for item in merged:
        key = ident(item)
        rank = server_rank.get(key)
        if key in wanted:
            named[wanted[key]].append((item, rank))
        else:
            server_only[len(original) if rank is None else rank].append((item, rank))
    ordered = [entry for bucket in named for entry in bucket]
    kept = [entry for bucket in server_only for entry in bucket]
    result: list[Any] = []
    i = j = 0
    while i < len(kept) and j < len(ordered):
        left, right = kept[i][1], ordered[j][1]
        if left is not None and right is not None and left < right:
            result.append(kept[i][0])
            i += 1
        else:
            result.append(ordered[j][0])
            j += 1
    result.extend(item for item, _ in kept[i:])
    result.extend(item for item, _ in ordered[j:])
    return result
