"""The informer's cache: a key -> object map with secondary indices (client-go's Indexer / threadSafeMap).

Objects are the unstructured JSON form (any ``Mapping``); the store never copies or mutates them, and
callers must treat what it returns as read-only.

Thread-safety: mutations happen on one thread (the informer's event loop) while readers may be any
thread (synchronous handlers run in worker threads). Every mutation and every compound read takes one
``threading.Lock``; single-key reads (``get_by_key``, ``in``, ``len``) are single dict operations and
need no lock under the GIL.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from kinformer.cache.tombstone import DeletedFinalStateUnknown
from kinformer.meta import (
    fast_getters,
    fast_resource_version,
    meta_namespace_key,
    namespace_of,
    split_meta_namespace_key,
)

__all__ = [
    "NAMESPACE_INDEX",
    "IndexFunc",
    "Indexer",
    "KeyFunc",
    "Store",
    "fast_resource_version",
    "meta_namespace_index_func",
    "meta_namespace_key",
    "split_meta_namespace_key",
]

KeyFunc = Callable[[Any], str]
#: An index function returns the values an object is indexed under (a list; any iterable, or a single str, is
#: accepted and converted). The returned list must not be mutated afterwards: the store keeps it.
IndexFunc = Callable[[Any], Iterable[str]]

NAMESPACE_INDEX = "namespace"

#: the type of the objects a store holds (unparameterized: any)
T = TypeVar("T")


def meta_namespace_index_func(obj: Any) -> list[str]:
    """Index by namespace ("" for cluster-scoped objects)."""
    return [namespace_of(obj)]


_MISSING: Any = object()


#: What the store keeps of one index function's result: the value itself when there is exactly one (the
#: common case, and no container to hold), else a tuple of the values.
_Entry = str | tuple[str, ...]


_CANON_MAX = 4096


def _entry(values: Iterable[str] | str) -> _Entry:
    """An index function's result in its stored form (a bare string counts as one value, not as characters)."""
    if isinstance(values, str):
        return values
    vals = tuple(values)
    if len(vals) == 1 and vals[0].__class__ is str:
        return vals[0]
    return vals


def _values_of(entry: _Entry) -> tuple[str, ...]:
    """The values of a stored entry."""
    return (entry,) if entry.__class__ is str else entry  # type: ignore[return-value]


def _unknown_index(name: str) -> KeyError:
    return KeyError(f"index with name {name!r} does not exist")


class Indexer(Generic[T]):
    """A thread-safe object store keyed by ``key_func`` with named secondary indices.

    Invariants (held under the lock):
      * ``_items[k]`` is the object stored under key ``k``;
      * ``_canon_one[e]`` is ``_canon[(e,)]`` (the canonical tuple of one entry, found without making one);
      * ``_values[k][i]`` is what index function ``i`` returned for ``_items[k]`` when it was stored, as an
        :data:`_Entry` (so an update compares against, and a delete removes, exactly what was indexed);
      * for every index ``i`` and value ``v``: ``_indices[name_i][v]`` is the non-empty set of keys whose
        ``_values[k][i]`` contains ``v`` (empty sets are dropped).

    The namespace index (:data:`NAMESPACE_INDEX`) is always present unless ``indexers`` overrides it.
    An index function that raises leaves the store unchanged.
    """

    __slots__ = ("_canon", "_canon_one", "_fast_class", "_fast_key", "_fast_namespace", "_funcs", "_indexers",
                 "_indices", "_items", "_key_func", "_lock", "_maps", "_values")

    def __init__(self, key_func: KeyFunc = meta_namespace_key,
                 indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._key_func = key_func
        self._lock = threading.Lock()
        self._items: dict[str, T] = {}
        self._values: dict[str, tuple[_Entry, ...]] = {}
        # one shared tuple per distinct index values (objects mostly share them: a namespace, an app label)
        self._canon: dict[tuple[_Entry, ...], tuple[_Entry, ...]] = {}
        self._canon_one: dict[_Entry, tuple[_Entry, ...]] = {}  # the same tuples of one entry, by that entry
        self._indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: meta_namespace_index_func, **(indexers or {})}
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        self._refresh_specs()

    def _refresh_specs(self) -> None:
        # parallel tuples in the order of self._indexers: the hot path iterates these
        # (the namespace index's function answers its one value bare, as a str: no list made and taken apart)
        self._funcs: tuple[Callable[[Any], Any], ...] = tuple(
            namespace_of if f is meta_namespace_index_func else f for f in self._indexers.values())
        self._maps: tuple[dict[str, set[str]], ...] = tuple(self._indices[name] for name in self._indexers)
        self._fast_class: type | None = None  # the class _fast_key and _fast_namespace were chosen for
        self._fast_key: Callable[[Any], str | None] | None = None
        self._fast_namespace: Callable[[Any], str | None] | None = None

    def _choose_fast_getters(self, cls: type) -> None:
        """For objects of ``cls``: the registered fast getters (:func:`kinformer.meta.fast_getters`) of the key,
        if the key function is :func:`meta_namespace_key`, and of the namespace, if the only index is the
        namespace index; None where not (each answers None, or "" for a key, when the generic path must run)."""
        key, namespace, _ = fast_getters(cls)
        self._fast_key = key if self._key_func is meta_namespace_key else None
        self._fast_namespace = namespace if self._funcs == (namespace_of,) else None
        self._fast_class = cls

    # ------------------------------------------------------------------ keys

    def key_of(self, obj: T | DeletedFinalStateUnknown) -> str:
        """The store key of ``obj`` (a tombstone's recorded key for DeletedFinalStateUnknown)."""
        if isinstance(obj, DeletedFinalStateUnknown):
            return obj.key
        return self._key_func(obj)

    # ------------------------------------------------------------------ mutations

    @property
    def lock(self) -> threading.Lock:
        """The lock every mutation holds; hold it to apply several changes with ``*_locked`` in one go."""
        return self._lock

    def add(self, obj: T) -> T | None:
        """Insert or replace ``obj`` under its key; return the object it replaced (None if new)."""
        with self._lock:
            return self.add_locked(obj)

    def add_locked(self, obj: T) -> T | None:
        """:meth:`add`, the caller holding :attr:`lock`. A key function or index function that raises leaves
        the store as it was."""
        if obj.__class__ is not self._fast_class:
            self._choose_fast_getters(obj.__class__)
        fast_key = self._fast_key
        key = (fast_key(obj) if fast_key is not None else None) or self._key_func(obj)
        # the index values before any change (a raising index func leaves the store as it was); with the
        # namespace index alone and a fast namespace, mostly one lookup of the canonical tuple
        fast_namespace = self._fast_namespace
        namespace = fast_namespace(obj) if fast_namespace is not None else None
        values = self._canon_one.get(namespace) if namespace is not None else None
        if values is None:
            values = self._index_values(obj)
        items = self._items
        old = items.get(key)
        items[key] = obj
        stored = self._values
        old_values = stored.get(key) if old is not None else None  # a new key has no stored values
        stored[key] = values
        if old_values is not values:  # canonical tuples: the same values are mostly the same tuple
            if old_values is None:
                if namespace is not None:  # the namespace index alone (a fast namespace): its one entry
                    index = self._maps[0]
                    keys = index.get(namespace)
                    if keys is None:
                        index[namespace] = {key}
                    else:
                        keys.add(key)
                else:
                    self._index_new(key, values)
            elif old_values != values:
                self._reindex(key, old_values, values)
        return old

    def _index_values(self, obj: T) -> tuple[_Entry, ...]:
        """What every index function returns for ``obj``, as the canonical tuple of stored entries."""
        funcs = self._funcs
        if len(funcs) == 1:  # the default store: the namespace index only (one lookup by the bare value)
            v = funcs[0](obj)
            if v.__class__ is not str:
                v = _entry(v)
            found = self._canon_one.get(v)
            if found is not None:
                return found
            return self._shared((v,))
        entries: list[_Entry] = []
        for f in funcs:
            v = f(obj)
            if v.__class__ is str:
                entries.append(v)
            elif v.__class__ is list and len(v) == 1 and v[0].__class__ is str:
                entries.append(v[0])
            else:
                entries.append(_entry(v))
        return self._shared(tuple(entries))

    def _index_new(self, key: str, values: tuple[_Entry, ...]) -> None:
        """Add a key that was not stored to the index entries of ``values`` (lock held)."""
        for i, index in enumerate(self._maps):
            entry = values[i]
            for v in (entry,) if entry.__class__ is str else entry:
                keys = index.get(v)
                if keys is None:
                    index[v] = {key}
                else:
                    keys.add(key)

    update = add

    def delete(self, obj: T | DeletedFinalStateUnknown) -> T | None:
        """Remove the object with ``obj``'s key (tombstones accepted); return what was removed, or None."""
        return self.delete_key(self.key_of(obj))

    def delete_locked(self, obj: T | DeletedFinalStateUnknown) -> T | None:
        """:meth:`delete`, the caller holding :attr:`lock`."""
        return self._delete_key_locked(self.key_of(obj))

    def delete_key(self, key: str) -> T | None:
        """Remove the object stored under ``key``; return it, or None if there was none."""
        with self._lock:
            return self._delete_key_locked(key)

    def _delete_key_locked(self, key: str) -> T | None:
        old = self._items.pop(key, _MISSING)
        if old is _MISSING:
            return None
        self._reindex(key, self._values.pop(key), None)
        return old

    def _shared(self, values: tuple[_Entry, ...]) -> tuple[_Entry, ...]:
        """The canonical copy of ``values`` (at most ``_CANON_MAX`` kept: beyond, values are stored as given)."""
        canon = self._canon
        found = canon.get(values)
        if found is not None:
            return found
        if len(canon) < _CANON_MAX:
            canon[values] = values
            if len(values) == 1:
                self._canon_one[values[0]] = values
        return values

    def replace(self, objs: Iterable[T], resource_version: str = "") -> None:
        """Make the store hold exactly ``objs`` (later duplicates of a key win); indices are rebuilt."""
        key_func = self._key_func
        with self._lock:
            funcs = self._funcs
            items: dict[str, T] = {}
            values: dict[str, tuple[_Entry, ...]] = {}
            for obj in objs:  # everything that may raise happens before the store changes
                key = key_func(obj)
                items[key] = obj
                values[key] = self._shared(tuple([_entry(f(obj)) for f in funcs]))
            self._items, self._values = items, values
            self._indices = {name: {} for name in self._indexers}
            self._refresh_specs()
            index_new = self._index_new
            for key, vals in values.items():
                index_new(key, vals)

    def resync(self) -> None:
        """Nothing to do for a plain store; kept so the store and the FIFO share an interface."""

    def _reindex(self, key: str, old: tuple[_Entry, ...] | None, new: tuple[_Entry, ...] | None) -> None:
        """Move ``key`` from the index entries of ``old`` values to those of ``new`` (lock held)."""
        for i, index in enumerate(self._maps):
            old_entry = old[i] if old is not None else ()
            new_entry = new[i] if new is not None else ()
            if old_entry == new_entry:
                continue
            old_vals = (old_entry,) if old_entry.__class__ is str else old_entry
            new_vals = (new_entry,) if new_entry.__class__ is str else new_entry
            for v in old_vals:
                if v in new_vals:
                    continue
                keys = index.get(v)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[v]
            for v in new_vals:
                keys = index.get(v)
                if keys is None:
                    index[v] = {key}
                else:
                    keys.add(key)

    # ------------------------------------------------------------------ reads

    def get(self, obj: T | DeletedFinalStateUnknown) -> T | None:
        """The stored object with ``obj``'s key, or None."""
        return self._items.get(self.key_of(obj))

    def get_by_key(self, key: str) -> T | None:
        """The object stored under ``key``, or None."""
        return self._items.get(key)

    def list(self) -> list[T]:
        """A snapshot of every stored object (no particular order)."""
        with self._lock:
            return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        """A snapshot of every key."""
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    # ------------------------------------------------------------------ indices

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indices; objects already stored are indexed at once. A name already in use raises ValueError."""
        with self._lock:
            conflict = sorted(set(indexers) & set(self._indexers))
            if conflict:
                raise ValueError(f"indexer conflict: {conflict}")
            new_funcs = tuple(indexers.values())
            extra = {key: tuple([_entry(f(obj)) for f in new_funcs]) for key, obj in self._items.items()}
            new_maps: list[dict[str, set[str]]] = []
            for i, name in enumerate(indexers):
                index: dict[str, set[str]] = {}
                for key, vals in extra.items():
                    for v in _values_of(vals[i]):
                        index.setdefault(v, set()).add(key)
                new_maps.append(index)
                self._indexers[name] = indexers[name]
                self._indices[name] = index
            for key, vals in extra.items():
                self._values[key] = self._values[key] + vals
            self._refresh_specs()

    def get_indexers(self) -> dict[str, IndexFunc]:
        """A copy of the index name -> index function mapping."""
        return dict(self._indexers)

    def _index(self, index_name: str) -> dict[str, set[str]]:
        index = self._indices.get(index_name)
        if index is None:
            raise _unknown_index(index_name)
        return index

    def index(self, index_name: str, obj: T) -> builtins.list[T]:
        """The stored objects that share at least one of ``obj``'s values in index ``index_name``."""
        func = self._indexers.get(index_name)
        if func is None:
            raise _unknown_index(index_name)
        values = _values_of(_entry(func(obj)))
        with self._lock:
            index = self._index(index_name)
            if len(values) == 1:
                keys: Iterable[str] = index.get(values[0], ())
            else:
                keys = set().union(*(index.get(v, ()) for v in values))
            items = self._items
            return [items[k] for k in keys]

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        """The keys of the objects whose ``index_name`` values include ``value``."""
        with self._lock:
            return list(self._index(index_name).get(value, ()))

    def by_index(self, index_name: str, value: str) -> builtins.list[T]:
        """The objects whose ``index_name`` values include ``value``."""
        with self._lock:
            keys = self._index(index_name).get(value, ())
            items = self._items
            return [items[k] for k in keys]

    def list_index_func_values(self, index_name: str) -> builtins.list[str]:
        """Every value index ``index_name`` currently holds a non-empty entry for."""
        with self._lock:
            return list(self._index(index_name))


Store = Indexer
