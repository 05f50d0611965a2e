"""Lazily decoded Kubernetes objects.

A :class:`LazyObject` is built from the JSON bytes of one object in a single msgspec pass that splits the
object into its top-level members (kept as raw JSON slices) and decodes only ``metadata`` into a small
struct. Everything else (``spec``, ``status``, ``data``...) is decoded on first access, member by member,
with orjson. ``managedFields`` stays raw until someone reads it, and
:meth:`LazyObject.without_managed_fields` drops it and compacts the raw members so a cached object costs
roughly its JSON size; :func:`without_managed_fields_from` makes that same copy straight from a watch line or
list item (an informer's default transform done while decoding), with no LazyObject over the larger buffer.

Invariants: a LazyObject is read-only (the values it hands out are plain dicts and lists, which callers
must not mutate, as with any informer cache object); it compares equal to the plain dict of the same
JSON; :meth:`LazyObject.to_dict` always returns a fresh deep copy the caller owns.

The compact copy :meth:`LazyObject.without_managed_fields` makes (what an informer caches by default) is
not tracked by the cyclic garbage collector (CPython): a LazyObject refers to bytes, strings and the dicts
and lists its JSON decodes to, none of which refers back to it, so it is never part of a reference cycle and
reference counting frees it. A cache of 100k objects then costs the collector nothing per object in its
collections (they were about a tenth of an informer's CPU time at 50k cached pods).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from operator import attrgetter
from typing import Any

import msgspec
import orjson
from msgspec import UNSET, Raw, Struct, UnsetType

from kinformer.meta import object_key, register_fast_metadata
from kinformer.untrack import gc_untrack

__all__ = [
    "LazyObject",
    "MetadataView",
    "decode_list",
    "decode_object",
    "decode_without_managed_fields",
    "encode",
    "to_plain",
]


class _Meta(Struct, gc=False):
    """The metadata fields needed on hot paths (keys, resourceVersion checks); ``managedFields`` raw."""

    name: str | UnsetType = UNSET
    namespace: str | UnsetType = UNSET
    resourceVersion: str | UnsetType = UNSET
    managedFields: Raw | UnsetType = UNSET


class _Head(Struct, gc=False):
    kind: str | UnsetType = UNSET
    apiVersion: str | UnsetType = UNSET
    metadata: _Meta | UnsetType = UNSET


class _MetadataOnly(Struct):
    metadata: dict[str, Any] | None = None


class _Envelope(Struct):
    type: str
    object: Raw


class _ListMeta(Struct):
    resourceVersion: str = ""
    continue_: str | None = msgspec.field(default=None, name="continue")
    remainingItemCount: int | None = None


class _List(Struct):
    kind: str = ""
    apiVersion: str = ""
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[Raw] | None = None


_decode_head = msgspec.json.Decoder(_Head).decode
_decode_metadata = msgspec.json.Decoder(_MetadataOnly).decode
_decode_keys = msgspec.json.Decoder(dict[str, Raw]).decode
_decode_envelope = msgspec.json.Decoder(_Envelope).decode
_decode_list = msgspec.json.Decoder(_List).decode
_loads = orjson.loads
_MF_KEY = b'"managedFields":'
_MF_KEY_LEN = len(_MF_KEY)
_COMMA = ord(",")
_FAST_META = ("name", "namespace", "resourceVersion")
_intern = sys.intern


class LazyObject(Mapping[str, Any]):
    """A read-only Mapping over one object's JSON bytes.

    Invariants: ``_raw`` (bytes, or a msgspec Raw slice of a larger buffer) is the object's JSON and the single
    source of truth. ``_key`` is None when the metadata did not fit the fast form; otherwise it is the
    object's ``namespace/name`` key (as :attr:`key`), computed once and shared by every copy the pipeline
    makes (FIFO, indexer), and ``_name``/``_ns``/``_rv`` hold name, namespace (interned) and resourceVersion
    decoded from ``_raw`` (UNSET when absent; ``_name`` is None when it is the part of ``_key`` after
    ``namespace/``, so it is not stored twice) and ``_mf`` the raw ``managedFields`` (UNSET when absent).
    ``_data`` is the full decode, made on first access to any member but ``metadata``; ``_md`` the decoded
    metadata dict, made on first access to a metadata field other than name/namespace/resourceVersion.
    """

    __slots__ = ("_data", "_key", "_md", "_mf", "_name", "_ns", "_raw", "_rv")
    __hash__ = None  # type: ignore[assignment]
    _raw: bytes | Raw
    _key: str | None
    _name: str | UnsetType | None
    _ns: str | UnsetType
    _rv: str | UnsetType
    _mf: Raw | UnsetType

    def __init__(self, raw: bytes | Raw, meta: _Meta | UnsetType | None = UNSET) -> None:
        """``raw`` is one object's JSON; ``meta`` its decoded fast metadata when the caller has it."""
        self._raw = raw
        self._data: dict[str, Any] | None = None
        self._md: dict[str, Any] | None = None
        if meta is UNSET:
            try:
                head = _decode_head(raw)
            except msgspec.ValidationError:
                meta = None
            else:
                meta = head.metadata if head.metadata is not UNSET else None
        if meta is None:
            self._key = None
            self._name = self._ns = self._rv = self._mf = UNSET
            return
        name, ns = meta.name, meta.namespace
        self._rv = meta.resourceVersion
        self._mf = meta.managedFields
        if ns is not UNSET:
            ns = _intern(ns)
        self._ns = ns
        if ns and name:  # (UNSET is falsy)
            self._key = object_key(ns, name)
            self._name = None
        else:
            self._key = "" if name is UNSET else name
            self._name = name

    def _with_raw(self, raw: bytes) -> LazyObject:
        """A copy over ``raw`` (the same object without managedFields): same fast metadata, nothing decoded."""
        new = _new_lazy(LazyObject)
        new._raw = raw
        new._data = new._md = None
        new._key = self._key
        new._name = self._name
        new._ns = self._ns
        new._rv = self._rv
        new._mf = UNSET
        gc_untrack(new)  # see the module's docstring
        return new

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> LazyObject:
        """A LazyObject over (a copy of) ``data``."""
        if isinstance(data, str):
            data = data.encode()
        return cls(bytes(data))

    # -- fast accessors (no decoding) ---------------------------------------------------------------------

    def _fast(self, field: str) -> Any:
        """A fast metadata field's value: a str, or UNSET when absent (only valid when ``_key`` is not None)."""
        if field == "name":
            name = self._name
            return self._key[len(self._ns) + 1:] if name is None else name  # type: ignore[index, arg-type]
        return self._ns if field == "namespace" else self._rv

    def _meta_str(self, field: str) -> str:
        if self._key is not None:
            value = self._fast(field)
            return "" if value is UNSET else value
        md = self._metadata()
        value = md.get(field) if md is not None else None
        return value if isinstance(value, str) else ""

    @property
    def name(self) -> str:
        return self._meta_str("name")

    @property
    def namespace(self) -> str:
        ns = self._ns
        if self._key is not None:
            return "" if ns is UNSET else ns
        return self._meta_str("namespace")

    @property
    def resource_version(self) -> str:
        rv = self._rv
        if self._key is not None:
            return "" if rv is UNSET else rv
        return self._meta_str("resourceVersion")

    @property
    def key(self) -> str:
        """``namespace/name`` (or ``name`` for cluster-scoped objects), as client-go's MetaNamespaceKeyFunc."""
        key = self._key
        if key is not None:
            return key
        name = self._meta_str("name")
        ns = self._meta_str("namespace")
        return object_key(ns, name) if name else name

    # -- decoding -----------------------------------------------------------------------------------------

    def _decoded(self) -> dict[str, Any]:
        data = self._data
        if data is None:
            raw = self._raw
            data = self._data = _loads(raw if type(raw) is bytes else memoryview(raw))
            self._md = None  # the full decode holds the metadata now
        return data

    def _metadata(self) -> dict[str, Any] | None:
        """The metadata dict, or None when the object has none (or is not a JSON object at all)."""
        data = self._data
        if data is not None:
            md = data.get("metadata") if isinstance(data, dict) else None
            return md if isinstance(md, dict) else None
        md = self._md
        if md is None:
            try:
                md = self._md = _decode_metadata(self._raw).metadata
            except msgspec.MsgspecError:
                return None
        return md

    # -- Mapping ------------------------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        data = self._data
        if data is not None:
            return data[key]
        if key == "metadata":
            if self._key is not None:
                return MetadataView(self)
            md = self._metadata()
            if md is None:
                return self._decoded()[key]
            return md
        return self._decoded()[key]

    def get(self, key: str, default: Any = None) -> Any:
        data = self._data
        if type(data) is dict:  # decoded (the common case: one call, not three)
            return data.get(key, default)
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        data = self._data
        if data is not None:
            return key in data
        if key == "metadata" and self._key is not None:
            return True
        return key in _decode_keys(self._raw)

    def __iter__(self) -> Iterator[str]:
        data = self._data
        return iter(data if data is not None else list(_decode_keys(self._raw)))

    def __len__(self) -> int:
        data = self._data
        return len(data if data is not None else _decode_keys(self._raw))

    def __repr__(self) -> str:
        kind = _decode_head(self._raw).kind if self._key is not None else self.get("kind")
        return f"<LazyObject {kind or '?'} {self.key or '?'} rv={self.resource_version or '?'}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (LazyObject.from_json, (self.to_json(),))

    def __copy__(self) -> LazyObject:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> LazyObject:
        return self

    # -- conversions --------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A fresh plain deep dict of the object (the caller may mutate it)."""
        raw = self._raw
        return _loads(raw if type(raw) is bytes else memoryview(raw))

    def to_json(self) -> bytes:
        """The object's compact JSON bytes."""
        return bytes(self._raw)

    @property
    def has_managed_fields(self) -> bool:
        if self._key is not None:
            return self._mf is not UNSET
        md = self._metadata()
        return md is not None and "managedFields" in md

    def without_managed_fields(self) -> LazyObject:
        """The same object without ``metadata.managedFields``, as compact bytes of its own.

        The result references no larger buffer (a watch line or a list body), so caching it costs about the
        object's JSON size. managedFields is cut out of the bytes directly when it can be located exactly
        (:func:`_cut_managed_fields`); otherwise the object is decoded and re-encoded.
        """
        raw = self._raw
        if self._key is None:
            return self._strip_by_decoding()
        value = self._mf
        if value is UNSET:
            return self if type(raw) is bytes else self._with_raw(bytes(raw))
        data = bytes(raw)  # no copy when raw is bytes already
        cut = _cut_managed_fields(data, 0, len(data), value)
        return self._strip_by_decoding() if cut is None else self._with_raw(cut)

    def _strip_by_decoding(self) -> LazyObject:
        data = self.to_dict()
        md = data.get("metadata")
        if isinstance(md, dict):
            md.pop("managedFields", None)
        return LazyObject(orjson.dumps(data))


_new_lazy = LazyObject.__new__


def _cut_managed_fields(data: bytes, lo: int, hi: int, value: bytes | Raw) -> bytes | None:
    """The object ``data[lo:hi]`` without its ``"managedFields":<value>`` member (and one comma beside it), as
    new bytes; None when that member cannot be located exactly (the caller then decodes).

    ``value`` is the metadata's managedFields as the object's own decode found it (a slice of the same JSON).
    In valid JSON the bytes ``"managedFields":`` can only be a member's key (a quote inside a string is
    escaped), at any depth: the first one must be followed by ``value``, and no later one may be (a nested
    member or an earlier one with the very same value would make the cut ambiguous: never guess). A later
    occurrence must leave room for the value after it, which bounds the search.
    """
    found = data.find(_MF_KEY, lo, hi)
    start = found + _MF_KEY_LEN
    if found < 0 or not data.startswith(value, start):
        return None
    size = len(value)
    start, end = found, start + size
    last = data.rfind(_MF_KEY, end, hi - size)
    while last >= 0:
        if data.startswith(value, last + _MF_KEY_LEN):
            return None
        last = data.rfind(_MF_KEY, end, last)
    if start and data[start - 1] == _COMMA:
        start -= 1
    elif end < hi and data[end] == _COMMA:
        end += 1
    return data[lo:start] + data[end:hi]


def without_managed_fields_from(data: bytes, lo: int, hi: int, meta: _Meta | None) -> LazyObject:
    """``LazyObject(data[lo:hi], meta).without_managed_fields()`` (the same bytes, the same fast fields), built
    without that intermediate object: ``data[lo:hi]`` is the object's JSON, ``meta`` its decoded fast metadata
    (None when it has none of the fast form); ``meta`` is the caller's to give away."""
    if meta is not None:
        value = meta.managedFields
        cut = data[lo:hi] if value is UNSET else _cut_managed_fields(data, lo, hi, value)
        if cut is not None:
            meta.managedFields = UNSET
            obj = LazyObject(cut, meta)
            gc_untrack(obj)  # as the compact copy of without_managed_fields (see the module's docstring)
            return obj
    return LazyObject(data[lo:hi], meta).without_managed_fields()


def decode_without_managed_fields(raw: bytes | Raw) -> LazyObject:
    """One object's JSON as ``LazyObject(raw).without_managed_fields()`` would make it, in one step."""
    data = bytes(raw)  # no copy when raw is bytes already
    try:
        head = _decode_head(data)
    except msgspec.ValidationError:
        return LazyObject(raw, None).without_managed_fields()
    meta = head.metadata
    return without_managed_fields_from(data, 0, len(data), None if meta is UNSET else meta)


def _fast_namespace(obj: LazyObject) -> str | None:
    if obj._key is None:
        return None
    ns = obj._ns
    return "" if ns is UNSET else ns


def _fast_resource_version(obj: LazyObject) -> str | None:
    if obj._key is None:
        return None
    rv = obj._rv
    return "" if rv is UNSET else rv


def _fast_kind(obj: LazyObject) -> str | None:
    """``kind`` when it is a string: from the decode when there is one, else from the head of the JSON alone
    (the rest skipped, not built); None (the generic path decides) for anything else."""
    data = obj._data
    if data is not None:
        kind = data.get("kind") if type(data) is dict else None
    else:
        try:
            kind = _decode_head(obj._raw).kind
        except msgspec.MsgspecError:  # not a JSON object, or a kind that is not a string
            return None
    return kind if type(kind) is str else None


register_fast_metadata(LazyObject, key=attrgetter("_key"), namespace=_fast_namespace,
                       resource_version=_fast_resource_version, kind=_fast_kind)


class MetadataView(Mapping[str, Any]):
    """``obj["metadata"]`` of a :class:`LazyObject`: name, namespace and resourceVersion come without decoding;
    any other field decodes the metadata once (cached on the object)."""

    __slots__ = ("_obj",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, obj: LazyObject) -> None:
        self._obj = obj

    def __getitem__(self, key: str) -> Any:
        obj = self._obj
        if key in _FAST_META and obj._key is not None:
            value = obj._fast(key)
            if value is UNSET:
                raise KeyError(key)
            return value
        md = obj._metadata()
        if md is None:
            raise KeyError(key)
        return md[key]

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        md = self._obj._metadata()
        return md is not None and key in md

    def __iter__(self) -> Iterator[str]:
        md = self._obj._metadata()
        return iter(md if md is not None else ())

    def __len__(self) -> int:
        md = self._obj._metadata()
        return len(md) if md is not None else 0

    def __bool__(self) -> bool:
        # ``meta or {}`` is common: answer from the fast fields when they say the metadata is not empty.
        obj = self._obj
        if obj._key is not None and (obj._name is not UNSET or obj._ns is not UNSET or obj._rv is not UNSET):
            return True
        return len(self) > 0

    def __repr__(self) -> str:
        return repr(self._obj._metadata())


def decode_object(data: bytes | bytearray | memoryview | str) -> LazyObject:
    """Decode one object's JSON into a :class:`LazyObject`."""
    return LazyObject.from_json(data)


def decode_list(data: bytes | bytearray | memoryview | str, *, drop_managed_fields: bool = False,
                ) -> tuple[list[LazyObject], str, str | None, int | None]:
    """Decode a ``<Kind>List`` body: (items, resourceVersion, continue, remainingItemCount).

    Items without ``kind``/``apiVersion`` (the API server leaves them out of lists) get them from the list.
    ``drop_managed_fields``: each item is as its :meth:`LazyObject.without_managed_fields` copy would be.
    """
    lst = _decode_list(data)
    kind = lst.kind[:-4] if lst.kind.endswith("List") else ""
    kind_json = orjson.dumps(kind) if kind else b""
    api = orjson.dumps(lst.apiVersion) if lst.apiVersion else b""
    items: list[LazyObject] = []
    append = items.append
    for raw in lst.items or ():
        try:
            head = _decode_head(raw)
        except msgspec.ValidationError:
            obj = LazyObject(bytes(raw), None)
            append(obj.without_managed_fields() if drop_managed_fields else obj)
            continue
        meta = head.metadata if head.metadata is not UNSET else None
        add = []
        if head.kind is UNSET and kind:
            add.append(b'"kind":' + kind_json)
        if head.apiVersion is UNSET and api:
            add.append(b'"apiVersion":' + api)
        body: bytes | Raw = raw
        if add:
            whole = bytes(raw)
            sep = b"," if whole.strip() != b"{}" else b""
            body = b"{" + b",".join(add) + sep + whole.lstrip()[1:]
        if drop_managed_fields:
            whole = bytes(body)
            append(without_managed_fields_from(whole, 0, len(whole), meta))
        else:
            append(LazyObject(body, meta))
    list_meta = lst.metadata
    return items, list_meta.resourceVersion, list_meta.continue_ or None, list_meta.remainingItemCount


def to_plain(obj: Any) -> Any:
    """A plain JSON-compatible deep copy of ``obj`` (LazyObjects and other Mappings become dicts)."""
    if isinstance(obj, LazyObject):
        return obj.to_dict()
    if isinstance(obj, Mapping):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_plain(v) for v in obj]
    return obj


def _default(obj: Any) -> Any:
    if isinstance(obj, LazyObject):
        return orjson.Fragment(obj.to_json())
    if isinstance(obj, MetadataView):
        return obj._obj._metadata()
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


def encode(obj: Any) -> bytes:
    """Compact JSON bytes for a request body (dicts, LazyObjects, any Mapping)."""
    if isinstance(obj, bytes | bytearray):
        return bytes(obj)
    return orjson.dumps(obj, default=_default)
