"""Per-kind write rules plugged into the generic write path, as kube-apiserver's registry strategies are.

The generic path (:class:`~kinformer.server.registry.objects.ObjectStore`) applies what every kind shares:
system metadata (uid, creationTimestamp, name generation), type and namespace checks, status and
finalize subresource separation, finalizers and graceful deletion, compare-and-swap with retries.
A :class:`Strategy` adds what differs per kind, at these points:

* create: generic system fields, then :meth:`Strategy.prepare_for_create`, then
  :meth:`Strategy.validate` (with the schema checks);
* update of the main resource (PUT, every patch type, apply, scale): the client's object merged onto
  the stored one (identity metadata and, with a status subresource, status kept; generation reset to
  the stored one), then :meth:`Strategy.prepare_for_update`, then :meth:`Strategy.validate_update`.
  Subresource writes (``status``, ``finalize``) never call ``prepare_for_update``; they still run
  ``validate_update``, except a built-in kind's ``status`` write, which runs
  :meth:`Strategy.validate_status_update` instead (kube's status strategies: the spec is the stored one, so
  only metadata and status are judged);
* delete: :attr:`Strategy.returns_deleted_object` picks what DELETE answers when the object is gone.

Invariants: hooks mutate the object they are given and never do I/O; ``validate*`` never mutate and
return Kubernetes causes (``{"reason", "field", "message"}``), which become one 422 Invalid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .resources import ResourceInfo

Cause = dict[str, Any]


class Strategy(Protocol):
    """The per-kind hooks of the write path (see the module docstring for when each runs)."""

    #: DELETE answers the deleted object (True: pods, services, ...) or a ``Success`` Status (False).
    returns_deleted_object: bool

    def prepare_for_create(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        """Normalise a new object before validation: defaults, status reset, ``metadata.generation``."""

    def prepare_for_update(self, info: ResourceInfo, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        """Normalise an update of the main resource before validation (e.g. bump generation on a spec change)."""

    def validate(self, info: ResourceInfo, obj: Mapping[str, Any]) -> list[Cause]:
        """Kind-specific causes against a new object (after the schema checks)."""
        ...

    def validate_update(self, info: ResourceInfo, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        """Kind-specific causes against an update (immutable fields and the like)."""
        ...

    def validate_status_update(self, info: ResourceInfo, obj: Mapping[str, Any],
                               old: Mapping[str, Any]) -> list[Cause]:
        """Kind-specific causes against a ``status`` write of a built-in kind (its status rules only)."""
        ...


def _generation_part(info: ResourceInfo, obj: Mapping[str, Any]) -> dict[str, Any]:
    """What a change of bumps ``metadata.generation``: all but metadata (and status when it is a subresource).

    A custom resource without the status subresource counts status as part of its desired state (kube's
    customResourceStrategy); built-ins keep status out.
    """
    skip = ("metadata", "status", "kind", "apiVersion") if info.builtin or info.has_status else \
        ("metadata", "kind", "apiVersion")
    return {k: v for k, v in obj.items() if k not in skip}


class DefaultStrategy:
    """The generic rules: every object carries ``metadata.generation``, bumped when its desired state changes.

    Subclass it and override what a kind does differently.
    """

    returns_deleted_object = False

    def prepare_for_create(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        obj["metadata"]["generation"] = 1

    def prepare_for_update(self, info: ResourceInfo, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        if _generation_part(info, old) != _generation_part(info, obj):
            meta = obj["metadata"]
            meta["generation"] = meta.get("generation", 1) + 1

    def validate(self, info: ResourceInfo, obj: Mapping[str, Any]) -> list[Cause]:
        return []

    def validate_update(self, info: ResourceInfo, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        return []

    def validate_status_update(self, info: ResourceInfo, obj: Mapping[str, Any],
                               old: Mapping[str, Any]) -> list[Cause]:
        return []


DEFAULT_STRATEGY = DefaultStrategy()


class StrategyRegistry:
    """The strategy of each resource, by (API group, plural); :data:`DEFAULT_STRATEGY` for the rest."""

    def __init__(self, default: Strategy = DEFAULT_STRATEGY) -> None:
        self.default = default
        self._by_resource: dict[tuple[str, str], Strategy] = {}

    def register(self, group: str, plural: str, strategy: Strategy) -> None:
        """Use ``strategy`` for every version of ``plural`` in ``group`` ("" for the core group)."""
        self._by_resource[(group, plural)] = strategy

    def get(self, info: ResourceInfo) -> Strategy:
        return self._by_resource.get((info.group, info.plural), self.default)
