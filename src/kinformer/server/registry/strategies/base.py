"""The base of the per-kind strategies: defaulting, status reset and ``metadata.generation`` as kube does them.

A :class:`KindStrategy` implements the write path's strategy hooks (``prepare_for_create``,
``prepare_for_update``, ``validate``, ``validate_update``, ``returns_deleted_object``) for one built-in
kind, the way kube-apiserver 1.32's registry strategy of that kind behaves:

* every decoded object is defaulted (:func:`~kinformer.server.registry.defaults.set_defaults`) before the rules;
* ``metadata.generation`` exists only on kinds whose strategy keeps it (:attr:`KindStrategy.generation`):
  1 at create, +1 when the desired state changes (``spec``, or everything but metadata and status for
  kinds without a spec). ConfigMaps, Secrets, Pods, Services, Namespaces, ... carry none;
* a create cannot set ``status`` on kinds with a status subresource: it starts as
  :meth:`KindStrategy.initial_status` (Go serialises an empty status struct as ``{}`` plus its
  non-omitempty counters, e.g. ``replicas: 0``).

Subclasses override the ``create``/``update``/``causes``/``update_causes`` hooks. A create runs in two
steps, :meth:`KindStrategy.default` then :meth:`KindStrategy.prepare_defaulted`, so that the write path can
record the creator's managedFields in between, as kube-apiserver does (defaults are owned, what
PrepareForCreate and admission add is not); an update likewise runs :meth:`KindStrategy.default` then
:meth:`KindStrategy.prepare_defaulted_update`. Hooks mutate only the
object they are given and do no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..defaults import set_defaults

Cause = dict[str, Any]

_NOT_DESIRED_STATE = ("metadata", "status", "kind", "apiVersion")


def desired_state(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What a generation counts: the spec, or (kinds without one) everything but metadata and status."""
    if "spec" in obj:
        return {"spec": obj.get("spec")}
    return {k: v for k, v in obj.items() if k not in _NOT_DESIRED_STATE}


def render(value: Any) -> str:
    """A value as kube's field errors quote it (Go's %#v for strings and string lists, else plain)."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "[]string{" + ", ".join(render(v) for v in value) + "}"
    if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
        return "map[string]string{" + ", ".join(f"{render(k)}:{render(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def invalid(field: str, value: Any, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {render(value)}: {detail}"}


def required(field: str, detail: str = "") -> Cause:
    return {"reason": "FieldValueRequired", "field": field,
            "message": f"Required value: {detail}" if detail else "Required value"}


def forbidden(field: str, detail: str) -> Cause:
    return {"reason": "FieldValueForbidden", "field": field, "message": f"Forbidden: {detail}"}


def not_supported(field: str, value: Any, supported: list[str]) -> Cause:
    values = ", ".join(f'"{v}"' for v in supported)
    return {"reason": "FieldValueNotSupported", "field": field,
            "message": f"Unsupported value: {render(value)}: supported values: {values}"}


def immutable(field: str, new: Any, old: Any) -> list[Cause]:
    """kube's ValidateImmutableField: one cause when the value changed."""
    return [] if new == old else [invalid(field, new, "field is immutable")]


def get_path(obj: Mapping[str, Any], *path: str) -> Any:
    cur: Any = obj
    for part in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


class KindStrategy:
    """One built-in kind's write rules (see the module docstring); the plain form has no generation."""

    #: the kind keeps ``metadata.generation``
    generation = False
    #: DELETE answers the deleted object rather than a ``Success`` Status
    returns_deleted_object = False
    #: create starts ``status`` afresh (kinds with a status subresource)
    resets_status = False

    def initial_status(self) -> dict[str, Any] | None:
        """The status a new object starts with when :attr:`resets_status` (None: no status at all)."""
        return {}

    # -- the write path's hooks

    def prepare_for_create(self, info: Any, obj: dict[str, Any]) -> None:
        self.default(info, obj)
        self.prepare_defaulted(info, obj)

    def default(self, info: Any, obj: dict[str, Any]) -> None:
        """The kind's defaults (kube-apiserver applies them when it decodes a request body)."""
        set_defaults(info.group, info.version, info.kind, obj)

    def prepare_defaulted(self, info: Any, obj: dict[str, Any]) -> None:
        """:meth:`prepare_for_create` after :meth:`default`: generation, status reset, the ``create`` hook.

        In kube-apiserver this is PrepareForCreate and admission, which run after the creating manager's
        managedFields entry was recorded: nothing set here is owned by the creator.
        """
        meta = obj.setdefault("metadata", {})
        if self.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if self.resets_status:
            status = self.initial_status()
            if status is None:
                obj.pop("status", None)
            else:
                obj["status"] = status
        self.create(obj)

    def prepare_for_update(self, info: Any, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        self.default(info, obj)
        self.prepare_defaulted_update(info, obj, old)

    def prepare_defaulted_update(self, info: Any, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        """:meth:`prepare_for_update` after :meth:`default`: generation and the ``update`` hook (kube's
        PrepareForUpdate, after the writer's managedFields were recorded)."""
        meta = obj.setdefault("metadata", {})
        old_gen = (old.get("metadata") or {}).get("generation")
        if self.generation:
            gen = old_gen if isinstance(old_gen, int) and not isinstance(old_gen, bool) else 1
            meta["generation"] = gen + 1 if self.generation_changed(obj, old) else gen
        elif old_gen is None:
            meta.pop("generation", None)
        self.update(obj, old)

    def validate(self, info: Any, obj: Mapping[str, Any]) -> list[Cause]:
        return self.causes(obj)

    def validate_update(self, info: Any, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        return self.causes(obj) + self.update_causes(obj, old)

    def validate_status_update(self, info: Any, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        return self.status_causes(obj, old)

    # -- what subclasses override

    def generation_changed(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
        return desired_state(obj) != desired_state(old)

    def create(self, obj: dict[str, Any]) -> None:
        """Kind-specific preparation of a new object (after defaults, status and generation)."""

    def update(self, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        """Kind-specific preparation of an update of the main resource."""

    def causes(self, obj: Mapping[str, Any]) -> list[Cause]:
        """Kind-specific validation of an object, new or updated."""
        return []

    def update_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        """Kind-specific validation of an update (immutable fields)."""
        return []

    def status_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        """Kind-specific validation of a ``status`` write: its status rules (none unless a kind has some)."""
        return []


class ReturnedOnDeleteMixin:
    """Kinds whose DELETE answers the object (kube's ReturnDeletedObject)."""

    returns_deleted_object = True


class GenerationStrategy(KindStrategy):
    """A kind with a status subresource whose desired state is counted by ``metadata.generation``."""

    generation = True
    resets_status = True


class CustomResourceStrategy(KindStrategy):
    """Custom resources: always a generation; status is desired state unless it is a subresource."""

    generation = True

    def default(self, info: Any, obj: dict[str, Any]) -> None:
        """Custom resources are defaulted from their schema before the strategy runs."""

    def prepare_defaulted(self, info: Any, obj: dict[str, Any]) -> None:
        obj.setdefault("metadata", {})["generation"] = 1
        if info.has_status:
            obj.pop("status", None)

    def prepare_defaulted_update(self, info: Any, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        skip = _NOT_DESIRED_STATE if info.has_status else ("metadata", "kind", "apiVersion")
        changed = {k: v for k, v in obj.items() if k not in skip} != {k: v for k, v in old.items() if k not in skip}
        gen = (old.get("metadata") or {}).get("generation") or 1
        obj.setdefault("metadata", {})["generation"] = gen + 1 if changed else gen
