"""Per-kind strategies of the built-in API, as kube-apiserver 1.32's registry has them.

:func:`strategy_table` maps (group, plural) to a strategy; :class:`FallbackStrategy` serves every other
resource: custom resources (generation always, status per subresource) and built-ins without
special rules (no generation; status reset at create when status is a subresource). The write path
looks strategies up per request and calls their hooks (see :mod:`.base`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..ipallocator import ServiceAllocator
from . import apps, batch, core, groups
from .base import Cause, CustomResourceStrategy, KindStrategy
from .core import StatusResetStrategy
from .pods import DEFAULT_TOLERATION_SECONDS, PodStrategy, TolerationSeconds
from .services import ServiceStrategy

__all__ = ["FallbackStrategy", "KindStrategy", "strategy_table"]


def strategy_table(allocator: ServiceAllocator | None = None,
                   default_toleration_seconds: TolerationSeconds = DEFAULT_TOLERATION_SECONDS,
                   ) -> dict[tuple[str, str], KindStrategy]:
    """Every kind with its own rules; ``allocator`` hands out Service ClusterIPs and node ports;
    ``default_toleration_seconds``: what DefaultTolerationSeconds admission gives new pods (one number, or
    (not-ready, unreachable))."""
    table: dict[tuple[str, str], KindStrategy] = {}
    table.update({("", plural): s for plural, s in core.STRATEGIES.items()})
    table[("", "pods")] = PodStrategy(default_toleration_seconds)
    table[("", "services")] = ServiceStrategy(allocator)
    table.update({("apps", plural): s for plural, s in apps.STRATEGIES.items()})
    table.update({("batch", plural): s for plural, s in batch.STRATEGIES.items()})
    table.update(groups.STRATEGIES)
    return table


class FallbackStrategy:
    """The strategy of resources without an entry in the table (see the module docstring)."""

    returns_deleted_object = False
    _custom = CustomResourceStrategy()
    _plain = KindStrategy()
    _status = StatusResetStrategy()

    def _pick(self, info: Any) -> KindStrategy:
        if not info.builtin:
            return self._custom
        return self._status if info.has_status else self._plain

    def prepare_for_create(self, info: Any, obj: dict[str, Any]) -> None:
        self._pick(info).prepare_for_create(info, obj)

    def default(self, info: Any, obj: dict[str, Any]) -> None:
        self._pick(info).default(info, obj)

    def prepare_defaulted(self, info: Any, obj: dict[str, Any]) -> None:
        self._pick(info).prepare_defaulted(info, obj)

    def prepare_for_update(self, info: Any, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        self._pick(info).prepare_for_update(info, obj, old)

    def prepare_defaulted_update(self, info: Any, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        self._pick(info).prepare_defaulted_update(info, obj, old)

    def validate(self, info: Any, obj: Mapping[str, Any]) -> list[Cause]:
        return self._pick(info).validate(info, obj)

    def validate_update(self, info: Any, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        return self._pick(info).validate_update(info, obj, old)

    def validate_status_update(self, info: Any, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        return self._pick(info).validate_status_update(info, obj, old)
