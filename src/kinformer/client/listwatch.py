"""The reflector's :class:`~kinformer.cache.listwatch.ListerWatcher` over a :class:`~kinformer.client.Client`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from kinformer.cache.listwatch import ListOptions, ListResult, WatchEvent
from kinformer.client.discovery import Resource

if TYPE_CHECKING:
    from kinformer.client.client import Client

__all__ = ["ClientListerWatcher"]


class ClientListerWatcher:
    """Lists and watches one resource (optionally one namespace, with fixed selectors) over HTTP.

    The resource name is resolved through discovery on first use. Selectors given here are added to every
    request unless the options carry their own. Errors follow the ListerWatcher contract: typed
    :class:`~kinformer.errors.APIError` subclasses (``Expired`` for 410), transport exceptions otherwise.
    Streaming lists (``send_initial_events=True``) travel on the watch path unchanged.
    """

    __slots__ = ("_resolved", "client", "field_selector", "label_selector", "namespace", "resource")

    def __init__(self, client: Client, resource: str | Resource, *, namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._resolved: Resource | None = resource if isinstance(resource, Resource) else None

    async def resolved(self) -> Resource:
        """The :class:`Resource` (discovered once)."""
        if self._resolved is None:
            self._resolved = await self.client.resolve(self.resource)
        return self._resolved

    def _options(self, options: ListOptions) -> ListOptions:
        """The informer's selectors AND any selectors already in ``options`` (e.g. from a tweak)."""
        if self.label_selector or self.field_selector:
            options = options.copy(label_selector=_join(self.label_selector, options.label_selector),
                                   field_selector=_join(self.field_selector, options.field_selector))
        return options

    async def list(self, options: ListOptions) -> ListResult:
        res = await self.resolved()
        return await self.client.list_page(res, self._options(options), self.namespace)

    async def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
        res = await self.resolved()
        async for event in self.client.watch_stream(res, self._options(options), self.namespace):
            yield event

    def __repr__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        return f"<ClientListerWatcher {self.resource}{where}>"


def _join(*selectors: str | None) -> str | None:
    """Selectors joined with ',' (a conjunction), skipping empty ones and repeats."""
    parts = list(dict.fromkeys(s for s in selectors if s))
    return ",".join(parts) or None
