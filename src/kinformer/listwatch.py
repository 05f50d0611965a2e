"""The ListerWatcher contract between the cache machinery and whatever serves objects.

The reflector only needs two operations: a (possibly paginated) ``list`` that returns objects with the
collection's resourceVersion, and a ``watch`` that streams changes after a resourceVersion. The HTTP
client implements them against an API server; :mod:`kinformer.cache.fake` implements them in memory.

Error contract for implementations:

* ``list`` raises :class:`kinformer.errors.APIError` subclasses; :class:`kinformer.errors.Expired` (410) for a
  resourceVersion or continue token older than the server's history.
* ``watch`` returns an async iterator (normally an async generator) that the caller must ``aclose()``.
  Failing to open raises an ``APIError`` subclass (``Expired``, ``TooManyRequests``...) or a transport error
  (``OSError``/``ConnectionError``/``asyncio.TimeoutError``), either at the call or on the first
  ``__anext__``. A clean end of stream (server-side timeout) is ``StopAsyncIteration``; a stream that breaks
  half-way raises some other exception, which callers treat as a transport error.
* An implementation may also offer ``watch_batches(options)``: the same stream as lists of events (one per
  chunk read), under the same contract; the reflector prefers it (see :func:`watch_batches`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, cast, runtime_checkable

__all__ = [
    "ADDED",
    "BOOKMARK",
    "DELETED",
    "ERROR",
    "INITIAL_EVENTS_END_ANNOTATION",
    "MODIFIED",
    "ListOptions",
    "ListResult",
    "ListerWatcher",
    "TweakedListerWatcher",
    "WatchBatch",
    "WatchEvent",
    "batches_of_one",
    "watch_batches",
]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"
ERROR = "ERROR"

#: Annotation on the BOOKMARK that ends the initial events of a streaming list (KEP-3157).
INITIAL_EVENTS_END_ANNOTATION = "k8s.io/initial-events-end"


def _bool(value: bool) -> str:
    return "true" if value else "false"


@dataclass(slots=True)
class ListOptions:
    """Query options of a list or watch request.

    ``resource_version`` None means unset (a consistent, most recent read); ``"0"`` means any version
    (the server may answer from its cache and ignore ``limit``); ``"N"`` means not older than N.
    """

    resource_version: str | None = None
    resource_version_match: str | None = None
    limit: int | None = None
    continue_: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    timeout_seconds: int | None = None
    allow_watch_bookmarks: bool = False
    send_initial_events: bool | None = None

    def to_query(self) -> dict[str, str]:
        """The Kubernetes query parameters for these options (unset options are left out)."""
        query: dict[str, str] = {}
        if self.resource_version is not None:
            query["resourceVersion"] = self.resource_version
        if self.resource_version_match:
            query["resourceVersionMatch"] = self.resource_version_match
        if self.limit:
            query["limit"] = str(self.limit)
        if self.continue_:
            query["continue"] = self.continue_
        if self.label_selector:
            query["labelSelector"] = self.label_selector
        if self.field_selector:
            query["fieldSelector"] = self.field_selector
        if self.timeout_seconds is not None:
            query["timeoutSeconds"] = str(self.timeout_seconds)
        if self.allow_watch_bookmarks:
            query["allowWatchBookmarks"] = "true"
        if self.send_initial_events is not None:
            query["sendInitialEvents"] = _bool(self.send_initial_events)
        return query

    def copy(self, **changes: Any) -> ListOptions:
        """A copy with ``changes`` applied."""
        return replace(self, **changes)


@dataclass(slots=True)
class ListResult:
    """One page of a list: the objects, the collection's resourceVersion and the continue token."""

    items: list[Mapping[str, Any]] = field(default_factory=list)
    resource_version: str = ""
    continue_: str | None = None
    remaining_item_count: int | None = None


@dataclass(slots=True)
class WatchEvent:
    """One watch event. For ``ERROR`` the object is the ``Status``; for ``BOOKMARK`` only its
    ``metadata.resourceVersion`` (and annotations) are meaningful."""

    type: str
    object: Mapping[str, Any]


#: The events one read of a watch stream delivered (see :func:`watch_batches`).
WatchBatch = list[WatchEvent]


@runtime_checkable
class ListerWatcher(Protocol):
    """Lists and watches one kind of object (see the module docstring for the error contract)."""

    async def list(self, options: ListOptions) -> ListResult: ...

    def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]: ...


def watch_batches(lw: ListerWatcher, options: ListOptions) -> AsyncIterator[WatchBatch]:
    """``lw``'s watch as lists of events: its own ``watch_batches`` when it has one (a list per chunk read),
    else its ``watch``'s events in lists of one (closed with the result)."""
    batched = getattr(lw, "watch_batches", None)
    if batched is not None:
        return cast(AsyncIterator[WatchBatch], batched(options))
    return batches_of_one(lw.watch(options))


async def batches_of_one(events: AsyncIterator[WatchEvent]) -> AsyncIterator[WatchBatch]:
    """Each event of ``events`` as a list of one; ``events`` is closed (if it can be) when this ends."""
    try:
        async for event in events:
            yield [event]
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


class TweakedListerWatcher:
    """Applies ``tweak`` (e.g. setting label or field selectors) to a copy of every options object
    before delegating to ``lw``. The caller's options are never modified."""

    __slots__ = ("lw", "tweak")

    def __init__(self, lw: ListerWatcher, tweak: Callable[[ListOptions], None]) -> None:
        self.lw = lw
        self.tweak = tweak

    def _tweaked(self, options: ListOptions) -> ListOptions:
        options = replace(options)
        self.tweak(options)
        return options

    async def list(self, options: ListOptions) -> ListResult:
        return await self.lw.list(self._tweaked(options))

    def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
        return self.lw.watch(self._tweaked(options))

    def watch_batches(self, options: ListOptions) -> AsyncIterator[WatchBatch]:
        return watch_batches(self.lw, self._tweaked(options))

    def without_managed_fields(self) -> TweakedListerWatcher | None:
        """The same tweak over ``lw.without_managed_fields()`` (None when ``lw`` has no such form: see
        :func:`kinformer.cache.transforms.decoding_transform`)."""
        make = getattr(self.lw, "without_managed_fields", None)
        inner = make() if make is not None else None
        return None if inner is None else TweakedListerWatcher(inner, self.tweak)
