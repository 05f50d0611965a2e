"""The Manager's client: reads from the informer caches, writes to the API server, reads its own writes.

``mgr.client`` (controller-runtime's delegating client) answers ``get`` and ``list`` from the Manager's
shared informers: the first read of a resource creates its informer, starts it and waits (at most the
Manager's ``cache_sync_timeout``) until it has synced. ``list`` filters by namespace, label selector and
field selector; a field-selector term whose field names an index added with ``mgr.add_index(resource,
name, fn)`` is answered from that index, other fields are read from the object by their dotted path
(``spec.nodeName``). Objects are the cached ones: read-only. Informers started this way belong to the
Manager's factory: :meth:`Manager.run` shuts them down when it ends (without ``run``, call
``await mgr.factory.shutdown()``). Every other verb (create, replace, patch,
delete, the status verbs, watch, resolve...) goes to the API server through the wrapped client.

Read-your-own-writes: a write made through this client while a controller reconciles a Request is
remembered for that Request, with the resourceVersion the server answered. The next reconcile of the same
Request first waits until every informer of the Manager that can see the written object (its resource, a
namespace that covers it; filtered by a label or field selector or not) reflects the write: it holds that
version of the object or a later one, or has processed that resourceVersion or a later one (an event or a
bookmark); an informer whose filter the written object does not pass (a write that moved it out) only has
to drop the object, as the server's deletion event makes it do; after a delete that removed the object at
once (the server answers a Status, or the object without a ``deletionTimestamp``) every informer must have
dropped it (or hold a new object of that name: another uid). The wait is bounded by ``ryow_timeout`` and
counted in ``kinformer_read_your_writes_total{controller, outcome}``. So a reconciler never acts on the state
from before its own write, which no controller-runtime client promises.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator, Mapping, MutableSequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from kinformer.cache.factory import InformerKey
from kinformer.errors import NotFound
from kinformer.listwatch import ListResult
from kinformer.meta import kind_of
from kinformer.selectors import field_value, object_fields, parse_field_selector, parse_label_selector
from kinformer.typed_resources import ObjT, resource_spec

if TYPE_CHECKING:
    from kinformer.client.discovery import Resource
    from kinformer.controller.manager import Manager

__all__ = ["CachedClient", "PendingWrite", "track_writes", "wait_for_writes"]

log = logging.getLogger(__name__)

# The writes of the reconcile running in this task (set by the Controller around each reconcile).
_INFORMERS_MEMO_MAX = 1024  # CachedClient._informers_of's remembered answers (emptied when full)

_WRITES: contextvars.ContextVar[list[PendingWrite] | None] = contextvars.ContextVar("kinformer_writes",
                                                                                     default=None)


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """One write to wait for: the informer that must see it, the object's cache key, its resourceVersion, and
    whether the written object passes the informer's filter (``visible``; always, for an unfiltered one). A
    deletion that removed the object has ``deleted_uid`` instead of a resourceVersion."""

    informer: Any
    key: str
    resource_version: str
    visible: bool = True
    deleted_uid: str = ""

    def reached(self) -> bool:
        """True once the informer's cache reflects this write or a later state: it holds this version of the
        object or a later one, or it has processed this resourceVersion or a later one (nothing it was sent
        up to there is still queued), or (a write that left the object outside its filter) it holds no such
        object. A deletion: once it holds no object of that uid."""
        cached = self.informer.indexer.get_by_key(self.key)
        if self.deleted_uid:
            return cached is None or (cached.get("metadata") or {}).get("uid") != self.deleted_uid
        if cached is None:
            if not self.visible:
                return True
        elif _rv_at_least((cached.get("metadata") or {}).get("resourceVersion", ""), self.resource_version):
            return True
        return _rv_at_least(self.informer.cache_resource_version, self.resource_version)


def _rv_at_least(have: str, want: str) -> bool:
    """resourceVersions are opaque, but kube-apiserver's (and ours) are integers: compare them as such."""
    if have == want:
        return True
    try:
        return int(have) >= int(want)
    except (TypeError, ValueError):
        return False


@contextlib.contextmanager
def track_writes() -> Iterator[list[PendingWrite]]:
    """``with track_writes() as writes:`` collects the writes made through a CachedClient in the block."""
    writes: list[PendingWrite] = []
    token = _WRITES.set(writes)
    try:
        yield writes
    finally:
        _WRITES.reset(token)


class CachedClient:
    """Reads from the Manager's informers, writes through ``manager.api_client`` (see the module doc)."""

    _WRITE_VERBS = ("create", "replace", "patch", "replace_status", "patch_status", "delete")

    def __init__(self, manager: Manager) -> None:
        self._manager = manager
        self._resolved: dict[str, Any] = {}
        # _informers_of's answers by (resource name, namespace), each with the factory's informer count it was
        # made at (valid while the count is the same: the factory only ever adds informers)
        self._informers_memo: dict[tuple[str, str | None], tuple[int, list[tuple[InformerKey, Any]]]] = {}
        # the writer of each write verb (at most one per verb), made at its first use
        self._writers: dict[str, Callable[..., Any]] = {}

    @property
    def api_client(self) -> Any:
        return self._manager.api_client

    def __getattr__(self, name: str) -> Any:
        if name in self._WRITE_VERBS:
            writer = self._writers.get(name)
            if writer is None:
                writer = self._writers[name] = self._writer(name)
            return writer
        return getattr(self._manager.api_client, name)

    # -- informers ------------------------------------------------------------------------------------

    async def _resolve(self, resource: Any) -> Any:
        if isinstance(resource, type):
            resource = resource_spec(resource)
        if not isinstance(resource, str):
            return resource
        info = self._resolved.get(resource)
        if info is None:
            info = self._resolved[resource] = await self._manager.api_client.resolve(resource)
        return info

    async def _informers_of(self, resource: Any, namespace: str | None = None) -> list[tuple[InformerKey, Any]]:
        """The Manager's informers of ``resource`` that can hold an object of ``namespace`` (None: any), with
        their keys (filter included); the caller must not change the list (a remembered answer)."""
        count = self._manager.factory.informer_count
        memo_key = (resource, namespace) if isinstance(resource, str) else None
        if memo_key is not None:
            known = self._informers_memo.get(memo_key)
            if known is not None and known[0] == count:
                return known[1]
        found = await self._find_informers_of(resource, namespace)
        if memo_key is not None:
            if len(self._informers_memo) >= _INFORMERS_MEMO_MAX:
                self._informers_memo.clear()
            self._informers_memo[memo_key] = (count, found)
        return found

    async def _find_informers_of(self, resource: Any, namespace: str | None) -> list[tuple[InformerKey, Any]]:
        info = await self._resolve(resource)
        name, plural = str(resource), getattr(info, "plural", None)
        resolved = self._resolved
        found = []
        for key, informer in self._manager.factory.informers_by_key().items():
            if not key.covers_namespace(namespace):
                continue
            if key.resource != name:  # another spelling may name the same resource; most name another one
                other = resolved.get(key.resource) or await self._resolve(key.resource)
                if other is not info and (other.plural != plural or other != info):
                    continue
            found.append((key, informer))
        return found

    async def _find_informer(self, resource: Any) -> Any:
        """The Manager's informer that can answer for the whole of ``resource`` (unfiltered, whole objects)."""
        for key, informer in await self._informers_of(resource):
            if not (key.label_selector or key.field_selector or key.metadata_only):
                return informer
        return None

    async def informer_for(self, resource: Any) -> Any:
        """The synced informer that serves reads of ``resource`` (created and started on first use)."""
        informer = await self._find_informer(resource)
        info = await self._resolve(resource)
        if informer is None:
            informer = self._manager.informer(resource if isinstance(resource, str) else str(info))
        if not informer.is_started:
            self._manager.factory.start()
        if not informer.has_synced():
            timeout = self._manager.cache_sync_timeout
            if not await informer.wait_for_sync(timeout=timeout):
                raise TimeoutError(f"the cache of {info} did not sync within {timeout:.0f}s")
        return informer

    # -- reads ----------------------------------------------------------------------------------------

    @overload
    async def get(self, resource: str | Resource, name: str, namespace: str | None = None, *,
                  subresource: str | None = None) -> Any: ...

    @overload
    async def get(self, resource: type[ObjT], name: str, namespace: str | None = None, *,
                  subresource: str | None = None) -> ObjT: ...

    async def get(self, resource: Any, name: str, namespace: str | None = None, **kwargs: Any) -> Any:
        """The cached object (raises NotFound); a ``subresource`` read goes to the server. A class stands for
        its resource and types the object (:mod:`kinformer.typed_resources`)."""
        if kwargs.get("subresource"):
            return await self._manager.api_client.get(resource, name, namespace, **kwargs)
        informer = await self.informer_for(resource)
        info = await self._resolve(resource)
        if info.namespaced:
            namespace = namespace or getattr(self._manager.api_client, "default_namespace", None) or "default"
            key = f"{namespace}/{name}"
        else:
            key = name
        obj = informer.indexer.get_by_key(key)
        if obj is None:
            raise NotFound(f'{info.plural} "{name}" not found',
                           status={"kind": "Status", "code": 404, "reason": "NotFound",
                                   "details": {"name": name, "kind": info.plural}})
        return obj

    async def list(self, resource: Any, namespace: str | None = None, *, label_selector: str | None = None,
                   field_selector: str | None = None, **_: Any) -> ListResult:
        """Cached objects matching namespace and selectors (``resource_version`` is the cache's)."""
        informer = await self.informer_for(resource)
        labels = parse_label_selector(label_selector) if label_selector else None
        fields = parse_field_selector(field_selector) if field_selector else None
        indexer = informer.indexer
        indexers = indexer.get_indexers()
        objs = None
        for req in fields.requirements if fields else ():
            if req.field in indexers and req.operator.value != "!=":
                objs = indexer.by_index(req.field, req.value)
                break
        if objs is None:
            objs = informer.lister().list(namespace) if namespace else indexer.list()
        out = []
        for obj in objs:
            meta = obj.get("metadata") or {}
            if namespace and meta.get("namespace") != namespace:
                continue
            if labels is not None and not labels.matches(meta.get("labels")):
                continue
            if fields is not None and not self._fields_match(fields, obj, indexers):
                continue
            out.append(obj)
        return ListResult(out, informer.last_sync_resource_version, None, None)

    @staticmethod
    def _fields_match(fields: Any, obj: Mapping[str, Any], indexers: Mapping[str, Any]) -> bool:
        values = object_fields(obj)
        for req in fields.requirements:
            if req.field in values:
                continue
            if req.field in indexers:
                found = indexers[req.field](obj)
                found = [found] if isinstance(found, str) else list(found or ())
                values[req.field] = req.value if req.value in found else (found[0] if found else "")
            else:
                values[req.field] = field_value(obj, req.field)
        return fields.matches(values)

    # -- writes ---------------------------------------------------------------------------------------

    def _writer(self, verb: str) -> Callable[..., Any]:
        """The ``verb`` write: the api_client's method of that name (looked up at each call, so a replaced
        client or method is used), then the write remembered for :func:`track_writes`."""
        manager = self._manager

        async def write(resource: Any, *args: Any, **kwargs: Any) -> Any:
            result = await getattr(manager.api_client, verb)(resource, *args, **kwargs)
            writes = _WRITES.get()
            if writes is not None and not kwargs.get("dry_run"):  # a dry run changes nothing to wait for
                if verb == "delete":
                    await self._remember_deletion(writes, resource, args, kwargs, result)
                else:
                    await self._remember(writes, resource, result)
            return result

        write.__name__ = verb
        write.__doc__ = getattr(manager.api_client, verb).__doc__
        return write

    async def _remember(self, writes: MutableSequence[PendingWrite], resource: Any, result: Any) -> None:
        meta = result.get("metadata") if isinstance(result, Mapping) else None
        if not meta or kind_of(result) == "Status" or not meta.get("resourceVersion"):
            return
        key = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta.get("name", "")
        for informer_key, informer in await self._informers_of(resource, meta.get("namespace") or None):
            writes.append(PendingWrite(informer, key, meta["resourceVersion"], _passes(informer_key, result)))

    async def _remember_deletion(self, writes: MutableSequence[PendingWrite], resource: Any, args: tuple[Any, ...],
                                 kwargs: Mapping[str, Any], result: Any) -> None:
        """A delete that left the object in place (finalizers, a grace period) is a write like any other; one
        that removed it at once is waited for until every informer that held it has dropped it."""
        if not isinstance(result, Mapping):
            return
        meta = result.get("metadata") or {}
        if result.get("kind") != "Status" and meta.get("deletionTimestamp"):
            await self._remember(writes, resource, result)
            return
        name = meta.get("name") or (args[0] if args else kwargs.get("name"))
        if not isinstance(name, str) or not name:
            return
        info = await self._resolve(resource)
        namespace = None
        if info.namespaced:
            namespace = (meta.get("namespace") or (args[1] if len(args) > 1 else kwargs.get("namespace"))
                         or getattr(self._manager.api_client, "default_namespace", None) or "default")
        key = f"{namespace}/{name}" if namespace else name
        uid = meta.get("uid") or (result.get("details") or {}).get("uid") or ""
        for _, informer in await self._informers_of(resource, namespace):
            cached = informer.indexer.get_by_key(key)
            gone = uid or ((cached.get("metadata") or {}).get("uid") if cached is not None else "")
            if gone:
                writes.append(PendingWrite(informer, key, "", visible=False, deleted_uid=gone))

    def __repr__(self) -> str:
        return f"<CachedClient over {self._manager.api_client!r}>"


def _passes(key: InformerKey, obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` passes the label and field selectors of the informer of ``key``, judged as the server
    judges them (a field by its dotted path in the object)."""
    if key.label_selector:
        labels = (obj.get("metadata") or {}).get("labels")
        if not parse_label_selector(key.label_selector).matches(labels):
            return False
    if key.field_selector:
        fields = parse_field_selector(key.field_selector)
        return fields.matches({req.field: field_value(obj, req.field) for req in fields.requirements})
    return True


async def wait_for_writes(writes: list[PendingWrite], timeout: float) -> bool:
    """Wait until every write is in its informer's cache; False if ``timeout`` passed first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    delay = 0.001
    while not all(w.reached() for w in writes):
        left = deadline - loop.time()
        if left <= 0:
            return False
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 2, 0.05)
    return True
