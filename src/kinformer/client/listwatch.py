"""The reflector's :class:`~kinformer.listwatch.ListerWatcher` over a :class:`~kinformer.client.Client`."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, cast

from kinformer.client.discovery import Resource
from kinformer.client.partial import is_partial, to_partial_object_metadata
from kinformer.errors import APIError
from kinformer.listwatch import ListOptions, ListResult, WatchBatch, WatchEvent

if TYPE_CHECKING:
    from kinformer.client.client import Client
    from kinformer.client.objects import LazyObject

__all__ = ["PARTIAL_OBJECT_METADATA_ACCEPT", "PARTIAL_OBJECT_METADATA_LIST_ACCEPT", "ClientListerWatcher",
           "to_partial_object_metadata"]

log = logging.getLogger(__name__)

#: ``Accept`` of a metadata-only list and of a metadata-only get or watch; plain JSON is the fallback clause.
PARTIAL_OBJECT_METADATA_LIST_ACCEPT = ("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                                       "application/json")
PARTIAL_OBJECT_METADATA_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"


class ClientListerWatcher:
    """Lists and watches one resource (optionally one namespace, with fixed selectors) over HTTP.

    The resource name is resolved through discovery on first use. Selectors given here are added to every
    request unless the options carry their own. Errors follow the ListerWatcher contract: typed
    :class:`~kinformer.errors.APIError` subclasses (``Expired`` for 410), transport exceptions otherwise.
    Streaming lists (``send_initial_events=True``) travel on the watch path unchanged.

    ``metadata_only``: lists and watches ask for PartialObjectMetadata (client-go's metadata client) and
    every object returned is one; a server that answers with whole objects (it ignores ``as=``) or refuses
    the form (406) is served whole objects cut down here, so the caller never sees the difference.

    ``drop_managed_fields``: every listed object, and every ADDED/MODIFIED/DELETED event's object, is as its
    ``without_managed_fields()`` copy would be, cut while decoding (what an informer's default transform
    would make of it, without building the object with managedFields first); see
    :meth:`without_managed_fields`.
    """

    __slots__ = ("_plain_only", "_resolved", "client", "drop_managed_fields", "field_selector", "label_selector",
                 "metadata_only", "namespace", "resource")

    def __init__(self, client: Client, resource: str | Resource, *, namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 metadata_only: bool = False, drop_managed_fields: bool = False) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.metadata_only = metadata_only
        self.drop_managed_fields = drop_managed_fields
        self._plain_only = False  # the server refused the metadata-only form (406): ask for JSON
        self._resolved: Resource | None = resource if isinstance(resource, Resource) else None

    def without_managed_fields(self) -> ClientListerWatcher:
        """The same lists and watches, every object decoded without ``metadata.managedFields`` (the informer's
        hook for its default transform: :func:`kinformer.cache.transforms.decoding_transform`)."""
        copy = ClientListerWatcher(self.client, self._resolved or self.resource, namespace=self.namespace,
                                   label_selector=self.label_selector, field_selector=self.field_selector,
                                   metadata_only=self.metadata_only, drop_managed_fields=True)
        copy._plain_only = self._plain_only
        return copy

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

    def _accept(self, accept: str) -> dict[str, str] | None:
        return {"Accept": accept} if self.metadata_only and not self._plain_only else None

    async def list(self, options: ListOptions) -> ListResult:
        res = await self.resolved()
        options = self._options(options)
        drop = self.drop_managed_fields
        cut = drop and not self.metadata_only  # metadata-only: dropped while cutting down (or after)
        try:
            result = await self.client.list_page(res, options, self.namespace,
                                                 headers=self._accept(PARTIAL_OBJECT_METADATA_LIST_ACCEPT),
                                                 drop_managed_fields=cut)
        except APIError as exc:
            if exc.code != 406 or not self.metadata_only or self._plain_only:
                raise
            log.info("%s: the server does not serve PartialObjectMetadata (406); cutting whole objects down", res)
            self._plain_only = True
            result = await self.client.list_page(res, options, self.namespace, drop_managed_fields=cut)
        items = result.items
        if self.metadata_only and items:
            if not is_partial(items[0]):
                result.items = [to_partial_object_metadata(obj, drop_managed_fields=drop) for obj in items]
            elif drop:
                result.items = [cast("LazyObject", obj).without_managed_fields() for obj in items]
        return result

    def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
        """The client's own watch stream (no generator of ours in between: every event passes through it)."""
        return self.client.watch_stream(self._resolved or self.resource, self._options(options), self.namespace,
                                        headers=self._accept(PARTIAL_OBJECT_METADATA_ACCEPT),
                                        as_metadata=self.metadata_only, drop_managed_fields=self.drop_managed_fields)

    def watch_batches(self, options: ListOptions) -> AsyncIterator[WatchBatch]:
        """:meth:`watch`, one list of events per chunk read (the reflector's path: no await per event)."""
        return self.client.watch_batches(self._resolved or self.resource, self._options(options), self.namespace,
                                         headers=self._accept(PARTIAL_OBJECT_METADATA_ACCEPT),
                                         as_metadata=self.metadata_only,
                                         drop_managed_fields=self.drop_managed_fields)

    def __repr__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        return f"<ClientListerWatcher {self.resource}{where}>"


def _join(*selectors: str | None) -> str | None:
    """Selectors joined with ',' (a conjunction), skipping empty ones and repeats."""
    parts = list(dict.fromkeys(s for s in selectors if s))
    return ",".join(parts) or None
