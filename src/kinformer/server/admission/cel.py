"""CEL for admission ``matchConditions``, evaluated with cel-python (a pure-Python CEL implementation).

Variables, as kube-apiserver binds them: ``object``, ``oldObject`` (null when the operation has none) and
``request`` (the AdmissionReview request). The ``authorizer`` variable is not available here; an
expression that uses it fails to evaluate, which the caller treats as a webhook call failure.

Invariants: an expression is compiled once (a bounded cache of :data:`MAX_CACHED` programs); an expression
over :data:`MAX_EXPRESSION` characters, one that does not compile, or whose result is not a boolean is a
``ValueError`` naming the condition, never a crash.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import celpy

__all__ = ["evaluate_conditions"]

MAX_EXPRESSION = 4096
MAX_CACHED = 512

_ENV = celpy.Environment()


@functools.lru_cache(maxsize=MAX_CACHED)
def _program(expression: str) -> Any:
    return _ENV.program(_ENV.compile(expression))


def evaluate_conditions(conditions: Sequence[Mapping[str, Any]], request: Mapping[str, Any]) -> bool:
    """True when every condition holds; False as soon as one is false; ``ValueError`` when one cannot be evaluated."""
    activation = {"object": celpy.json_to_cel(request.get("object")),
                  "oldObject": celpy.json_to_cel(request.get("oldObject")),
                  "request": celpy.json_to_cel(dict(request))}
    for cond in conditions:
        name, expression = cond.get("name", ""), cond.get("expression", "")
        if not isinstance(expression, str) or len(expression) > MAX_EXPRESSION:
            raise ValueError(f"matchCondition {name!r}: expression missing or over {MAX_EXPRESSION} characters")
        try:
            result = _program(expression).evaluate(activation)
        except Exception as exc:  # cel-python raises parse and evaluation errors of several types
            raise ValueError(f"matchCondition {name!r} failed to evaluate: {exc}") from None
        if isinstance(result, Exception) or not isinstance(result, bool | celpy.celtypes.BoolType):
            raise ValueError(f"matchCondition {name!r} did not evaluate to a boolean: {result!r}")
        if not result:
            return False
    return True
