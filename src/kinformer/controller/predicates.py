"""Event filters for controllers (controller-runtime's predicate package).

A predicate decides, per event, whether the controller enqueues the object. Every predicate has
``create(obj)``, ``update(old, new, is_resync)``, ``delete(obj)`` and ``generic(obj)``; compose
them with ``&``, ``|`` and ``~`` (or :func:`and_`, :func:`or_`, :func:`not_`).

Resyncs are level-triggered requests to look again: the *change* predicates
(:class:`GenerationChanged`, :class:`ResourceVersionChanged`, :class:`LabelsChanged`,
:class:`AnnotationsChanged`) let a resync through even though nothing changed, so a periodic
resync always reaches the reconciler. Filters on the object itself (:class:`LabelSelectorPredicate`,
:class:`Funcs`) apply to resyncs like to any update.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kinformer.selectors import LabelSelector, label_selector_from_dict, parse_label_selector

Obj = Mapping[str, Any]


def _meta(obj: Any) -> Mapping[str, Any]:
    obj = getattr(obj, "obj", obj)  # a DeletedFinalStateUnknown tombstone carries the last object
    return (obj or {}).get("metadata") or {}


class Predicate:
    """Accepts every event; subclasses override what they filter."""

    def create(self, obj: Obj) -> bool:
        return True

    def update(self, old: Obj, new: Obj, is_resync: bool = False) -> bool:
        return True

    def delete(self, obj: Obj) -> bool:
        return True

    def generic(self, obj: Obj) -> bool:
        return True

    def __and__(self, other: Predicate) -> Predicate:
        return And(self, other)

    def __or__(self, other: Predicate) -> Predicate:
        return Or(self, other)

    def __invert__(self) -> Predicate:
        return Not(self)


class Funcs(Predicate):
    """A predicate from optional functions; a missing function accepts."""

    def __init__(self, create: Callable[[Obj], bool] | None = None,
                 update: Callable[[Obj, Obj], bool] | None = None,
                 delete: Callable[[Obj], bool] | None = None,
                 generic: Callable[[Obj], bool] | None = None) -> None:
        self._create, self._update, self._delete, self._generic = create, update, delete, generic

    def create(self, obj: Obj) -> bool:
        return self._create is None or bool(self._create(obj))

    def update(self, old: Obj, new: Obj, is_resync: bool = False) -> bool:
        return self._update is None or bool(self._update(old, new))

    def delete(self, obj: Obj) -> bool:
        return self._delete is None or bool(self._delete(obj))

    def generic(self, obj: Obj) -> bool:
        return self._generic is None or bool(self._generic(obj))


class _ChangedPredicate(Predicate):
    """Passes updates whose ``_value`` differs between old and new, and every resync."""

    def _value(self, obj: Obj) -> Any:
        raise NotImplementedError

    def update(self, old: Obj, new: Obj, is_resync: bool = False) -> bool:
        if is_resync:
            return True
        if old is None or new is None:
            return False
        return self._value(old) != self._value(new)


class GenerationChanged(_ChangedPredicate):
    """Updates that changed ``metadata.generation`` (spec changes), plus resyncs."""

    def _value(self, obj: Obj) -> Any:
        return _meta(obj).get("generation")


class ResourceVersionChanged(_ChangedPredicate):
    """Updates that changed ``metadata.resourceVersion``, plus resyncs."""

    def _value(self, obj: Obj) -> Any:
        return _meta(obj).get("resourceVersion")


class LabelsChanged(_ChangedPredicate):
    def _value(self, obj: Obj) -> Any:
        return dict(_meta(obj).get("labels") or {})


class AnnotationsChanged(_ChangedPredicate):
    def _value(self, obj: Obj) -> Any:
        return dict(_meta(obj).get("annotations") or {})


class LabelSelectorPredicate(Predicate):
    """Events whose object matches a label selector (string, LabelSelector or metav1.LabelSelector dict)."""

    def __init__(self, selector: str | LabelSelector | Mapping[str, Any]) -> None:
        if isinstance(selector, str):
            selector = parse_label_selector(selector)
        elif isinstance(selector, Mapping):
            selector = label_selector_from_dict(selector)
        self.selector = selector

    def _ok(self, obj: Obj) -> bool:
        return self.selector.matches(_meta(obj).get("labels") or {})

    def create(self, obj: Obj) -> bool:
        return self._ok(obj)

    def update(self, old: Obj, new: Obj, is_resync: bool = False) -> bool:
        return self._ok(new)

    def delete(self, obj: Obj) -> bool:
        return self._ok(obj)

    def generic(self, obj: Obj) -> bool:
        return self._ok(obj)


class _Combined(Predicate):
    def __init__(self, *preds: Predicate) -> None:
        self.preds = preds


class And(_Combined):
    def create(self, obj: Obj) -> bool:
        return all(p.create(obj) for p in self.preds)

    def update(self, old: Obj, new: Obj, is_resync: bool = False) -> bool:
        return all(p.update(old, new, is_resync) for p in self.preds)

    def delete(self, obj: Obj) -> bool:
        return all(p.delete(obj) for p in self.preds)

    def generic(self, obj: Obj) -> bool:
        return all(p.generic(obj) for p in self.preds)


class Or(_Combined):
    def create(self, obj: Obj) -> bool:
        return any(p.create(obj) for p in self.preds)

    def update(self, old: Obj, new: Obj, is_resync: bool = False) -> bool:
        return any(p.update(old, new, is_resync) for p in self.preds)

    def delete(self, obj: Obj) -> bool:
        return any(p.delete(obj) for p in self.preds)

    def generic(self, obj: Obj) -> bool:
        return any(p.generic(obj) for p in self.preds)


class Not(Predicate):
    def __init__(self, pred: Predicate) -> None:
        self.pred = pred

    def create(self, obj: Obj) -> bool:
        return not self.pred.create(obj)

    def update(self, old: Obj, new: Obj, is_resync: bool = False) -> bool:
        return not self.pred.update(old, new, is_resync)

    def delete(self, obj: Obj) -> bool:
        return not self.pred.delete(obj)

    def generic(self, obj: Obj) -> bool:
        return not self.pred.generic(obj)


def and_(*preds: Predicate) -> Predicate:
    return And(*preds)


def or_(*preds: Predicate) -> Predicate:
    return Or(*preds)


def not_(pred: Predicate) -> Predicate:
    return Not(pred)
