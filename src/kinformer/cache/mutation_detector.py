"""The cache mutation detector (client-go's mutation_detector.go): a debug aid that finds cached objects
changed in place.

Invariant: for every recorded key it holds the object as cached and a plain deep copy taken when it was
cached; a key is mutated when the object no longer equals its copy.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kinformer.errors import KinformerError

__all__ = ["CacheMutationError", "MutationDetector"]


class CacheMutationError(KinformerError, RuntimeError):
    """A cached object was modified in place (found by the mutation detector)."""


class MutationDetector:
    """Keeps a plain deep copy of every cached object and reports objects changed in place."""

    __slots__ = ("copies", "raise_on_mutation")

    def __init__(self, raise_on_mutation: bool) -> None:
        self.copies: dict[str, tuple[Any, Any]] = {}
        self.raise_on_mutation = raise_on_mutation

    def record(self, key: str, obj: Any) -> None:
        self.copies[key] = (obj, _plain(obj))

    def forget(self, key: str) -> None:
        self.copies.pop(key, None)

    def mutated(self) -> list[str]:
        """Keys of recorded objects that differ from their copy, sorted."""
        return sorted(k for k, (obj, snapshot) in list(self.copies.items()) if _plain(obj) != snapshot)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return copy.copy(value)
