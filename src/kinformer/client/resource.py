"""A client bound to one resource (and optionally one namespace): ``await client.resource("cm", "ns")``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from kinformer.client.discovery import Resource
from kinformer.client.objects import LazyObject
from kinformer.listwatch import ListResult, WatchEvent

if TYPE_CHECKING:
    from kinformer.client.client import Client

__all__ = ["ResourceClient"]


class ResourceClient:
    """The verbs of :class:`~kinformer.client.Client` with the resource (and namespace) filled in.

    A ``namespace`` passed to a method overrides the bound one.
    """

    __slots__ = ("client", "namespace", "resource")

    def __init__(self, client: Client, resource: Resource, namespace: str | None = None) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace

    def _ns(self, namespace: str | None) -> str | None:
        return namespace if namespace is not None else self.namespace

    async def get(self, name: str, namespace: str | None = None) -> LazyObject:
        return await self.client.get(self.resource, name, self._ns(namespace))

    async def list(self, namespace: str | None = None, **kwargs: Any) -> ListResult:
        return await self.client.list(self.resource, self._ns(namespace), **kwargs)

    def iter_list(self, namespace: str | None = None, **kwargs: Any) -> AsyncIterator[LazyObject]:
        return self.client.iter_list(self.resource, self._ns(namespace), **kwargs)

    def watch(self, namespace: str | None = None, **kwargs: Any) -> AsyncIterator[WatchEvent]:
        return self.client.watch(self.resource, self._ns(namespace), **kwargs)

    async def create(self, body: Mapping[str, Any], namespace: str | None = None, **kwargs: Any) -> LazyObject:
        return await self.client.create(self.resource, body, self._ns(namespace), **kwargs)

    async def replace(self, body: Mapping[str, Any], name: str | None = None, namespace: str | None = None,
                      **kwargs: Any) -> LazyObject:
        return await self.client.replace(self.resource, body, name, self._ns(namespace), **kwargs)

    async def patch(self, name: str, body: Any, patch_type: str = "merge", namespace: str | None = None,
                    **kwargs: Any) -> LazyObject:
        return await self.client.patch(self.resource, name, body, patch_type, self._ns(namespace), **kwargs)

    async def delete(self, name: str, namespace: str | None = None, **kwargs: Any) -> LazyObject:
        return await self.client.delete(self.resource, name, self._ns(namespace), **kwargs)

    async def get_status(self, name: str, namespace: str | None = None) -> LazyObject:
        return await self.client.get_status(self.resource, name, self._ns(namespace))

    async def replace_status(self, body: Mapping[str, Any], name: str | None = None, namespace: str | None = None,
                             **kwargs: Any) -> LazyObject:
        return await self.client.replace_status(self.resource, body, name, self._ns(namespace), **kwargs)

    async def patch_status(self, name: str, body: Any, patch_type: str = "merge", namespace: str | None = None,
                           **kwargs: Any) -> LazyObject:
        return await self.client.patch_status(self.resource, name, body, patch_type, self._ns(namespace), **kwargs)

    def lister_watcher(self, **kwargs: Any) -> Any:
        return self.client.lister_watcher(self.resource, namespace=self.namespace, **kwargs)

    def __repr__(self) -> str:
        return f"<ResourceClient {self.resource}{' in ' + self.namespace if self.namespace else ''}>"
