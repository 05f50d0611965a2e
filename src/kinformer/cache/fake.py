"""An in-memory object source with real resourceVersion semantics, for tests of anything built on informers.

:class:`FakeSource` keeps objects of one resource, a global monotonic resourceVersion (every write gets the
next integer, written into ``metadata.resourceVersion``), and a history of changes that watches replay.
It implements the :class:`~kinformer.listwatch.ListerWatcher` contract, and
:meth:`FakeSource.lister_watcher` / :class:`FakeClient` offer the same ``lister_watcher(...)`` method as
:class:`kinformer.Client`, so a ``SharedInformerFactory`` can run against it.

Semantics (those of an API server without a watch cache unless ``watch_cache=True``):

* ``list``: resourceVersion unset/"" -> the current state; "0" -> the current state (``limit`` ignored when
  ``watch_cache``); "N" -> not older than N (the state at N when ``limit`` is set or the match is "Exact").
  Older than the compaction point -> :class:`~kinformer.errors.Expired`; ahead of the source ->
  :class:`~kinformer.errors.ServerTimeout` with cause ``ResourceVersionTooLarge``. Items are sorted by key;
  ``limit``/``continue`` paginate a consistent snapshot; an expired continue token gives ``Expired``.
* ``watch``: RV unset/"0" -> synthetic ADDED for every current object, then changes; "N" -> every change
  after N, or an ERROR event (410 Expired) when N is older than the compaction point. ``send_initial_events``
  sends the current state as ADDED then a BOOKMARK annotated ``k8s.io/initial-events-end``. Bookmarks are sent
  when asked for with :meth:`FakeSource.bookmark` and the watch allows them, after the changes already made
  and at the resourceVersion the watch has reached then (never below an event it sent, as the server's).
  Label/field selectors turn updates that enter or leave the selection into ADDED/DELETED, as the server does.
  ``timeoutSeconds`` is ignored: a test ends watches with :meth:`close_watches` (clean end) or
  :meth:`break_watches` (ConnectionError).
* Deterministic: no real sleeps, no randomness; uids are ``uid-<n>``.

Objects handed in are deep-copied; objects handed out by ``get`` are deep copies; objects in list results and
watch events are the stored objects and must not be mutated (the informer cache's read-only contract).
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import builtins
import copy
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kinformer import errors
from kinformer.listwatch import (
    ADDED,
    BOOKMARK,
    DELETED,
    ERROR,
    INITIAL_EVENTS_END_ANNOTATION,
    MODIFIED,
    ListOptions,
    ListResult,
    WatchEvent,
)
from kinformer.meta import meta_namespace_key, object_key
from kinformer.selectors import object_fields, parse_field_selector, parse_label_selector

__all__ = ["FakeClient", "FakeListerWatcher", "FakeSource"]

Obj = dict[str, Any]
Matcher = Callable[[Mapping[str, Any]], bool]


def _lookup(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return ""
        cur = cur[part]
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return "" if cur is None else str(cur)


def compile_matcher(namespace: str | None, label_selector: str | None, field_selector: str | None) -> Matcher | None:
    """A predicate for namespace + selectors, or None when everything matches."""
    labels = parse_label_selector(label_selector) if label_selector else None
    if labels is not None and labels.empty():
        labels = None
    fields = parse_field_selector(field_selector) if field_selector else None
    if fields is not None and fields.empty():
        fields = None
    if not namespace and labels is None and fields is None:
        return None
    paths = [r.field for r in fields.requirements] if fields is not None else []

    def match(obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if namespace and meta.get("namespace") != namespace:
            return False
        if labels is not None and not labels.matches(meta.get("labels") or {}):
            return False
        if fields is not None:
            values = object_fields(obj)
            for path in paths:
                if path not in values:
                    values[path] = _lookup(obj, path)
            return fields.matches(values)
        return True

    return match


def _status(code: int, reason: str, message: str, causes: list[dict[str, str]] | None = None) -> Obj:
    status: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": message, "reason": reason, "code": code}
    if causes:
        status["details"] = {"causes": causes}
    return status


@dataclass(slots=True)
class _Entry:
    rv: int
    type: str
    obj: Obj
    old: Obj | None


_CURRENT = object()  # a bookmark at the source's resourceVersion when the watch sends it


class _Watch:
    __slots__ = ("bookmark", "broken", "closed", "wake")

    def __init__(self) -> None:
        self.wake = asyncio.Event()
        self.closed = False
        self.broken = False
        self.bookmark: str | object | None = None  # the RV of a BOOKMARK to send next, or _CURRENT


class FakeSource:
    """In-memory objects of one resource with a resourceVersion history (see the module docstring)."""

    def __init__(self, *, kind: str = "ConfigMap", api_version: str = "v1", watch_cache: bool = False) -> None:
        self.kind = kind
        self.api_version = api_version
        self.watch_cache = watch_cache
        self._objects: dict[str, Obj] = {}
        self._rv = 0
        self._uid = 0
        self._compacted = 0
        self._base: dict[str, Obj] = {}  # state at the compaction point
        self._log: list[_Entry] = []
        self._log_rvs: list[int] = []
        self._log_start = 0  # absolute index of _log[0]
        self._watches: set[_Watch] = set()
        self._list_failures: deque[BaseException] = deque()
        self._watch_failures: deque[BaseException] = deque()
        #: Every options object passed to list / watch, in order (for assertions).
        self.list_requests: list[ListOptions] = []
        self.watch_requests: list[ListOptions] = []

    # ------------------------------------------------------------------ state

    @property
    def resource_version(self) -> str:
        """The resourceVersion of the last write ("0" before any)."""
        return str(self._rv)

    @property
    def compacted_resource_version(self) -> int:
        return self._compacted

    @property
    def open_watches(self) -> int:
        """Number of watches currently being served."""
        return len(self._watches)

    def get(self, name: str, namespace: str | None = None) -> Obj:
        """A deep copy of the stored object; NotFound if absent."""
        obj = self._objects.get(object_key(namespace, name))
        if obj is None:
            raise errors.NotFound(f'{self.kind} "{name}" not found')
        return copy.deepcopy(obj)

    def keys(self) -> list[str]:
        return sorted(self._objects)

    def items(self) -> dict[str, Obj]:
        """The current objects by key (stored objects: read-only)."""
        return dict(self._objects)

    def __len__(self) -> int:
        return len(self._objects)

    # ------------------------------------------------------------------ writes

    def _stamp(self, obj: Mapping[str, Any]) -> tuple[str, Obj]:
        new = copy.deepcopy(dict(obj))
        new.setdefault("kind", self.kind)
        new.setdefault("apiVersion", self.api_version)
        meta = new.setdefault("metadata", {})
        if not meta.get("name"):
            raise errors.Invalid("metadata.name: Required value")
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        return meta_namespace_key(new), new

    def _record(self, type_: str, obj: Obj, old: Obj | None) -> None:
        self._log.append(_Entry(self._rv, type_, obj, old))
        self._log_rvs.append(self._rv)
        for w in self._watches:
            w.wake.set()

    def create(self, obj: Mapping[str, Any]) -> Obj:
        """Store a new object; AlreadyExists if its key is taken. Returns a copy of what was stored."""
        key = meta_namespace_key(obj)
        if key in self._objects:
            raise errors.AlreadyExists(f'{self.kind} "{key}" already exists')
        key, new = self._stamp(obj)
        meta = new["metadata"]
        if not meta.get("uid"):
            self._uid += 1
            meta["uid"] = f"uid-{self._uid}"
        self._objects[key] = new
        self._record(ADDED, new, None)
        return copy.deepcopy(new)

    def update(self, obj: Mapping[str, Any]) -> Obj:
        """Replace a stored object; NotFound if absent, Conflict if ``metadata.resourceVersion`` is set
        and stale. Returns a copy of what was stored."""
        key = meta_namespace_key(obj)
        old = self._objects.get(key)
        if old is None:
            raise errors.NotFound(f'{self.kind} "{key}" not found')
        given = (obj.get("metadata") or {}).get("resourceVersion")
        if given and given != old["metadata"]["resourceVersion"]:
            raise errors.Conflict(f'Operation cannot be fulfilled on {self.kind} "{key}": the object has been '
                                  "modified; please apply your changes to the latest version and try again")
        key, new = self._stamp(obj)
        new["metadata"].setdefault("uid", old["metadata"].get("uid"))
        self._objects[key] = new
        self._record(MODIFIED, new, old)
        return copy.deepcopy(new)

    def put(self, obj: Mapping[str, Any]) -> Obj:
        """Create or unconditionally update (any resourceVersion in ``obj`` is ignored)."""
        if meta_namespace_key(obj) not in self._objects:
            return self.create(obj)
        obj = dict(obj)
        obj["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
        return self.update(obj)

    def delete(self, name: str, namespace: str | None = None) -> Obj:
        """Remove an object; NotFound if absent. The DELETED event carries the deletion's resourceVersion."""
        key = object_key(namespace, name)
        old = self._objects.pop(key, None)
        if old is None:
            raise errors.NotFound(f'{self.kind} "{name}" not found')
        self._rv += 1
        gone = dict(old)
        gone["metadata"] = {**old["metadata"], "resourceVersion": str(self._rv)}
        self._record(DELETED, gone, old)
        return copy.deepcopy(gone)

    def compact(self, rv: int | str | None = None) -> None:
        """Forget history up to ``rv`` (default: now). Lists and watches from an older RV, continue tokens from
        an older snapshot and open watches that have not yet read past ``rv`` fail with 410 Expired."""
        target = self._rv if rv is None else min(int(rv), self._rv)
        if target <= self._compacted:
            return
        cut = bisect.bisect_right(self._log_rvs, target)
        for entry in self._log[:cut]:
            _apply(self._base, entry)
        del self._log[:cut]
        del self._log_rvs[:cut]
        self._log_start += cut
        self._compacted = target
        for w in self._watches:
            w.wake.set()

    # ------------------------------------------------------------------ fault injection

    def fail_next_list(self, exc: BaseException) -> None:
        """The next list call raises ``exc`` (queued: call several times for several failures)."""
        self._list_failures.append(exc)

    def fail_next_watch(self, exc: BaseException) -> None:
        """The next watch raises ``exc`` on its first ``__anext__``."""
        self._watch_failures.append(exc)

    def close_watches(self) -> None:
        """End every open watch cleanly (as a server-side timeout does)."""
        for w in self._watches:
            w.closed = True
            w.wake.set()

    def break_watches(self) -> None:
        """Make every open watch raise ConnectionError at its next step."""
        for w in self._watches:
            w.broken = True
            w.wake.set()

    def bookmark(self, resource_version: str | None = None) -> None:
        """Send a BOOKMARK to every watch that allows bookmarks, once it has sent the changes made so far: at the
        resourceVersion it has reached then (default), or at ``resource_version`` (any text, to play a broken
        server)."""
        for w in self._watches:
            w.bookmark = _CURRENT if resource_version is None else resource_version
            w.wake.set()

    # ------------------------------------------------------------------ ListerWatcher

    def lister_watcher(self, resource: str = "", *, namespace: str | None = None, label_selector: str | None = None,
                       field_selector: str | None = None) -> FakeListerWatcher:
        """A ListerWatcher over this source scoped to a namespace and selectors (``resource`` is ignored)."""
        return FakeListerWatcher(self, namespace=namespace, label_selector=label_selector,
                                 field_selector=field_selector)

    async def list(self, options: ListOptions) -> ListResult:
        return self._list(options, None)

    def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
        return self._watch(options, None)

    def _state_at(self, rv: int) -> dict[str, Obj]:
        if rv >= self._rv:
            return self._objects
        state = dict(self._base)
        for entry in self._log[: bisect.bisect_right(self._log_rvs, rv)]:
            _apply(state, entry)
        return state

    def _check_rv(self, rv: int) -> None:
        if rv > self._rv:
            raise errors.ServerTimeout(
                f"Too large resource version: {rv}, current: {self._rv}",
                status=_status(504, "Timeout", f"Too large resource version: {rv}, current: {self._rv}",
                               [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]))
        if rv < self._compacted:
            raise errors.Expired(f"too old resource version: {rv} ({self._compacted})",
                                 status=_status(410, "Expired", f"too old resource version: {rv} ({self._compacted})"))

    def _list(self, options: ListOptions, namespace: str | None) -> ListResult:
        self.list_requests.append(replace(options))
        if self._list_failures:
            raise self._list_failures.popleft()
        matcher = compile_matcher(namespace, options.label_selector, options.field_selector)
        limit = options.limit or 0
        start_after = ""
        if options.continue_:
            snap_rv, start_after = _decode_continue(options.continue_)
            if snap_rv < self._compacted:
                raise errors.Expired("The provided continue parameter is too old to display a consistent list "
                                     "result. You can start a new list without the continue parameter.",
                                     status=_status(410, "Expired", "continue token expired"))
        else:
            rv_text = options.resource_version
            if rv_text in (None, "", "0"):
                snap_rv = self._rv
                if rv_text == "0" and self.watch_cache:
                    limit = 0
            else:
                requested = _parse_rv(rv_text)
                self._check_rv(requested)
                exact = options.resource_version_match == "Exact" or (limit and not self.watch_cache)
                snap_rv = requested if exact else self._rv
        state = self._state_at(snap_rv)
        keys = sorted(state)
        if start_after:
            keys = keys[bisect.bisect_right(keys, start_after):]
        items: list[Mapping[str, Any]] = []
        it: Iterator[str] = iter(keys)
        last = ""
        for key in it:
            obj = state[key]
            if matcher is None or matcher(obj):
                items.append(obj)
                last = key
                if limit and len(items) >= limit:
                    break
        rest = [k for k in it if matcher is None or matcher(state[k])] if limit else []
        if rest:
            remaining = None if (options.label_selector or options.field_selector) else len(rest)
            return ListResult(items, str(snap_rv), _encode_continue(snap_rv, last), remaining)
        return ListResult(items, str(snap_rv))

    def _watch(self, options: ListOptions, namespace: str | None) -> AsyncIterator[WatchEvent]:
        """Fix the watch's starting point now (at the call); events are served when iterated."""
        self.watch_requests.append(replace(options))
        failure = self._watch_failures.popleft() if self._watch_failures else None
        matcher = compile_matcher(namespace, options.label_selector, options.field_selector)
        rv_text = options.resource_version
        error: Obj | None = None
        start = self._rv
        if rv_text not in (None, "", "0"):
            try:
                start = _parse_rv(rv_text)
                self._check_rv(start)
            except errors.APIError as exc:
                error = exc.status
            if options.send_initial_events:
                start = max(start, self._rv)
        initial = error is None and (bool(options.send_initial_events) or rv_text in (None, "", "0"))
        snapshot = [self._objects[k] for k in sorted(self._objects)] if initial else []
        if matcher is not None:
            snapshot = [obj for obj in snapshot if matcher(obj)]
        pos = self._log_start + bisect.bisect_right(self._log_rvs, start)
        end_bookmark = self._bookmark_object(start, end_of_initial=True) if options.send_initial_events else None
        return self._serve(failure, error, snapshot, end_bookmark, pos, matcher, options.allow_watch_bookmarks)

    async def _serve(self, failure: BaseException | None, error: Obj | None, snapshot: builtins.list[Obj],
                     end_bookmark: Obj | None, pos: int, matcher: Matcher | None,
                     bookmarks: bool) -> AsyncIterator[WatchEvent]:
        if failure is not None:
            raise failure
        if error is not None:
            yield WatchEvent(ERROR, error)
            return
        w = _Watch()
        self._watches.add(w)
        try:
            for obj in snapshot:
                yield WatchEvent(ADDED, obj)
            if end_bookmark is not None:
                yield WatchEvent(BOOKMARK, end_bookmark)
            while True:
                if w.broken:
                    raise ConnectionError("watch stream broken (injected)")
                if w.closed:
                    return
                if pos < self._log_start:
                    message = f"too old resource version: {self._compacted} was compacted"
                    yield WatchEvent(ERROR, _status(410, "Expired", message))
                    return
                entries = self._log
                index = pos - self._log_start
                if index < len(entries):
                    entry = entries[index]
                    pos += 1
                    if matcher is None:
                        yield WatchEvent(entry.type, entry.obj)
                    else:
                        event = _translate(entry, matcher)
                        if event is not None:
                            yield event
                    continue
                if w.bookmark is not None:
                    # caught up with the log, which ends at self._rv
                    rv, w.bookmark = str(self._rv) if w.bookmark is _CURRENT else str(w.bookmark), None
                    if bookmarks:
                        yield WatchEvent(BOOKMARK, self._bookmark_object(rv))
                    continue
                w.wake.clear()
                await w.wake.wait()
        finally:
            self._watches.discard(w)

    def _bookmark_object(self, rv: int | str, end_of_initial: bool = False) -> Obj:
        meta: Obj = {"resourceVersion": str(rv)}
        if end_of_initial:
            meta["annotations"] = {INITIAL_EVENTS_END_ANNOTATION: "true"}
        return {"kind": self.kind, "apiVersion": self.api_version, "metadata": meta}


def _translate(entry: _Entry, matcher: Matcher | None) -> WatchEvent | None:
    if matcher is None:
        return WatchEvent(entry.type, entry.obj)
    if entry.type == ADDED:
        return WatchEvent(ADDED, entry.obj) if matcher(entry.obj) else None
    if entry.type == DELETED:
        return WatchEvent(DELETED, entry.obj) if matcher(entry.obj) else None
    was = entry.old is not None and matcher(entry.old)
    now = matcher(entry.obj)
    if was and now:
        return WatchEvent(MODIFIED, entry.obj)
    if now:
        return WatchEvent(ADDED, entry.obj)
    if was:
        return WatchEvent(DELETED, entry.obj)
    return None


def _apply(state: dict[str, Obj], entry: _Entry) -> None:
    key = meta_namespace_key(entry.obj)
    if entry.type == DELETED:
        state.pop(key, None)
    else:
        state[key] = entry.obj


def _parse_rv(text: str | None) -> int:
    try:
        value = int(text or "")
    except ValueError:
        raise errors.BadRequest(f"invalid resource version: {text!r}") from None
    if value < 0:
        raise errors.BadRequest(f"invalid resource version: {text!r}")
    return value


def _encode_continue(rv: int, last_key: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": last_key}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError):
        raise errors.BadRequest("continue key is not valid") from None


class FakeListerWatcher:
    """A :class:`FakeSource` seen through a namespace and label/field selectors (what an informer of one
    namespace or selection lists and watches). Selectors in the request options are combined with these."""

    __slots__ = ("field_selector", "label_selector", "namespace", "source")

    def __init__(self, source: FakeSource, *, namespace: str | None = None, label_selector: str | None = None,
                 field_selector: str | None = None) -> None:
        self.source = source
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector

    def _scoped(self, options: ListOptions) -> ListOptions:
        if not self.label_selector and not self.field_selector:
            return options
        return replace(options,
                       label_selector=_join(self.label_selector, options.label_selector),
                       field_selector=_join(self.field_selector, options.field_selector))

    async def list(self, options: ListOptions) -> ListResult:
        return self.source._list(self._scoped(options), self.namespace)

    def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
        return self.source._watch(self._scoped(options), self.namespace)


def _join(a: str | None, b: str | None) -> str | None:
    return ",".join(s for s in (a, b) if s) or None


class FakeClient:
    """Stands in for :class:`kinformer.Client` where only ``lister_watcher`` is needed (informer factories).

    ``source(resource)`` returns (creating on first use) the :class:`FakeSource` of a resource.
    """

    def __init__(self, sources: Mapping[str, FakeSource] | None = None, *, watch_cache: bool = False) -> None:
        self.sources: dict[str, FakeSource] = dict(sources or {})
        self.watch_cache = watch_cache
        #: (resource, namespace, label_selector, field_selector) of every lister_watcher call.
        self.calls: list[tuple[str, str | None, str | None, str | None]] = []

    def source(self, resource: str) -> FakeSource:
        src = self.sources.get(resource)
        if src is None:
            kind = resource.rsplit("/", 1)[-1].rstrip("s").capitalize() or "Object"
            src = self.sources[resource] = FakeSource(kind=kind, watch_cache=self.watch_cache)
        return src

    def lister_watcher(self, resource: str, *, namespace: str | None = None, label_selector: str | None = None,
                       field_selector: str | None = None) -> FakeListerWatcher:
        self.calls.append((resource, namespace, label_selector, field_selector))
        return self.source(resource).lister_watcher(resource, namespace=namespace, label_selector=label_selector,
                                                    field_selector=field_selector)
