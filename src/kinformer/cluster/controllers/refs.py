"""Controller references and kube's ``ControllerRefManager`` (adoption and release), the one home of both for
every workload controller (replicaset, deployment, statefulset, daemonset, job): ``metav1.GetControllerOf``,
``metav1.NewControllerRef``, and ``ClaimPods``/``ClaimReplicaSets``/``ClaimControllerRevisions`` with an
optional filter on the object (a StatefulSet's pods must carry its name) and the re-read of the owner before
the first adoption.

Rules (pkg/controller/controller_ref_manager.go, kube 1.32):

* an object controlled by another owner is left alone;
* an object this owner controls is kept while the selector (and filter) matches it, else released (its
  controller reference removed) unless the owner is being deleted;
* an orphan in the owner's namespace that matches is adopted (a controller reference with
  ``blockOwnerDeletion``), unless the owner or the orphan is being deleted; the owner is read again from the
  server first, so a deleted or re-created owner (another uid) adopts nothing (``RecheckDeletionTimestamp``).

Adoption and release are strategic-merge patches that carry the object's uid as a precondition, as kube's.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from kinformer.controller.reconcile import Request
from kinformer.errors import NotFound, SelectorError
from kinformer.selectors import LabelSelector, label_selector_from_dict

from ..podutil import is_being_deleted

log = logging.getLogger(__name__)

_dumps = orjson.dumps

Obj = Mapping[str, Any]


#: selector_from's memo, by the selector's JSON (at most _SELECTORS_MAX entries: emptied when full)
_SELECTORS: dict[bytes, LabelSelector] = {}
_SELECTORS_MAX = 256


def selector_from(raw: Mapping[str, Any] | None) -> LabelSelector:
    """``label_selector_from_dict(raw)`` (raises SelectorError when invalid), parsed and validated once per
    distinct selector: the answer is remembered by ``raw``'s JSON (the same JSON is the same selector, and a
    LabelSelector never changes); an invalid selector is never remembered, so it raises every time."""
    try:
        key = _dumps(raw)
    except TypeError:  # not JSON (no owner from the API server holds such a selector)
        return label_selector_from_dict(raw)
    found = _SELECTORS.get(key)
    if found is None:
        found = label_selector_from_dict(raw)
        if len(_SELECTORS) >= _SELECTORS_MAX:
            _SELECTORS.clear()
        _SELECTORS[key] = found
    return found


def owner_selector(owner: Obj) -> LabelSelector:
    """The owner's ``spec.selector`` (raises SelectorError when invalid)."""
    return selector_from(owner["spec"].get("selector"))


def valid_selector(owner: Obj) -> LabelSelector | None:
    """The owner's selector, or None (logged) when it is invalid: kube syncs nothing for such an owner."""
    try:
        return owner_selector(owner)
    except SelectorError as err:
        meta = owner["metadata"]
        log.warning("%s %s/%s has an invalid selector: %s", owner.get("kind"), meta.get("namespace"),
                    meta.get("name"), err)
        return None


def controller_of(obj: Obj) -> Mapping[str, Any] | None:
    """The ownerReference with ``controller: true``, if any (``metav1.GetControllerOf``)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def controller_ref(owner: Obj) -> dict[str, Any]:
    """``metav1.NewControllerRef`` to ``owner`` (its own apiVersion and kind): controller and
    blockOwnerDeletion set."""
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def is_controlled_by(obj: Obj, owner: Obj) -> bool:
    ref = controller_of(obj)
    return ref is not None and ref.get("uid") == owner["metadata"]["uid"]


def owners_selecting(owners: Any, obj: Obj,
                     selector_of: Callable[[Obj], LabelSelector] = owner_selector) -> list[Request]:
    """The owners in ``obj``'s namespace whose selector matches its labels, as kube's ``GetPodReplicaSets``,
    ``getDeploymentsForReplicaSet`` and ``get<Kind>sForPod`` find them: an object without labels matches none,
    nor does an owner whose selector is empty (it would select everything) or invalid. ``owners`` is the
    owners' informer."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    if not labels:
        return []
    out = []
    for owner in owners.lister().namespaced(meta.get("namespace") or "").list():
        try:
            selector = selector_of(owner)
        except SelectorError:
            continue
        if not selector.empty() and selector.matches(labels):
            out.append(Request(owner["metadata"]["namespace"], owner["metadata"]["name"]))
    return out


def is_orphan(obj: Obj) -> bool:
    """No controller reference: the ``accepts`` of an :func:`orphan_mapper` watch (a controlled object maps to
    nothing there), so that the handler is handed orphans only, and an object whose controller reference goes."""
    return controller_of(obj) is None


def orphan_mapper(owners: Any, owner_selector: Callable[[Obj], LabelSelector]) -> Callable[[Obj], list[Request]]:
    """Map an orphan (no controller reference) to :func:`owners_selecting` it; a controlled object maps to
    nothing (``owns`` handles it). ``owners`` is the owners' informer. Watch with ``accepts=is_orphan``."""

    def map_orphan(obj: Obj) -> list[Request]:
        return [] if controller_of(obj) is not None else owners_selecting(owners, obj, owner_selector)

    return map_orphan


class RefManager:
    """Claims the objects of ``resource`` for ``owner`` (see the module docstring)."""

    def __init__(self, client: Any, owner: Obj, resource: str, selector: LabelSelector,
                 match: Callable[[Obj], bool] | None = None) -> None:
        self.client, self.owner, self.resource, self.selector = client, owner, resource, selector
        self.match = match or (lambda _obj: True)
        self._can_adopt: bool | None = None

    def _matches(self, obj: Obj) -> bool:
        return self.selector.matches(obj["metadata"].get("labels") or {}) and self.match(obj)

    async def claim(self, objects: Iterable[Obj]) -> list[Obj]:
        """The objects the owner controls once orphans are adopted and mismatches released."""
        claimed = []
        for obj in objects:
            if await self._claim_one(obj):
                claimed.append(obj)
        return claimed

    async def _claim_one(self, obj: Obj) -> bool:
        ref = controller_of(obj)
        if ref is not None:
            if ref.get("uid") != self.owner["metadata"]["uid"]:
                return False
            if self._matches(obj):
                return True
            if not is_being_deleted(self.owner):
                await self._release(obj)
            return False
        if is_being_deleted(self.owner) or not self._matches(obj) or is_being_deleted(obj):
            return False
        if obj["metadata"].get("namespace") != self.owner["metadata"].get("namespace"):
            return False
        return await self._adopt(obj)

    async def _owner_still_adoptable(self) -> bool:
        if self._can_adopt is None:
            meta = self.owner["metadata"]
            try:
                fresh = await self.client.api_client.get(f"{self.owner['kind'].lower()}s", meta["name"],
                                                         namespace=meta["namespace"])
            except NotFound:
                fresh = None
            self._can_adopt = (fresh is not None and fresh["metadata"]["uid"] == meta["uid"]
                               and not is_being_deleted(fresh))
        return self._can_adopt

    async def _adopt(self, obj: Obj) -> bool:
        if not await self._owner_still_adoptable():
            return False
        body = {"metadata": {"ownerReferences": [controller_ref(self.owner)], "uid": obj["metadata"]["uid"]}}
        return await self._patch_refs(obj, body)

    async def _release(self, obj: Obj) -> None:
        refs = [{"$patch": "delete", "uid": self.owner["metadata"]["uid"]}]
        await self._patch_refs(obj, {"metadata": {"ownerReferences": refs, "uid": obj["metadata"]["uid"]}})

    async def _patch_refs(self, obj: Obj, body: Mapping[str, Any]) -> bool:
        """A strategic-merge patch of ``ownerReferences`` guarded by the object's uid; False if it is gone."""
        meta = obj["metadata"]
        with contextlib.suppress(NotFound):
            await self.client.patch(self.resource, meta["name"], body, "strategic", namespace=meta.get("namespace"))
            return True
        return False


__all__ = ["RefManager", "controller_of", "controller_ref", "is_controlled_by", "is_orphan", "orphan_mapper",
           "owners_selecting"]
