"""Listers: read-only, selector-aware views of an informer's cache (client-go's generated listers).

``get`` raises :class:`kinformer.errors.NotFound` shaped like the API server's answer, so code written
against the client (``except NotFound``) works unchanged against the cache. A lister is generic in the type of
its objects (``Lister[Deployment]`` from ``factory.informer(Deployment).lister()``): for type checkers only, the
objects are the cache's own.
"""

from __future__ import annotations

from typing import Any, Generic

from kinformer.cache.store import NAMESPACE_INDEX, Indexer
from kinformer.errors import NotFound
from kinformer.meta import object_key
from kinformer.selectors import LabelSelector, parse_label_selector
from kinformer.typed_resources import ObjT

__all__ = ["Lister", "NamespaceLister"]


def _selector(label_selector: str | LabelSelector | None) -> LabelSelector | None:
    if label_selector is None:
        return None
    sel = parse_label_selector(label_selector) if isinstance(label_selector, str) else label_selector
    return None if sel.empty() else sel


def _filter(objs: list[ObjT], selector: LabelSelector | None) -> list[ObjT]:
    if selector is None:
        return objs
    matches = selector.matches
    return [o for o in objs if matches(o["metadata"].get("labels"))]  # type: ignore[index]


class Lister(Generic[ObjT]):
    """List and get objects from an :class:`Indexer` (the objects are shared: treat them as read-only).

    ``resource`` (e.g. ``"configmap"``) only shapes NotFound messages: ``configmap "x" not found``.
    """

    __slots__ = ("_indexer", "_namespaced", "_resource")

    def __init__(self, indexer: Indexer[ObjT], namespaced: bool = True, resource: str = "") -> None:
        self._indexer = indexer
        self._namespaced = namespaced
        self._resource = resource

    @property
    def indexer(self) -> Indexer[ObjT]:
        return self._indexer

    def list(self, namespace: str | None = None,
             label_selector: str | LabelSelector | None = None) -> list[ObjT]:
        """Objects in ``namespace`` (all namespaces if None or "") matching ``label_selector``."""
        objs = self._indexer.by_index(NAMESPACE_INDEX, namespace) if namespace else self._indexer.list()
        return objs if label_selector is None else _filter(objs, _selector(label_selector))

    def get(self, name: str, namespace: str | None = None) -> ObjT:
        """The object ``name`` in ``namespace`` (argument order as ``Client.get``); cluster-scoped objects
        have no namespace. Omitting it for a namespaced resource is a TypeError (use
        ``namespaced(ns).get(name)`` or pass ``namespace``). Raises :class:`kinformer.errors.NotFound` (code
        404, reason NotFound, the message the API server would give) when the cache holds no such object, as
        client-go's listers do; ``indexer.get_by_key`` returns None instead."""
        if not namespace and self._namespaced:
            raise TypeError("namespaced lister: call get(name, namespace) or namespaced(namespace).get(name)")
        key = object_key(namespace, name)
        obj = self._indexer.get_by_key(key)
        if obj is None:
            raise _not_found(self._resource, name)
        return obj

    def namespaced(self, namespace: str) -> NamespaceLister[ObjT]:
        """A lister restricted to ``namespace``."""
        return NamespaceLister(self._indexer, namespace, self._resource)


class NamespaceLister(Generic[ObjT]):
    """A :class:`Lister` bound to one namespace."""

    __slots__ = ("_indexer", "_namespace", "_resource")

    def __init__(self, indexer: Indexer[ObjT], namespace: str, resource: str = "") -> None:
        self._indexer = indexer
        self._namespace = namespace
        self._resource = resource

    @property
    def namespace(self) -> str:
        return self._namespace

    def list(self, label_selector: str | LabelSelector | None = None) -> list[ObjT]:
        """Objects in this namespace matching ``label_selector``."""
        objs = self._indexer.by_index(NAMESPACE_INDEX, self._namespace)
        return _filter(objs, _selector(label_selector))

    def get(self, name: str) -> ObjT:
        """The object ``name`` in this namespace; raises :class:`kinformer.errors.NotFound` when absent."""
        key = object_key(self._namespace, name)
        obj = self._indexer.get_by_key(key)
        if obj is None:
            raise _not_found(self._resource, name)
        return obj


def _not_found(resource: str, name: str) -> NotFound:
    message = f'{resource} "{name}" not found' if resource else f'"{name}" not found'
    details: dict[str, Any] = {"name": name}
    if resource:
        details["kind"] = resource
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
              "reason": "NotFound", "details": details, "code": 404}
    return NotFound(message, status=status)
