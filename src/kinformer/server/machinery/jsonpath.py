"""The JSONPath subset of CRD ``additionalPrinterColumns`` (kubectl's): fields, ``[*]``, indexes and slices,
``..`` recursion and ``[?(@.x == y)]`` filters, compiled once per column."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

__all__ = ["JSONPathError", "compile_jsonpath"]

class JSONPathError(ValueError):
    """A printer column's jsonPath that this evaluator cannot parse."""


Step = Callable[[Any], list[Any]]

_FILTER_RE = re.compile(r"""^\?\(\s*@((?:\.[^\s=!<>]+)*)\s*(?:(==|!=|<=|>=|<|>)\s*(.+?))?\s*\)$""")


def _field_step(name: str) -> Step:
    return lambda v: [v[name]] if isinstance(v, Mapping) and name in v else []


def _wildcard(v: Any) -> list[Any]:
    if isinstance(v, Mapping):
        return list(v.values())
    return list(v) if isinstance(v, list) else []


def _index_step(text: str) -> Step:
    if ":" in text:
        parts = [int(p) if p.strip() else None for p in text.split(":")[:3]]
        sl = slice(*parts)
        return lambda v: list(v[sl]) if isinstance(v, list) else []
    i = int(text)
    return lambda v: [v[i]] if isinstance(v, list) and -len(v) <= i < len(v) else []


def _literal(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _compare(left: Any, op: str, right: Any) -> bool:
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    if not isinstance(left, (int, float)) or not isinstance(right, (int, float)) or isinstance(left, bool):
        return False
    return {"<": left < right, ">": left > right, "<=": left <= right, ">=": left >= right}[op]


def _filter_step(expr: str) -> Step:
    m = _FILTER_RE.match(expr)
    if m is None:
        raise JSONPathError(f"unsupported filter: [{expr}]")
    sub = _compile_steps(m.group(1)) if m.group(1) else []
    op, rhs = m.group(2), m.group(3)
    right = _literal(rhs) if op else None

    def step(v: Any) -> list[Any]:
        out = []
        for item in _wildcard(v):
            found = _run(sub, item)
            if op is None:
                if found:
                    out.append(item)
            elif found and _compare(found[0], op, right):
                out.append(item)
        return out

    return step


def _read_name(path: str, i: int) -> tuple[str, int]:
    """A dotted field name starting at ``i`` (``\\.`` escapes a dot); returns (name, next index)."""
    buf = []
    while i < len(path) and path[i] not in ".[":
        if path[i] == "\\" and i + 1 < len(path):
            i += 1
        buf.append(path[i])
        i += 1
    return "".join(buf), i


def _bracket_step(inner: str) -> Step:
    inner = inner.strip()
    if inner == "*":
        return _wildcard
    if inner.startswith("?"):
        return _filter_step(inner)
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        return _field_step(inner[1:-1])
    try:
        return _index_step(inner)
    except ValueError:
        raise JSONPathError(f"unsupported subscript: [{inner}]") from None


def _compile_steps(path: str) -> list[Step]:
    steps: list[Step] = []
    i = 0
    while i < len(path):
        ch = path[i]
        if ch == ".":
            if path.startswith(".*", i):
                steps.append(_wildcard)
                i += 2
                continue
            name, i = _read_name(path, i + 1)
            if name:
                steps.append(_field_step(name))
        elif ch == "[":
            depth, j = 0, i
            while j < len(path):
                depth += {"[": 1, "]": -1}.get(path[j], 0)
                if depth == 0:
                    break
                j += 1
            if j >= len(path):
                raise JSONPathError(f"unclosed [ in {path!r}")
            steps.append(_bracket_step(path[i + 1:j]))
            i = j + 1
        else:
            name, i = _read_name(path, i)
            steps.append(_field_step(name))
    return steps


def _run(steps: Sequence[Step], value: Any) -> list[Any]:
    current = [value]
    for step in steps:
        nxt: list[Any] = []
        for v in current:
            nxt.extend(step(v))
        current = nxt
        if not current:
            break
    return current


def compile_jsonpath(path: str) -> Callable[[Any], list[Any]]:
    """A evaluator of the kubectl JSONPath subset used by printer columns: ``.a.b``, ``['k']``, ``[0]``,
    ``[*]``, ``[1:3]``, ``\\.``-escaped dots and ``[?(@.type=="Ready")]`` filters. Returns every match."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    text = text.removeprefix("$")
    steps = _compile_steps(text)
    return lambda obj: _run(steps, obj)
