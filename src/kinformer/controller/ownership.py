"""Owner references (controller-runtime ``controllerutil.SetControllerReference`` / ``SetOwnerReference``).

An owner reference makes the garbage collector delete ``obj`` after its owner, and lets ``owns()`` map the
object's events back to the owner. Rules carried over from controller-runtime and the API server:

* an object has at most one *controller* reference (``controller: true``); setting a second one for a
  different owner raises :class:`AlreadyOwnedError` (the reference is updated in place for the same owner);
* references are matched by owner API group, kind and name (the version may differ);
* a namespaced owner can only own objects in its own namespace, and never a cluster-scoped object.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from kinformer.errors import KinformerError

__all__ = ["AlreadyOwnedError", "set_controller_reference", "set_owner_reference"]


class AlreadyOwnedError(KinformerError, ValueError):
    """``obj`` already has a controller reference to another owner."""

    def __init__(self, obj: Mapping[str, Any], existing: Mapping[str, Any], owner: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        super().__init__(
            f"{obj.get('kind') or 'object'} {meta.get('namespace', '')}/{meta.get('name', '')} is already "
            f"controlled by {existing.get('kind')} {existing.get('name')!r} (uid {existing.get('uid')}); "
            f"cannot make {owner.get('kind')} {owner.get('name')!r} its controller as well")
        self.existing = dict(existing)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    meta = owner.get("metadata") or {}
    ref = {"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"), "name": meta.get("name"),
           "uid": meta.get("uid")}
    missing = [k for k, v in ref.items() if not v]
    if missing:
        raise ValueError(f"the owner needs {', '.join(missing)} to be referenced (use the object the server "
                         "returned, not a skeleton)")
    return ref


def _same_owner(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (_group(a.get("apiVersion", "")) == _group(b.get("apiVersion", "")) and a.get("kind") == b.get("kind")
            and a.get("name") == b.get("name"))


def _check_scope(owner: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
    owner_ns = (owner.get("metadata") or {}).get("namespace") or ""
    obj_ns = (obj.get("metadata") or {}).get("namespace") or ""
    if owner_ns and owner_ns != obj_ns:
        where = f"namespace {obj_ns!r}" if obj_ns else "a cluster-scoped object"
        raise ValueError(f"a namespaced owner (in {owner_ns!r}) cannot own {where}: cross-namespace owner "
                         "references are disallowed")


def _upsert(obj: MutableMapping[str, Any], ref: dict[str, Any]) -> None:
    if not isinstance(obj, MutableMapping):
        raise TypeError("owner references can only be set on a mutable dict (use obj.to_dict())")
    meta = obj.setdefault("metadata", {})
    refs: list[dict[str, Any]] = [dict(r) for r in meta.get("ownerReferences") or ()]
    for i, existing in enumerate(refs):
        if _same_owner(existing, ref):
            refs[i] = ref
            break
    else:
        refs.append(ref)
    meta["ownerReferences"] = refs


def set_owner_reference(owner: Mapping[str, Any], obj: MutableMapping[str, Any]) -> None:
    """Add (or update) a plain, non-controller owner reference to ``owner`` in ``obj``."""
    _check_scope(owner, obj)
    _upsert(obj, _reference(owner))


def set_controller_reference(owner: Mapping[str, Any], obj: MutableMapping[str, Any], *,
                             block_owner_deletion: bool = True) -> None:
    """Make ``owner`` the controller of ``obj`` (``controller: true``, ``blockOwnerDeletion``).

    Raises :class:`AlreadyOwnedError` when another owner already controls ``obj``; ValueError for a
    cross-namespace or namespaced-owns-cluster-scoped reference. ``owner`` must carry apiVersion, kind,
    name and uid (an object read from the server or the cache).
    """
    ref = _reference(owner)
    ref["controller"] = True
    ref["blockOwnerDeletion"] = block_owner_deletion
    _check_scope(owner, obj)
    for existing in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if existing.get("controller") and not _same_owner(existing, ref):
            raise AlreadyOwnedError(obj, existing, ref)
    _upsert(obj, ref)
