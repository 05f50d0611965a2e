"""The reflector: keeps a DeltaFIFO in step with a ListerWatcher, the way client-go's reflector.go does.

resourceVersion state machine (invariants):

* The first list asks for resourceVersion "0" with ``limit=page_size`` and follows continue tokens; a later
  relist asks for the last synced RV without a limit (unless the server paginated the first "0" list), and
  for "" (a consistent read) once the server said the last RV is unavailable (410 Expired or "too large") or
  refused it as a bad request (400; client-go falls back only on the first two). An expired continue token
  falls back to one full list at the requested RV.
* Only sane resourceVersions (:mod:`kinformer.cache.resource_version`) are ever stored and sent back: a
  watch event or bookmark with any other is ignored and logged; a list with one fails (back off, relist).
  An event whose RV is below the last one is logged (and followed).
* Every list ends in ``store.replace(items, rv)``; the watch then starts from that RV with bookmarks allowed
  and ``timeoutSeconds`` uniform in [min_watch_timeout, 2 * min_watch_timeout).
* Each processed event (bookmarks included) advances :attr:`Reflector.last_sync_resource_version`; a
  bookmark changes nothing else.
* A watch that ends cleanly is reopened from the last RV at once, without a relist; one that ended within
  1 s without delivering anything counts as a failure (back off, then re-watch). A stream that breaks
  half-way is re-watched from the last RV (nothing is lost or repeated: the RV is the resume point).
* Expired / too-large-RV (on opening a watch or as an ERROR event) forces a relist; other ERROR events,
  429 and transport errors when opening a watch back off and re-watch without a relist; other API errors
  when opening a watch back off and relist (as client-go); list failures back off and relist.
* With ``watch_idle_timeout``, a watch that delivers nothing (no event, no bookmark) for that many clock
  seconds is closed and reopened from the last RV without a relist (:mod:`kinformer.cache.watchdog`).
  Staleness (:meth:`Reflector.seconds_since_last_event`) counts from the last list, event or bookmark
  received, across any number of such reopens.
* Every wait goes through :class:`Backoff` (0.8 s x 2^n with jitter 1.0, the base capped at 30 s, reset
  after 2 minutes without a failure); like client-go's BackoffUntil, a relist is also preceded by one.
"""

from __future__ import annotations

import asyncio
import enum
import gc
import logging
import random
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from kinformer.cache.backoff import Backoff
from kinformer.cache.delta_fifo import DeltaType
from kinformer.cache.resource_version import is_sane_resource_version
from kinformer.cache.transforms import Transform, decoding_transform, for_class
from kinformer.cache.watchdog import IdleWatchdog, WatchIdle
from kinformer.clock import REAL_CLOCK, Clock
from kinformer.errors import (
    APIError,
    BadRequest,
    TooManyRequests,
    from_status,
    is_expired,
    is_too_large_resource_version,
)
from kinformer.listwatch import (
    ADDED,
    BOOKMARK,
    DELETED,
    ERROR,
    INITIAL_EVENTS_END_ANNOTATION,
    MODIFIED,
    ListerWatcher,
    ListOptions,
    WatchBatch,
    WatchEvent,
    batches_of_one,
    watch_batches,
)
from kinformer.meta import fast_getters

__all__ = ["Backoff", "DeltaStore", "Reflector", "ReflectorStats", "WatchErrorHandler", "WatchOutcome"]

log = logging.getLogger(__name__)

WatchErrorHandler = Callable[["Reflector", BaseException], None]



class WatchOutcome(enum.IntEnum):
    """What the reflector does after one watch ends."""

    REWATCH = 0
    """Reopen the watch from the last RV at once."""
    BACKOFF_REWATCH = 1
    """Back off, then reopen the watch from the last RV."""
    RELIST = 2
    """Back off, then list again (a Replace) and watch from the list's RV."""


_REWATCH, _BACKOFF_REWATCH, _RELIST = WatchOutcome.REWATCH, WatchOutcome.BACKOFF_REWATCH, WatchOutcome.RELIST

_SHORT_WATCH = 1.0

_ADDED, _UPDATED, _DELETED = DeltaType.ADDED, DeltaType.UPDATED, DeltaType.DELETED


class _NoClass:
    """The class of no object: what the reflector's choice by class starts from."""


#: (class, its fast resourceVersion getter, the transform for it, the transform it was chosen for)
_ByClass = tuple[type, Callable[[Any], "str | None"] | None, Transform | None, Transform | None]


class DeltaStore(Protocol):
    """What the reflector needs from its store (a DeltaFIFO).

    A store may also offer ``add_watch_deltas(deltas)``: the deltas ``(DeltaType, object)`` of one watch batch
    (Added, Updated or Deleted) applied in order as the calls above would apply them one by one, returning
    ``(type, exception)`` for each delta it rejected (the rest applied regardless); the reflector prefers it.
    """

    def add(self, obj: Any) -> None: ...
    def update(self, obj: Any) -> None: ...
    def delete(self, obj: Any) -> None: ...
    def replace(self, objs: list[Any], resource_version: str) -> None: ...
    def resync(self) -> None: ...


@dataclass(slots=True)
class ReflectorStats:
    """Counters (plain ints) for metrics and the CLI."""

    lists: int = 0
    relists: int = 0
    list_errors: int = 0
    watches: int = 0
    watch_restarts: int = 0
    watch_errors: int = 0
    added: int = 0
    modified: int = 0
    deleted: int = 0
    bookmarks: int = 0
    error_events: int = 0
    resyncs: int = 0
    store_errors: int = 0
    bad_resource_versions: int = 0
    resource_version_regressions: int = 0
    idle_watch_restarts: int = 0

    @property
    def events(self) -> dict[str, int]:
        """Watch events processed, by type."""
        return {ADDED: self.added, MODIFIED: self.modified, DELETED: self.deleted, BOOKMARK: self.bookmarks,
                ERROR: self.error_events}

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def default_watch_error_handler(reflector: Reflector, exc: BaseException) -> None:
    """Log a list/watch failure (Expired at INFO: it is routine; the rest at WARNING)."""
    level = logging.INFO if is_expired(exc) else logging.WARNING
    log.log(level, "%s: list/watch failed: %s: %s", reflector.name or "reflector", type(exc).__name__, exc)


def _resource_version(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return meta.get("resourceVersion") or ""


class _WatchListIncomplete(ConnectionError):
    """A streaming list ended before its initial-events-end bookmark."""


class Reflector:
    """Lists then watches ``lw`` into ``store`` (a DeltaFIFO) until :meth:`stop` or cancellation.

    ``should_resync``, if given, is asked before every periodic ``store.resync()`` (the informer uses it to
    pick the handlers whose resync period is due). ``transform`` is applied to every listed or watched object
    before it reaches the store (the default one by ``lw`` itself while decoding, where it can:
    :func:`~kinformer.cache.transforms.decoding_transform`; ``self.lw`` and ``self.transform`` are that pair).
    ``rng`` drives jitter and watch timeouts (pass a seeded one in tests).
    ``gc_freeze`` calls ``gc.freeze()`` after each list page (see the informer's option of that name).
    """

    def __init__(self, lw: ListerWatcher, store: DeltaStore, *, name: str = "", resync_period: float = 0.0,
                 clock: Clock = REAL_CLOCK, page_size: int = 500, watch_error_handler: WatchErrorHandler | None = None,
                 use_streaming_list: bool = False, rng: random.Random | None = None,
                 should_resync: Callable[[], bool] | None = None, transform: Transform | None = None,
                 min_watch_timeout: float = 300.0, backoff: Backoff | None = None,
                 watch_idle_timeout: float | None = None, gc_freeze: bool = False) -> None:
        self.lw, self.transform = decoding_transform(lw, transform)
        self.store = store
        self.name = name
        self.resync_period = resync_period
        self.clock = clock
        self.page_size = page_size
        self.watch_error_handler: WatchErrorHandler = watch_error_handler or default_watch_error_handler
        self.use_streaming_list = use_streaming_list
        self.should_resync = should_resync
        self.min_watch_timeout = min_watch_timeout
        self.watch_idle_timeout = watch_idle_timeout
        self.gc_freeze = gc_freeze
        self._last_event_at = 0.0
        self._by_class: _ByClass = (_NoClass, None, None, None)  # _deltas_of's choice for the last class seen
        self._rng = rng or random.Random()
        self.backoff = backoff or Backoff(clock=clock, rng=self._rng)
        self.stats = ReflectorStats()
        self._last_rv = ""
        self._rv_unavailable = False
        self._paginated_result = False
        self._listed = False
        self._task: asyncio.Task[Any] | None = None
        self._resync_task: asyncio.Task[None] | None = None
        self._tg: asyncio.TaskGroup | None = None
        self._stopping = False

    # ------------------------------------------------------------------ public state

    @property
    def last_sync_resource_version(self) -> str:
        """The RV of the last list or processed event ("" before the first list)."""
        return self._last_rv

    @property
    def is_last_sync_resource_version_unavailable(self) -> bool:
        """True after the server answered a list at the last RV with Expired / too large (next list: RV "")."""
        return self._rv_unavailable

    @property
    def has_listed(self) -> bool:
        return self._listed

    @property
    def last_event_at(self) -> float:
        """Clock time of the last list or watch event (bookmarks included) received; 0.0 before the first list.
        Opening or reopening a watch does not move it."""
        return self._last_event_at

    def seconds_since_last_event(self) -> float | None:
        """How stale the cache may be: clock seconds since the last list or watch event (None before the
        first list)."""
        if not self._listed:
            return None
        return max(0.0, self.clock.now() - self._last_event_at)

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """List and watch until :meth:`stop` is called (then return) or the task is cancelled (then raise)."""
        if self._task is not None and not self._task.done():
            raise RuntimeError("reflector is already running")
        self._task = asyncio.current_task()
        if self._stopping:  # stop() came before run() started
            self._stopping = False
            return
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                try:
                    await self._run_loop()
                finally:
                    if self._resync_task is not None:
                        self._resync_task.cancel()
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        finally:
            self._stopping = False
            self._tg = None
            self._resync_task = None

    def stop(self) -> None:
        """Ask :meth:`run` to return (idempotent)."""
        self._stopping = True
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def _run_loop(self) -> None:
        need_list = True
        open_watch: AsyncIterator[WatchEvent] | None = None
        while True:
            if need_list:
                try:
                    open_watch = await self._sync()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.stats.list_errors += 1
                    self._report(exc)
                    await self.backoff.wait()
                    continue
                need_list = False
                self._start_resync()
            try:
                outcome = await self._watch(open_watch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # Last line of defence: an unexpected failure while watching must never leave the reflector
                # dead behind an informer that looks healthy. Report it and start over with a relist.
                log.exception("%s: unexpected error while watching; relisting", self.name)
                self.stats.watch_errors += 1
                self._report(exc)
                outcome = _RELIST
            open_watch = None
            if outcome == _RELIST:
                need_list = True
                await self.backoff.wait()
                continue
            self.stats.watch_restarts += 1
            if outcome == _BACKOFF_REWATCH:
                await self.backoff.wait()

    def _report(self, exc: BaseException) -> None:
        try:
            self.watch_error_handler(self, exc)
        except Exception:
            log.exception("%s: watch error handler failed", self.name)

    # ------------------------------------------------------------------ resync

    def update_resync_period(self, period: float) -> None:
        """Change the resync period; starts the resync loop if it was off and the first list is done."""
        self.resync_period = period
        if self._listed and self._task is not None and not self._task.done():
            self._start_resync()

    def _start_resync(self) -> None:
        if self._resync_task is None and self.resync_period > 0 and self._tg is not None:
            self._resync_task = self._tg.create_task(self._resync_loop(), name=f"resync-{self.name}")

    async def _resync_loop(self) -> None:
        while True:
            await self.clock.sleep(self.resync_period)
            try:
                if self.should_resync is None or self.should_resync():
                    self.stats.resyncs += 1
                    self.store.resync()
            except Exception:
                log.exception("%s: resync failed", self.name)

    # ------------------------------------------------------------------ list

    def _relist_resource_version(self) -> str:
        if self._rv_unavailable:
            return ""
        return self._last_rv or "0"

    async def _sync(self) -> AsyncIterator[WatchEvent] | None:
        """One list (or streaming list). Returns the open watch of a streaming list, to be continued."""
        self.stats.lists += 1
        if self._listed:
            self.stats.relists += 1
        if self.use_streaming_list:
            try:
                return await self._streaming_list()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if is_expired(exc) or is_too_large_resource_version(exc):
                    self._rv_unavailable = True
                log.warning("%s: streaming list failed (%s: %s); falling back to list", self.name,
                            type(exc).__name__, exc)
        await self._list()
        return None

    async def _list(self) -> None:
        rv = self._relist_resource_version()
        try:
            items, list_rv = await self._list_at(rv)
        except APIError as exc:
            refused = isinstance(exc, BadRequest) and rv != ""
            if not (refused or is_expired(exc) or is_too_large_resource_version(exc)):
                raise
            if refused:
                log.warning("%s: the server refused a list at resourceVersion %r (%s); listing at the latest "
                            "version instead", self.name, rv, exc)
            self._rv_unavailable = True
            items, list_rv = await self._list_at("")
        self._rv_unavailable = False
        self._replace(items, list_rv)

    async def _list_at(self, rv: str) -> tuple[list[Any], str]:
        paginate = rv in ("", "0") or self._paginated_result
        limit = self.page_size if paginate and self.page_size > 0 else None
        options = ListOptions(resource_version=rv, limit=limit)
        items: list[Any] = []
        while True:
            try:
                result = await self.lw.list(options)
            except APIError as exc:
                if not (is_expired(exc) and options.continue_):
                    raise
                result = await self.lw.list(ListOptions(resource_version=rv))
                return self._transformed(result.items), result.resource_version
            # each page is transformed as it comes, so its body (which untransformed objects may still
            # reference) and its transient objects are freed before the next page: peak memory stays ~one page
            items.extend(self._transformed(result.items))
            if self.gc_freeze:
                gc.freeze()  # a long list's objects stay out of the cyclic collector's full collections
            if not result.continue_:
                return items, result.resource_version
            if rv == "0":
                self._paginated_result = True
            options = ListOptions(limit=limit, continue_=result.continue_)

    def _transformed(self, objs: Any) -> list[Any]:
        transform = self.transform
        return list(objs) if transform is None else [transform(obj) for obj in objs]

    def _replace(self, items: list[Any], rv: str) -> None:
        """Replace the store with ``items`` (already transformed) listed at ``rv``."""
        if rv and not is_sane_resource_version(rv):
            self.stats.bad_resource_versions += 1
            raise ValueError(f"the server's list has no usable resourceVersion: {rv[:40]!r}")
        self.store.replace(items, rv)
        self._last_rv = rv
        self._listed = True
        self._last_event_at = self.clock.now()

    async def _streaming_list(self) -> AsyncIterator[WatchEvent]:
        """Watch with sendInitialEvents until the initial-events-end bookmark; replace; return the watch."""
        rv = "" if self._rv_unavailable else self._last_rv
        options = ListOptions(resource_version=rv, resource_version_match="NotOlderThan", send_initial_events=True,
                              allow_watch_bookmarks=True, timeout_seconds=self._watch_timeout())
        self.stats.watches += 1
        watch = aiter(self.lw.watch(options))
        collected: dict[str, Any] = {}
        try:
            while True:
                try:
                    event = await anext(watch)
                except StopAsyncIteration:
                    raise _WatchListIncomplete("watch ended before the initial events were complete") from None
                obj = event.object
                if event.type == ERROR:
                    self.stats.error_events += 1
                    raise from_status(obj)
                if event.type == BOOKMARK:
                    self.stats.bookmarks += 1
                    meta = obj.get("metadata") or {}
                    if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END_ANNOTATION) == "true":
                        bookmark_rv = _resource_version(obj)
                        break
                    continue
                key = _key(obj)
                if event.type == DELETED:
                    collected.pop(key, None)
                else:
                    collected[key] = obj if self.transform is None else self.transform(obj)
        except BaseException:
            await _aclose(watch)
            raise
        self._rv_unavailable = False
        self._replace(list(collected.values()), bookmark_rv)
        return watch

    # ------------------------------------------------------------------ watch

    def _watch_timeout(self) -> int:
        return int(self.min_watch_timeout * (self._rng.random() + 1.0))

    async def _watch(self, events: AsyncIterator[WatchEvent] | None) -> WatchOutcome:
        """Consume one watch (opening it unless a streaming list's open one is given); returns what to do
        next."""
        started = events is not None
        watch: AsyncIterator[WatchBatch]
        if events is not None:
            watch = batches_of_one(events)
        else:
            options = ListOptions(resource_version=self._last_rv, timeout_seconds=self._watch_timeout(),
                                  allow_watch_bookmarks=True)
            self.stats.watches += 1
            try:
                watch = aiter(watch_batches(self.lw, options))
            except Exception as exc:
                return self._watch_open_failed(exc)
        start = self.clock.now()
        idle = self.watch_idle_timeout
        try:
            if not idle:
                return await self._consume(watch, started, start)
            # the watchdog counts idle time from the reopen; the staleness (_last_event_at) does not move: a
            # reopened watch that delivers nothing is no news
            try:
                async with IdleWatchdog(self.clock, idle, lambda: self._last_event_at):
                    return await self._consume(watch, started, start)
            except WatchIdle:
                self.stats.idle_watch_restarts += 1
                log.warning("%s: the watch delivered nothing (no event, no bookmark) for %gs; reopening it from "
                            "resourceVersion %s", self.name, idle, self._last_rv)
                return _REWATCH
        finally:
            await _aclose(watch)
            if events is not None:
                await _aclose(events)  # in case the batches never started (then closing them closes nothing)

    async def _consume(self, watch: AsyncIterator[WatchBatch], started: bool, start: float) -> WatchOutcome:
        """Apply the watch's events to the store until it ends; returns what to do next.

        Events come in batches (what one read delivered): one await and one clock reading (the staleness
        mark) per batch; the batch's events become deltas (:meth:`_deltas_of`) handed to the store in one call
        when it has ``add_watch_deltas`` (a RealFIFO), else one call each (:meth:`_store_each`). A delta the
        store rejects is logged, counted and skipped. An ERROR event ends the watch after the events before it
        were applied.
        """
        stats = self.stats
        now = self.clock.now
        deltas_of = self._deltas_of
        add_all = getattr(self.store, "add_watch_deltas", None)  # a RealFIFO's: the batch in one call
        count = 0
        while True:
            try:
                batch = await anext(watch)
            except StopAsyncIteration:
                break
            except Exception as exc:
                if count == 0 and not started:
                    return self._watch_open_failed(exc)
                stats.watch_errors += 1
                self._report(exc)
                if count == 0 and now() - start < _SHORT_WATCH:
                    return _BACKOFF_REWATCH
                return _REWATCH
            count += len(batch)
            self._last_event_at = now()
            deltas, error = deltas_of(batch)
            if deltas:
                if add_all is None:
                    self._store_each(deltas)
                else:
                    for kind, failure in add_all(deltas):  # what the store rejected (mostly nothing)
                        self._store_failed(kind, failure)
            if error is not None:
                stats.error_events += 1
                return self._error_event(error)
        if count == 0 and now() - start < _SHORT_WATCH:
            stats.watch_errors += 1
            self._report(ConnectionError("very short watch: the watch ended within 1s without any event"))
            return _BACKOFF_REWATCH
        return _REWATCH

    def _deltas_of(self, batch: WatchBatch) -> tuple[list[tuple[DeltaType, Any]], Any]:
        """The store deltas ``(type, transformed object)`` of ``batch``'s events in order, and the object of its
        first ERROR event (None if none): the events after an ERROR are not looked at.

        Per event, as it is taken: an event whose resourceVersion is not a sane one is ignored (logged,
        counted), so it can never become the resume point; one whose RV is below the last is logged and
        followed (the server's word wins); an object the transform rejects is logged, counted as a store
        error and skipped (its RV is not taken). Every other event, bookmarks included, advances
        :attr:`last_sync_resource_version` (as client-go, whether or not the store then accepts its delta).
        """
        sane = is_sane_resource_version
        deltas: list[tuple[DeltaType, Any]] = []
        append = deltas.append
        cls, fast_rv, transform, given = self._by_class
        if given is not self.transform:  # the transform was replaced since: choose again
            cls = _NoClass
        last = self._last_rv  # "" or sane; written back after the loop and before anything that reads it
        error = None
        modified = deleted = 0
        for event in batch:
            kind = event.type
            obj = event.object
            if kind == ERROR:
                error = obj
                break
            if obj.__class__ is not cls:  # the RV getter and the transform, chosen once per run of one class
                cls, fast_rv, transform, given = self._by_class = self._choose_by_class(obj.__class__)
            rv = fast_rv(obj) if fast_rv is not None else None
            if rv is None:
                rv = _resource_version(obj) if isinstance(obj, Mapping) else ""
            behind = False
            if rv:
                if len(rv) == len(last) < 20 and last < rv and rv.isdigit() and rv.isascii():
                    pass  # the common case in one test: under 20 digits, ahead of the last (sane) RV: sane
                # else 1 to 19 digits without a leading zero are sane without the full check's call
                elif (len(rv) < 20 and rv.isdigit() and rv.isascii() and rv[0] != "0") or sane(rv):
                    size, last_size = len(rv), len(last)
                    behind = size < last_size or (size == last_size and rv < last)
                else:
                    self._last_rv = last
                    self._bad_resource_version(kind, rv)
                    continue
            if kind == MODIFIED or kind == ADDED or kind == DELETED:
                try:
                    if transform is not None:
                        obj = transform(obj)
                except Exception:
                    # As client-go: one object the transform rejects is logged and skipped, and the watch
                    # goes on instead of the reflector dying silently.
                    self.stats.store_errors += 1
                    log.exception("%s: unable to apply %s watch event", self.name, kind)
                    continue
                if kind == MODIFIED:
                    append((_UPDATED, obj))
                    modified += 1
                elif kind == ADDED:
                    append((_ADDED, obj))
                else:
                    append((_DELETED, obj))
                    deleted += 1
            elif kind == BOOKMARK:
                self.stats.bookmarks += 1
            else:
                log.warning("%s: ignoring watch event of unknown type %r", self.name, kind)
                continue
            if rv:
                if behind:
                    self._last_rv = last
                    self._resource_version_went_back(kind, rv)
                last = rv
        self._last_rv = last
        stats = self.stats  # counted per batch: the added ones are what is left of the deltas
        stats.modified += modified
        stats.deleted += deleted
        stats.added += len(deltas) - modified - deleted
        return deltas, error

    def _store_each(self, deltas: list[tuple[DeltaType, Any]]) -> None:
        """Hand ``deltas`` to a store without ``add_watch_deltas``: one ``add``/``update``/``delete`` call each."""
        store = self.store
        for kind, obj in deltas:
            try:
                if kind is _UPDATED:
                    store.update(obj)
                elif kind is _ADDED:
                    store.add(obj)
                else:
                    store.delete(obj)
            except Exception as exc:
                self._store_failed(kind, exc)

    def _store_failed(self, kind: DeltaType, exc: Exception) -> None:
        self.stats.store_errors += 1
        log.error("%s: unable to apply an %s watch delta", self.name, kind, exc_info=exc)

    def _choose_by_class(self, cls: type) -> _ByClass:
        """For watched objects of ``cls``: its fast resourceVersion getter and :attr:`transform` as it applies
        to it (:func:`~kinformer.cache.transforms.for_class`), with that transform."""
        transform = self.transform
        return cls, fast_getters(cls)[2], None if transform is None else for_class(transform, cls), transform

    def _bad_resource_version(self, kind: str, rv: str) -> None:
        self.stats.bad_resource_versions += 1
        log.warning("%s: ignoring a %s watch event with an invalid resourceVersion %r (keeping %r)", self.name,
                    kind, rv[:40], self._last_rv)

    def _resource_version_went_back(self, kind: str, rv: str) -> None:
        self.stats.resource_version_regressions += 1
        log.warning("%s: a %s watch event went back in resourceVersion from %s to %s", self.name, kind,
                    self._last_rv, rv)

    def _error_event(self, status: Mapping[str, Any]) -> WatchOutcome:
        exc = from_status(status)
        self.stats.watch_errors += 1
        self._report(exc)
        if is_expired(exc) or is_too_large_resource_version(exc):
            return _RELIST
        return _BACKOFF_REWATCH

    def _watch_open_failed(self, exc: Exception) -> WatchOutcome:
        self.stats.watch_errors += 1
        self._report(exc)
        if is_expired(exc) or is_too_large_resource_version(exc):
            return _RELIST
        if isinstance(exc, TooManyRequests) or not isinstance(exc, APIError):
            return _BACKOFF_REWATCH
        return _RELIST


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name', '')}" if ns else meta.get("name", "")


async def _aclose(watch: AsyncIterator[Any]) -> None:
    aclose = getattr(watch, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:
        log.debug("closing a watch failed", exc_info=True)
