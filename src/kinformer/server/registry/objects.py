"""Object lifecycle rules shared by the HTTP handlers and the server's own controllers.

:class:`ObjectStore` turns create/update/delete of API objects into compare-and-swap writes on the
MVCC storage, applying the kube-apiserver rules on the way: server-set metadata (uid,
creationTimestamp, generation), status-subresource separation, finalizers and graceful deletion,
deletion propagation finalizers, namespace existence. It raises :class:`StatusError` only.

Invariants:

* Stored values never contain ``metadata.resourceVersion``; every object returned carries
  ``metadata.resourceVersion == str(mod_revision)`` of the write (or read) it came from.
* Every write is a compare-and-swap on the revision the rules were applied to, so a concurrent
  change is either a 409 (the client sent a resourceVersion) or a transparent retry (it did not).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import orjson

from ...clock import REAL_CLOCK, Clock
from ..endpoints.query import UINT64_MAX
from ..machinery import status as st
from ..machinery.jsoncopy import json_copy
from ..storage.base import KeyExists, KeyNotFound, KeyValue, RevisionMismatch, Storage
from ..storage.watchcache import WatchCache
from .ephemeralcontainers import ephemeral_update_causes, take_ephemeral_containers
from .gracefuldelete import Graceful, before_delete
from .ipallocator import ServiceAllocator
from .resources import Registry, ResourceInfo
from .storedform import Split, encode, encode_split, new_uid, served, served_bytes, stored_of_served, timestamp
from .strategies import FallbackStrategy, strategy_table
from .strategies.certificates import take_approval, take_status
from .strategies.pods import DEFAULT_TOLERATION_SECONDS, TolerationSeconds
from .strategy import Strategy, StrategyRegistry
from .validation import distinct_causes, generate_name, validate_object

log = logging.getLogger(__name__)

# Subresources of one kind whose update takes its own part of the client's object: (group, plural, subresource)
# -> take(old, new, now) returning the object to write.
TakeUpdate = Callable[[dict[str, Any], Mapping[str, Any], str], dict[str, Any]]
_SUBRESOURCE_UPDATES: dict[tuple[str, str, str], TakeUpdate] = {
    ("certificates.k8s.io", "certificatesigningrequests", "approval"): take_approval,
    ("certificates.k8s.io", "certificatesigningrequests", "status"): take_status,
}

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")
NAMESPACE_FINALIZER = "kubernetes"
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
CRD_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
NS_INFO_KEY = "/registry/core/namespaces/"

MAX_RETRIES = 16

Outcome = Literal["unchanged", "updated", "created", "deleted"]


class _Delete:
    """What a :meth:`ObjectStore.guaranteed_update` callback returns to delete the object."""


DELETE = _Delete()
Change = dict[str, Any] | _Delete | None
TryUpdate = Callable[[dict[str, Any] | None], Awaitable[Change] | Change]
State = tuple[dict[str, Any] | None, KeyValue | None]
_ABSENT: Any = object()


def parse_rv(value: Any, *, what: str = "resourceVersion") -> int:
    """A resourceVersion as an int: ASCII digits within uint64, as kube's ``strconv.ParseUint``; 400 otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= UINT64_MAX:
        return value
    if not (isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20) \
            or int(value) > UINT64_MAX:
        raise st.bad_request(f'invalid {what}: "{st.truncate(str(value), 64)}"')
    return int(value)


def validate(info: ResourceInfo, obj: dict[str, Any], old: Mapping[str, Any] | None = None,
             strategy: Strategy | None = None, subresource: str = "") -> None:
    """Raise 422 Invalid with causes when ``obj`` is not acceptable (schema, metadata and ``strategy`` checks).

    An update through the ephemeralcontainers subresource is held to that subresource's own update rule
    (applied when it was prepared), not to the pod's. A ``status`` write of a built-in kind is judged as
    kube's status strategies judge it: metadata, types and the kind's status rules; not the spec, which is
    the stored one (:meth:`ObjectStore.prepare_update`).
    """
    status_write = subresource == "status" and old is not None and info.builtin
    causes = validate_object(info, obj, old, spec=not status_write) + _owner_ref_causes(obj)
    if strategy is not None:
        if old is None or subresource == "ephemeralcontainers":
            causes += strategy.validate(info, obj)
        elif status_write:
            assert old is not None
            causes += strategy.validate_status_update(info, obj, old)
        else:
            causes += strategy.validate_update(info, obj, old)
    name = (obj.get("metadata") or {}).get("name")
    if (not isinstance(name, str) or not name) and not any(c.get("field") == "metadata.name" for c in causes):
        causes.append({"reason": "FieldValueRequired", "field": "metadata.name",
                       "message": "Required value: name or generateName is required"})
    for part in ("spec", "status"):
        if part in obj and obj[part] is not None and not isinstance(obj[part], dict) and info.builtin:
            causes.append({"reason": "FieldValueInvalid", "field": part, "message": "Invalid value: must be an object"})
    if causes:
        meta = obj.get("metadata") or {}
        raise st.invalid(info, meta.get("name", "") or meta.get("generateName", ""), distinct_causes(causes))


def _owner_ref_causes(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Causes for malformed ``metadata.ownerReferences`` (each needs apiVersion, kind, name and uid strings)."""
    refs = (obj.get("metadata") or {}).get("ownerReferences")
    if refs is None:
        return []
    if not isinstance(refs, list):
        return [{"reason": "FieldValueInvalid", "field": "metadata.ownerReferences",
                 "message": "Invalid value: must be a list of owner references"}]
    causes = []
    controllers: list[str] = []
    for i, ref in enumerate(refs):
        for field in ("apiVersion", "kind", "name", "uid"):
            if not isinstance(ref, Mapping) or not isinstance(ref.get(field), str) or not ref[field]:
                causes.append({"reason": "FieldValueRequired", "field": f"metadata.ownerReferences[{i}].{field}",
                               "message": "Required value"})
        if not isinstance(ref, Mapping):
            continue
        for field in ("controller", "blockOwnerDeletion"):
            if ref.get(field) is not None and not isinstance(ref[field], bool):
                causes.append({"reason": "FieldValueInvalid", "field": f"metadata.ownerReferences[{i}].{field}",
                               "message": "Invalid value: must be a boolean"})
        if ref.get("controller") is True:
            controllers.append(f"{ref.get('kind', '')}/{ref.get('name', '')}")
    if len(controllers) > 1:
        causes.append({"reason": "FieldValueInvalid", "field": "metadata.ownerReferences",
                       "message": "Invalid value: Only one reference can have Controller set to true. Found "
                                  f'"true" in references for {" and ".join(controllers)}'})
    return causes


def _check_preconditions(info: ResourceInfo, name: str, pre: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
    """409 when DeleteOptions preconditions (uid, resourceVersion) do not hold for the object's metadata."""
    if pre.get("uid") and pre["uid"] != meta.get("uid"):
        raise st.conflict(info, name, f"Precondition failed: UID in precondition: {pre['uid']}, "
                          f"UID in object meta: {meta.get('uid')}")
    if pre.get("resourceVersion") and str(pre["resourceVersion"]) != meta["resourceVersion"]:
        raise st.conflict(info, name, "Precondition failed: ResourceVersion in precondition: "
                          f"{pre['resourceVersion']}, ResourceVersion in object meta: {meta['resourceVersion']}")


def _gc_finalizers(finalizers: list[str], policy: str | None) -> list[str]:
    """The finalizers after a delete with propagation ``policy`` (kube's deletion GC finalizer rule).

    An explicit policy decides both GC finalizers (``orphan`` for Orphan, ``foregroundDeletion`` for
    Foreground, neither for Background); without one the object keeps those it already has.
    """
    if policy is None:
        return list(finalizers)
    out = [f for f in finalizers if f not in (ORPHAN, FOREGROUND)]
    if policy == "Orphan":
        out.append(ORPHAN)
    elif policy == "Foreground":
        out.append(FOREGROUND)
    return out


def _set_on_create(rv: Any) -> bool:
    """Whether a create's resourceVersion is refused: like etcd3 storage, only a non-zero number is."""
    if rv is None or rv == "":
        return False
    try:
        return int(str(rv)) != 0
    except ValueError:
        return False


def _status_update_base(old: dict[str, Any]) -> dict[str, Any]:
    """What a status write starts from: ``old`` with a new top level and ``metadata`` (the only levels the
    update preparation, managedFields and the write change from here on) sharing everything below them.

    ``old`` is private to the write attempt (:meth:`ObjectStore.guaranteed_update`), so what the result shares
    belongs to no one else: the object written, and then the watch cache's, is never changed through ``old``.
    """
    result = dict(old)
    result["metadata"] = dict(old["metadata"])
    return result


def _set_type(obj: dict[str, Any], info: ResourceInfo) -> None:
    """Set kind and apiVersion, placing them first as kube-apiserver serialises them."""
    if obj.get("kind") == info.kind and obj.get("apiVersion") == info.api_version and \
            next(iter(obj), None) in ("kind", "apiVersion"):
        return
    rest = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    obj.clear()
    obj["kind"] = info.kind
    obj["apiVersion"] = info.api_version
    obj.update(rest)


def _name_taken(info: ResourceInfo, obj: Mapping[str, Any], taken_by: KeyValue | None) -> st.StatusError:
    """A create's AlreadyExists; the generated-name form when ``obj`` has a ``generateName`` (kube's
    ``CheckGeneratedNameError``, which looks at ``generateName`` alone). As kube's generic store, the message
    begins "object is being deleted: " when ``taken_by`` (the stored object holding the name, None when it is
    gone already) has a deletionTimestamp: a create racing a graceful deletion or a finalizer can tell."""
    meta = obj["metadata"]
    if meta.get("generateName"):
        err = st.generate_name_conflict(info, meta["name"])
    else:
        err = st.already_exists(info, meta["name"])
    if taken_by is None or not _being_deleted(taken_by.value):
        return err
    return st.StatusError(err.code, err.reason, f"object is being deleted: {err.message}", details=err.details,
                          headers=err.headers)


def _being_deleted(value: bytes) -> bool:
    try:
        stored = orjson.loads(value)
    except orjson.JSONDecodeError:
        return False
    meta = stored.get("metadata") if isinstance(stored, dict) else None
    return isinstance(meta, dict) and bool(meta.get("deletionTimestamp"))


class ObjectStore:
    """CRUD of API objects on top of the MVCC storage (see the module invariants)."""

    def __init__(self, storage: Storage, registry: Registry, clock: Clock = REAL_CLOCK,
                 cache: WatchCache | None = None, allocator: ServiceAllocator | None = None,
                 default_toleration_seconds: TolerationSeconds = DEFAULT_TOLERATION_SECONDS) -> None:
        self.storage = storage
        self.registry = registry
        self.clock = clock
        self.cache = cache
        self.strategies = StrategyRegistry(FallbackStrategy())
        for (group, plural), strategy in strategy_table(allocator, default_toleration_seconds).items():
            self.strategies.register(group, plural, strategy)
        # Hooks run after a successful (non-dry-run) write: (info, object, deleted). They must not mutate
        # the object (it may already be the watch cache's copy).
        self.after_write: list[Callable[[ResourceInfo, dict[str, Any], bool], None]] = []
        #: the names made from ``generateName`` (a prefix -> the name); replaceable, e.g. by a test forcing a collision
        self.generate_name: Callable[[str], str] = generate_name
        #: kube's graceful deletion of pods bound to a node (:mod:`.gracefuldelete`); on only where kubelets run.
        self.graceful_pods = False

    @staticmethod
    def key(info: ResourceInfo, namespace: str, name: str) -> str:
        if info.namespaced:
            return f"{info.storage_prefix}{namespace}/{name}"
        return f"{info.storage_prefix}{name}"

    async def read(self, info: ResourceInfo, namespace: str, name: str, *, cached: bool = False,
                   want_rv: int = 0) -> tuple[dict[str, Any], KeyValue]:
        """The object (a private copy) and its stored key-value, for a read-modify-write.

        With ``cached`` the watch cache answers when it holds the object (at ``want_rv`` when given): a
        stale answer only costs a failed compare-and-swap, after which callers re-read from storage.
        """
        key = self.key(info, namespace, name)
        if cached and self.cache is not None:
            bucket = self.cache.buckets.get(info.storage_prefix)
            co = bucket.objects.get(key) if bucket is not None else None
            if co is not None and (not want_rv or want_rv == co.rev):
                return self._state_of_cached(key, co.raw, co.rev)
        kv = await self.storage.get(key)
        if kv is None:
            raise st.not_found(info, name)
        return served(kv), kv

    def _cached_namespace(self, namespace: str) -> Mapping[str, Any] | None:
        bucket = self.cache.buckets.get(NS_INFO_KEY) if self.cache is not None else None
        cached = bucket.objects.get(NS_INFO_KEY + namespace) if bucket is not None else None
        return cached.obj if cached is not None else None

    def namespace_open(self, namespace: str) -> bool:
        """Whether the cache holds ``namespace`` and it is not being deleted: :meth:`check_namespace` would pass
        without a wait (False tells nothing: the check decides)."""
        bucket = self.cache.buckets.get(NS_INFO_KEY) if self.cache is not None else None
        cached = bucket.objects.get(NS_INFO_KEY + namespace) if bucket is not None else None
        return cached is not None and not (cached.obj.get("metadata") or {}).get("deletionTimestamp")

    async def check_namespace(self, namespace: str) -> None:
        """404 when ``namespace`` does not exist; 403 when it is being deleted.

        Like kube-apiserver's namespace lifecycle admission, this reads the cache and falls back to
        storage only when the cache does not know the namespace (it may have been created just now).
        """
        cached = self._cached_namespace(namespace)
        if cached is not None:
            ns = cached
        else:
            kv = await self.storage.get(NS_INFO_KEY + namespace)
            if kv is None:
                raise st.namespace_not_found(namespace)
            ns = orjson.loads(kv.value)
        if (ns.get("metadata") or {}).get("deletionTimestamp"):
            raise st.StatusError(403, "Forbidden", f"unable to create new content in namespace {namespace} "
                                 "because it is being terminated",
                                 details={"name": namespace, "kind": "namespaces",
                                          "causes": [{"reason": "NamespaceTerminating",
                                                      "message": f"namespace {namespace} is being terminated",
                                                      "field": "metadata.namespace"}]})

    # ---------------------------------------------------------------------------------- create

    def prepare_create(self, info: ResourceInfo, namespace: str, obj: dict[str, Any], *,
                       managed: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, Any]:
        """Apply the server-set fields of a new object (mutates ``obj``; returns it, or what ``managed`` made).

        ``managed`` records the creator's managedFields: as kube-apiserver does, it sees the object with
        its defaults, before the kind's create preparation (status, allocations) and admission plugins
        (service account volume, default tolerations) add what the creator does not own.
        """
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        _set_type(obj, info)
        if info.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise st.bad_request("the namespace of the provided object does not match the namespace sent "
                                     "on the request")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if _set_on_create(meta.get("resourceVersion")):
            raise st.invalid(info, meta.get("name", ""), [{
                "reason": "FieldValueInvalid", "field": "metadata.resourceVersion",
                "message": "Invalid value: 0x0: resourceVersion should not be set on objects to be created"}])
        meta.pop("resourceVersion", None)
        if not meta.get("name") and isinstance(meta.get("generateName"), str) and meta["generateName"]:
            meta["name"] = self.generate_name(meta["generateName"])
        meta["uid"] = new_uid()
        meta["creationTimestamp"] = timestamp(self.clock)
        meta.pop("generation", None)
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(k, None)
        if info.has_status and not (info.builtin and info.plural in ("pods", "namespaces", "nodes")):
            obj.pop("status", None)
        strategy = self.strategies.get(info)
        if managed is None:
            strategy.prepare_for_create(info, obj)
            return obj
        default, prepare_defaulted = getattr(strategy, "default", None), getattr(strategy, "prepare_defaulted", None)
        if default is None or prepare_defaulted is None:  # it does not default: what it adds is not owned either
            strategy.prepare_for_create(info, obj)
            return managed(obj)
        default(info, obj)
        obj = managed(obj)
        prepare_defaulted(info, obj)
        return obj

    def validate(self, info: ResourceInfo, obj: dict[str, Any], old: Mapping[str, Any] | None = None,
                 subresource: str = "") -> None:
        """422 Invalid when ``obj`` (a create, or an update of ``old``) fails the generic or the kind's checks."""
        validate(info, obj, old, self.strategies.get(info), subresource)

    async def create(self, info: ResourceInfo, namespace: str, obj: dict[str, Any], *,
                     dry_run: bool = False) -> dict[str, Any]:
        """Create ``obj`` (already prepared); 404 on a missing namespace, 409 when the name is taken."""
        return (await self._create(info, namespace, obj, dry_run, False))[0]

    def create_served(self, info: ResourceInfo, namespace: str, obj: dict[str, Any], *,
                      dry_run: bool = False) -> Awaitable[tuple[dict[str, Any], bytes | None]]:
        """:meth:`create`, answering (the object, its served bytes: never None here); one encoding for the answer
        and the cache.

        ``obj`` is handed over: it becomes the watch cache's copy (so the cache does not decode the stored
        value again) and the caller must never mutate it afterwards. A plain function returning the write's
        coroutine: a request awaits that one, not another around it.
        """
        return self._create(info, namespace, obj, dry_run, True)

    async def _create(self, info: ResourceInfo, namespace: str, obj: dict[str, Any], dry_run: bool,
                      handover: bool) -> tuple[dict[str, Any], bytes | None]:
        """(the object created, its served bytes when ``handover``: see :meth:`create_served`; else None)."""
        name = obj["metadata"].get("name", "")
        if info.namespaced and not self.namespace_open(namespace):
            await self.check_namespace(namespace)
        key = self.key(info, namespace, name)
        if dry_run:
            if (taken_by := await self.storage.get(key)) is not None:
                raise _name_taken(info, obj, taken_by)
            return obj, orjson.dumps(obj) if handover else None
        meta = obj["metadata"]
        split = None
        if handover and self.cache is not None:
            rv = meta.pop("resourceVersion", _ABSENT)
            split = encode_split(obj)
            del meta["resourceVersion"]
            if rv is not _ABSENT:
                meta["resourceVersion"] = rv
        try:
            kv = await self.storage.create(key, encode(obj) if split is None else split[0] + split[1])
        except KeyExists:
            raise _name_taken(info, obj, await self.storage.get(key)) from None
        meta.pop("resourceVersion", None)  # last, where decoding the stored value puts it
        meta["resourceVersion"] = str(kv.mod_revision)
        raw = None
        if handover:
            raw = self._hand_over(key, kv.mod_revision, obj, split) or orjson.dumps(obj)
        self._after(info, obj, False)
        return obj, raw

    def _hand_over(self, key: str, rev: int, obj: dict[str, Any], split: Split | None = None) -> bytes | None:
        """Offer ``obj``, just written at ``rev``, with its served bytes to the watch cache; the bytes, or None
        when the cache would serve other bytes (``resourceVersion`` not last in the metadata) or there is none.
        ``split``: ``obj``'s :func:`encode_split`, which makes the bytes without encoding it again.

        From here on ``obj`` is the cache's: nobody may mutate it.
        """
        if self.cache is None or next(reversed(obj["metadata"]), None) != "resourceVersion":
            return None
        raw = orjson.dumps(obj) if split is None else served_bytes(split, rev)
        self.cache.offer(key, rev, obj, raw)
        return raw

    # ---------------------------------------------------------------------------------- update

    def prepare_update(self, info: ResourceInfo, old: dict[str, Any], new: dict[str, Any], *,
                       subresource: str = "",
                       managed: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, Any]:
        """Merge a client's replacement ``new`` onto ``old`` following the update rules; returns the result.

        ``managed`` records the writer's managedFields: like kube-apiserver, on the merged object with its
        defaults, before the kind's update preparation (the strategy's ``update`` hook) changes it.
        """
        if not isinstance(new.get("metadata"), dict):
            new["metadata"] = {}
        ometa = old["metadata"]
        name = ometa["name"]
        take = _SUBRESOURCE_UPDATES.get((info.group, info.plural, subresource))
        if take is not None:
            result = take(old, new, timestamp(self.clock))
            nmeta = result["metadata"]
        elif subresource == "status":
            result = _status_update_base(old)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
            nmeta = result["metadata"]
        elif subresource == "ephemeralcontainers":
            result = take_ephemeral_containers(old, new)
            causes = ephemeral_update_causes(old, result)
            if causes:
                raise st.invalid(info, name, causes)
            nmeta = result["metadata"]
        elif subresource == "finalize":
            result = json_copy(old)
            result.setdefault("spec", {})["finalizers"] = list((new.get("spec") or {}).get("finalizers") or ())
            nmeta = result["metadata"]
        else:
            result = new
            nmeta = new["metadata"]
            if nmeta.get("name") and nmeta["name"] != name:
                raise st.bad_request(f'the name of the object ({nmeta["name"]}) does not match the name on the URL '
                                     f"({name})")
            if info.namespaced and nmeta.get("namespace") and nmeta["namespace"] != ometa.get("namespace"):
                raise st.bad_request("the namespace of the provided object does not match the namespace sent on "
                                     "the request")
            for k in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds"):
                if k in ometa:
                    nmeta[k] = ometa[k]
                else:
                    nmeta.pop(k, None)
            if info.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            if not info.group and info.plural == "namespaces":
                new["spec"] = old.get("spec", {})
        _set_type(result, info)
        if "generation" in ometa:
            nmeta["generation"] = ometa["generation"]
        else:
            nmeta.pop("generation", None)
        strategy = None if subresource else self.strategies.get(info)
        default = getattr(strategy, "default", None)
        prepare_defaulted = getattr(strategy, "prepare_defaulted_update", None)
        if managed is None or default is None or prepare_defaulted is None:
            prepare_defaulted = None  # one step: the strategy's own prepare_for_update
            if strategy is not None:
                strategy.prepare_for_update(info, result, old)
        else:
            default(info, result)
        if ometa.get("deletionTimestamp"):
            added = set(nmeta.get("finalizers") or ()) - set(ometa.get("finalizers") or ())
            if added:
                raise st.invalid(info, name, [{"reason": "FieldValueForbidden", "field": "metadata.finalizers",
                                               "message": "Forbidden: no new finalizers can be added if the object "
                                                          "is being deleted, found new finalizers "
                                                          f"{sorted(added)!r}"}])
        if not nmeta.get("finalizers"):
            nmeta.pop("finalizers", None)
        if managed is not None:
            result = managed(result)
            if prepare_defaulted is not None:
                prepare_defaulted(info, result, old)
        return result

    async def write_update(self, info: ResourceInfo, old_kv: KeyValue, obj: dict[str, Any], *,
                           dry_run: bool = False) -> dict[str, Any]:
        """CAS-write an updated object; deletes it when it is being deleted and has no finalizers left.

        Raises :class:`RevisionMismatch` / :class:`KeyNotFound` for the caller to map or retry.
        """
        out, _, _ = await self._write(info, old_kv, obj, dry_run=dry_run)
        return out

    async def _write(self, info: ResourceInfo, old_kv: KeyValue, obj: dict[str, Any], *, dry_run: bool = False,
                     handover: bool = False) -> tuple[dict[str, Any], bool, bytes | None]:
        """:meth:`write_update`, also saying whether the write deleted the object (no finalizers left), and
        with ``handover`` the served bytes of an object written (see :meth:`_hand_over`)."""
        meta = obj["metadata"]
        split = None
        if handover and not dry_run and self.cache is not None and next(reversed(meta), None) == "resourceVersion":
            rv = meta["resourceVersion"]
            split = encode_split(obj)
            meta["resourceVersion"] = rv
        data = encode(obj) if split is None else split[0] + split[1]
        if data == old_kv.value:
            if old_kv.create_revision == 0:
                await self._confirm_current(old_kv)
            meta["resourceVersion"] = str(old_kv.mod_revision)
            return obj, False, None
        if dry_run:
            meta["resourceVersion"] = str(old_kv.mod_revision)
            return obj, False, None
        kv = await self.storage.update(old_kv.key, data, old_kv.mod_revision)
        meta["resourceVersion"] = str(kv.mod_revision)
        if (meta.get("deletionTimestamp") and not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds")
                and not self._finalizes_elsewhere(info, obj)):
            try:
                await self.storage.delete(kv.key, kv.mod_revision)
            except (RevisionMismatch, KeyNotFound):
                pass
            else:
                self._after(info, obj, True)
                return obj, True, None
        raw = self._hand_over(kv.key, kv.mod_revision, obj, split) if handover else None
        self._after(info, obj, False)
        return obj, False, raw

    async def _confirm_current(self, old_kv: KeyValue) -> None:
        """Check a cache-read key-value (``create_revision == 0``) is still what storage holds.

        A no-op decided against a stale cached copy would silently drop the write; raising makes the
        caller re-read from storage and retry (or answer 409/404).
        """
        kv = await self.storage.get(old_kv.key)
        if kv is None:
            raise KeyNotFound(old_kv.key)
        if kv.mod_revision != old_kv.mod_revision:
            raise RevisionMismatch(kv)

    @staticmethod
    def _finalizes_elsewhere(info: ResourceInfo, obj: Mapping[str, Any]) -> bool:
        """Namespaces also wait for ``spec.finalizers`` (emptied by the namespace controller)."""
        if not info.group and info.plural == "namespaces":
            return bool((obj.get("spec") or {}).get("finalizers"))
        return False

    # ---------------------------------------------------------------------------------- the update loop

    async def guaranteed_update_served(self, info: ResourceInfo, namespace: str, name: str, try_update: TryUpdate,
                                       *, precondition_rv: int = 0, allow_create: bool = False,
                                       dry_run: bool = False) -> tuple[bytes, Outcome]:
        """:meth:`guaranteed_update` answering the result's served bytes, for a handler that only sends them:
        an object written is handed over to the watch cache (encoded once; see :meth:`create_served`)."""
        out, outcome, raw = await self._guaranteed_update(info, namespace, name, try_update, precondition_rv,
                                                          allow_create, dry_run, True)
        return (raw if raw is not None else orjson.dumps(out)), outcome

    async def guaranteed_update(self, info: ResourceInfo, namespace: str, name: str, try_update: TryUpdate, *,
                                precondition_rv: int = 0, allow_create: bool = False, dry_run: bool = False,
                                handover: bool = False, shared: bool = False) -> tuple[dict[str, Any], Outcome]:
        """Read, mutate, compare-and-swap on the revision read, and retry on conflict (kube's GuaranteedUpdate).

        ``try_update(current)`` gets a private, mutable copy of the current object (None when it does not
        exist: only with ``allow_create``, otherwise the answer is 404) and returns the object to write,
        ``None`` for no change, or :data:`DELETE`; it raises :class:`StatusError` to refuse. It may be called
        again, on newer state, after a lost compare-and-swap: it must not have other side effects.

        The first state may come from the watch cache; a refusal or a no-op judged on a cached copy is
        judged again on a fresh read from storage, so a stale cache never decides an answer. A lost
        compare-and-swap retries on the state storage reported (at most ``MAX_RETRIES`` attempts, then
        409). With ``precondition_rv`` any other current revision is a 409 Conflict.
        Returns the object as written (or as it is, when unchanged) and what happened. ``handover``: an object
        written is handed over to the watch cache (which then need not decode the stored value): the caller
        must not mutate the object returned. ``shared``: ``try_update`` may get the watch cache's own object
        (read-only: it returns a new object, sharing with it only what it does not change) instead of a copy.
        """
        out, outcome, _ = await self._guaranteed_update(info, namespace, name, try_update, precondition_rv,
                                                        allow_create, dry_run, handover, shared=shared)
        return out, outcome

    async def _guaranteed_update(self, info: ResourceInfo, namespace: str, name: str, try_update: TryUpdate,
                                 precondition_rv: int, allow_create: bool, dry_run: bool, handover: bool, *,
                                 shared: bool = False) -> tuple[dict[str, Any], Outcome, bytes | None]:
        key = self.key(info, namespace, name)
        state = self._cached_state(info, key, precondition_rv, shared)
        fresh = state is None
        if state is None:
            state = await self._storage_state(info, key, name, allow_create)
        for _ in range(MAX_RETRIES):
            obj, kv = state
            try:
                if precondition_rv and (kv is None or kv.mod_revision != precondition_rv):
                    raise st.conflict(info, name)
                change = try_update(obj)
                if inspect.isawaitable(change):
                    change = await change
            except st.StatusError:
                if fresh:
                    raise
                state, fresh = await self._storage_state(info, key, name, allow_create), True
                continue
            try:
                if change is None or (kv is None and change is DELETE):
                    if not fresh:
                        state, fresh = await self._storage_state(info, key, name, allow_create), True
                        continue
                    if obj is None:
                        raise st.not_found(info, name)
                    return obj, "unchanged", None
                if kv is None:
                    assert isinstance(change, dict)
                    created, raw = await self._create(info, namespace, change, dry_run, handover)
                    return created, "created", raw
                if isinstance(change, _Delete):
                    assert obj is not None
                    return await self._delete_at(info, kv, obj, dry_run), "deleted", None
                out, deleted, raw = await self._write(info, kv, change, dry_run=dry_run, handover=handover)
                return out, "deleted" if deleted else "updated", raw
            except RevisionMismatch as e:
                state = (served(e.current), e.current) if e.current is not None else \
                    await self._storage_state(info, key, name, allow_create)
            except KeyNotFound:
                state = await self._storage_state(info, key, name, allow_create)
            except st.StatusError as e:
                if e.reason != "AlreadyExists" or not allow_create:
                    raise
                state = await self._storage_state(info, key, name, allow_create)  # lost a create race
            fresh = True
        raise st.conflict(info, name)

    def _cached_state(self, info: ResourceInfo, key: str, want_rv: int, shared: bool = False) -> State | None:
        """The watch cache's copy of ``key`` (at ``want_rv`` when given), or None when it has none. ``shared``:
        the cache's own object (read-only) when the stored form can be cut from its bytes, not a decoded copy."""
        if self.cache is None:
            return None
        bucket = self.cache.buckets.get(info.storage_prefix)
        co = bucket.objects.get(key) if bucket is not None else None
        if co is None or (want_rv and want_rv != co.rev):
            return None
        if shared:
            obj = co.obj
            stored = stored_of_served(co.raw, obj, co.rev)
            if stored is not None:
                return obj, KeyValue(key, stored, co.rev, 0)
        return self._state_of_cached(key, co.raw, co.rev)

    @staticmethod
    def _state_of_cached(key: str, raw: bytes, rev: int) -> tuple[dict[str, Any], KeyValue]:
        """A private copy of a cached object (served bytes ``raw`` at ``rev``) and a key-value standing for it.

        The key-value's value is the stored form storage holds at ``rev`` (what :meth:`_write` compares a
        result with to find a no-op), cut from ``raw`` rather than encoded again; its ``create_revision`` is 0,
        which marks it as read from the cache (see :meth:`_confirm_current`).
        """
        obj = orjson.loads(raw)
        stored = stored_of_served(raw, obj, rev)
        return obj, KeyValue(key, encode(obj) if stored is None else stored, rev, 0)

    async def _storage_state(self, info: ResourceInfo, key: str, name: str, allow_create: bool) -> State:
        kv = await self.storage.get(key)
        if kv is None:
            if not allow_create:
                raise st.not_found(info, name)
            return None, None
        return served(kv), kv

    async def _delete_at(self, info: ResourceInfo, kv: KeyValue, obj: dict[str, Any], dry_run: bool) -> dict[str, Any]:
        """Delete the key at the revision ``obj`` was read at; the object comes back at the deletion's revision."""
        if dry_run:
            return obj
        dkv = await self.storage.delete(kv.key, kv.mod_revision)
        obj["metadata"]["resourceVersion"] = str(dkv.mod_revision)
        self._after(info, obj, True)
        return obj

    async def mutate(self, info: ResourceInfo, namespace: str, name: str,
                     fn: Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None] | dict[str, Any] | None], *,
                     precondition_rv: int = 0, dry_run: bool = False, raw: bool = False) -> dict[str, Any] | None:
        """Read-modify-write through :meth:`guaranteed_update`: ``fn(current)`` returns the new object or None.

        With ``raw`` the result is written as is (server-internal changes such as finalizer removal);
        otherwise it goes through :meth:`prepare_update` and validation like a client update.
        """
        async def try_update(old: dict[str, Any] | None) -> Change:
            assert old is not None
            res = fn(old if raw else json_copy(old))
            if inspect.isawaitable(res):
                res = await res
            if res is None or raw:
                return res
            result = self.prepare_update(info, old, res)
            self.validate(info, result, old)
            return result

        out, _ = await self.guaranteed_update(info, namespace, name, try_update, precondition_rv=precondition_rv,
                                              dry_run=dry_run)
        return out

    # ---------------------------------------------------------------------------------- delete

    async def delete(self, info: ResourceInfo, namespace: str, name: str, options: Mapping[str, Any] | None = None,
                     *, dry_run: bool = False) -> tuple[dict[str, Any], bool]:
        """Delete per DeleteOptions; returns (object, deleted_now). Finalizers make it a graceful delete."""
        options = options or {}
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = "Orphan" if options["orphanDependents"] else "Background"
        if policy not in (None, "Background", "Foreground", "Orphan"):
            raise st.invalid(info, name, [{"reason": "FieldValueNotSupported", "field": "propagationPolicy",
                                           "message": f'Unsupported value: "{policy}": supported values: '
                                                      '"Foreground", "Background", "Orphan", "nil"'}])
        pre = options.get("preconditions") or {}
        if not info.group and info.plural == "namespaces" and name in PROTECTED_NAMESPACES:
            raise st.StatusError(403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be '
                                 "deleted", details={"name": name, "kind": "namespaces"})

        def try_delete(obj: dict[str, Any] | None) -> Change:
            assert obj is not None
            meta = obj["metadata"]
            _check_preconditions(info, name, pre, meta)
            current = list(meta.get("finalizers") or ())
            finalizers = _gc_finalizers(current, policy or self._default_gc_policy(info, current))
            if (info.group == "apiextensions.k8s.io" and info.plural == "customresourcedefinitions"
                    and CRD_FINALIZER not in finalizers and not meta.get("deletionTimestamp")):
                finalizers.append(CRD_FINALIZER)
            graceful = self._graceful(info, obj, options)
            if graceful == "pending":
                return None  # a graceful deletion under way: DeleteOptions change nothing (kube's rule)
            if graceful == "graceful":
                meta["finalizers"] = finalizers
                if not finalizers:
                    meta.pop("finalizers", None)
                return obj
            if not finalizers and not self._finalizes_elsewhere(info, obj):
                return DELETE
            if meta.get("deletionTimestamp"):
                if set(finalizers) == set(current):
                    return None
                # A repeated delete may switch the GC finalizers (kube allows that while terminating).
            else:
                meta["deletionTimestamp"] = timestamp(self.clock)
                meta["deletionGracePeriodSeconds"] = 0
                if meta.get("generation"):
                    meta["generation"] += 1
                if not info.group and info.plural == "namespaces":
                    obj.setdefault("status", {})["phase"] = "Terminating"
            meta["finalizers"] = finalizers
            if not finalizers:
                meta.pop("finalizers", None)
            return obj

        obj, outcome = await self.guaranteed_update(info, namespace, name, try_delete, dry_run=dry_run)
        return obj, outcome == "deleted"

    def _graceful(self, info: ResourceInfo, obj: dict[str, Any], options: Mapping[str, Any]) -> Graceful:
        """kube's graceful deletion of pods (:mod:`.gracefuldelete`), when this server runs kubelets."""
        if not self.graceful_pods or info.group or info.plural != "pods":
            return None
        return before_delete(obj, options, self.clock.wall())

    def _default_gc_policy(self, info: ResourceInfo, finalizers: list[str]) -> str | None:
        """The kind's propagation policy when a delete names none and no GC finalizer decides (batch/v1 Jobs
        orphan their pods, as kube keeps for compatibility)."""
        if ORPHAN in finalizers or FOREGROUND in finalizers:
            return None
        return getattr(self.strategies.get(info), "default_gc_policy", None)

    def _after(self, info: ResourceInfo, obj: dict[str, Any], deleted: bool) -> None:
        for hook in self.after_write:
            try:
                hook(info, obj, deleted)
            except Exception:
                log.exception("after-write hook failed")

    async def ensure_namespaces(self) -> None:
        """Create the system namespaces that do not exist yet."""
        info = self.registry.get("", "v1", "namespaces")
        assert info is not None
        for ns in SYSTEM_NAMESPACES:
            if await self.storage.get(NS_INFO_KEY + ns) is None:
                obj = self.prepare_create(info, "", {"metadata": {"name": ns}})
                try:
                    await self.create(info, "", obj)
                except st.StatusError as e:
                    if e.code != 409:
                        raise
