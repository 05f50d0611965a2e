"""Kubernetes Status causes (``{"reason", "message", "field"}``) with kube-apiserver's message texts."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["Cause", "duplicate", "invalid", "invalid_message", "json_type", "not_supported", "required", "too_long",
           "type_invalid"]

Cause = dict[str, str]

def _render(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def invalid(field: str, value: Any, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "message": f"Invalid value: {_render(value)}: {detail}", "field": field}


def required(field: str, detail: str = "") -> Cause:
    return {"reason": "FieldValueRequired", "message": "Required value" + (f": {detail}" if detail else ""),
            "field": field}


def not_supported(field: str, value: Any, supported: list[Any]) -> Cause:
    valid = ", ".join(_render(v) for v in supported)
    return {"reason": "FieldValueNotSupported", "message": f"Unsupported value: {_render(value)}: supported values: "
            f"{valid}", "field": field}


def too_long(field: str, limit: int, unit: str = "bytes") -> Cause:
    return {"reason": "FieldValueTooLong", "message": f"Too long: may not be more than {limit} {unit}", "field": field}


def duplicate(field: str, value: Any) -> Cause:
    return {"reason": "FieldValueDuplicate", "message": f"Duplicate value: {_render(value)}", "field": field}


def type_invalid(field: str, value: Any, expected: str) -> Cause:
    actual = _render(json_type(value))
    return {"reason": "FieldValueTypeInvalid", "message": f"Invalid value: {actual}: {field or '<root>'} in "
            f"body must be of type {expected}: {actual}", "field": field}


def invalid_message(kind: str, name: str, causes: list[Cause]) -> str:
    """The Status message of a 422 answer: ``Kind "name" is invalid: field: message, ...``."""
    parts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    if len(parts) == 1:
        return f'{kind} "{name}" is invalid: {parts[0]}'
    return f'{kind} "{name}" is invalid: [{", ".join(parts)}]'

def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
