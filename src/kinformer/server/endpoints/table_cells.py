"""Cell formatting for server-side tables: ages and timestamps as kubectl prints them, labels, selectors,
and tolerant readers of object fields (a malformed object prints empty cells, never fails a request)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

from ...errors import SelectorError
from ...selectors import label_selector_from_dict
from ..machinery.quantity import canonical_quantity

__all__ = [
    "NONE",
    "UNKNOWN",
    "UNSET",
    "age",
    "age_of",
    "as_int",
    "as_list",
    "as_map",
    "bool_text",
    "containers_cells",
    "field",
    "find_condition",
    "format_labels",
    "format_selector",
    "human_duration",
    "int_or_string",
    "joined_with_more",
    "load_balancer_ingress",
    "mappings",
    "name_of",
    "parse_time",
    "quantity",
    "rfc3339",
    "selector_string",
    "text",
]

NONE = "<none>"
UNKNOWN = "<unknown>"
UNSET = "<unset>"


def parse_time(value: Any) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp (``Time`` or ``MicroTime``); ``None`` when absent or invalid."""
    if not isinstance(value, str) or not value:
        return None
    try:
        ts = _dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=_dt.UTC)
    return ts.timestamp()


def human_duration(seconds: float) -> str:
    """A duration the way kubectl prints ages: ``45s``, ``3m20s``, ``25m``, ``5h10m``, ``3d4h``, ``2y30d``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        rest = days % 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{years}y"


def age(timestamp: Any, now: float) -> str:
    """The age of an RFC 3339 ``timestamp`` at ``now``; ``<unknown>`` when it is missing or malformed."""
    ts = parse_time(timestamp)
    return UNKNOWN if ts is None else human_duration(now - ts)


def rfc3339(timestamp: Any) -> str:
    ts = parse_time(timestamp)
    if ts is None:
        return ""
    return _dt.datetime.fromtimestamp(int(ts), _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_labels(labels: Any) -> str:
    """``k=v,...`` sorted by key, ``<none>`` when empty (kube's labels.FormatLabels)."""
    if not isinstance(labels, Mapping) or not labels:
        return NONE
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def selector_string(selector: Any) -> str:
    """A metav1.LabelSelector as a selector string: ``""`` when unset or empty, ``<invalid>`` when malformed."""
    if not isinstance(selector, Mapping):
        return ""
    try:
        return str(label_selector_from_dict(selector))
    except (SelectorError, AttributeError, TypeError, ValueError):  # malformed parts of the selector
        return "<invalid>"


def format_selector(selector: Any) -> str:
    """metav1.FormatLabelSelector: the selector string, ``<none>`` when it is empty, ``<error>`` when malformed."""
    if not isinstance(selector, Mapping):
        return NONE
    try:
        text = str(label_selector_from_dict(selector))
    except (SelectorError, AttributeError, TypeError, ValueError):  # malformed parts of the selector
        return "<error>"
    return text or NONE


def field(obj: Any, *path: str) -> Any:
    cur = obj
    for part in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def as_int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return default


def as_map(value: Any) -> Mapping[str, Any]:
    """A mapping field, ``{}`` when it is absent or not a mapping."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def name_of(obj: Mapping[str, Any]) -> str:
    return str(field(obj, "metadata", "name") or "")


def age_of(obj: Mapping[str, Any], now: float) -> str:
    return age(field(obj, "metadata", "creationTimestamp"), now)


def text(value: Any) -> str:
    """A string field's cell: the value, ``""`` when unset."""
    return "" if value is None else str(value)


def bool_text(value: Any) -> str:
    """An optional bool as kube prints it: ``True`` / ``False``, ``<unset>`` when absent."""
    if isinstance(value, bool):
        return "True" if value else "False"
    return UNSET


def quantity(value: Any, missing: str = "0") -> str:
    """A resource quantity's cell in kube's canonical form (``1024Mi`` -> ``1Gi``); ``missing`` when unset."""
    if value is None or value == "":
        return missing
    canonical = canonical_quantity(value)
    return str(value) if canonical is None else canonical


def int_or_string(value: Any) -> str:
    """An IntOrString as text (``2`` or ``"50%"``)."""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def joined_with_more(items: list[str], limit: int = 3, empty: str = UNSET) -> str:
    """The first ``limit`` items comma-joined and `` + N more...``; ``empty`` when there is none."""
    shown = ",".join(items[:limit])
    if len(items) > limit:
        return f"{shown} + {len(items) - limit} more..."
    return shown or empty


def find_condition(conditions: Any, type_: str) -> Mapping[str, Any] | None:
    """The first condition of ``type_`` in a conditions list."""
    for cond in as_list(conditions):
        if isinstance(cond, Mapping) and cond.get("type") == type_:
            return cond
    return None


def mappings(value: Any) -> list[Mapping[str, Any]]:
    """The mapping items of a list field (malformed entries skipped)."""
    return [v for v in as_list(value) if isinstance(v, Mapping)]


def load_balancer_ingress(obj: Mapping[str, Any]) -> list[str]:
    """A Service's or Ingress's load balancer ingress points (IP, else hostname), sorted, without repeats."""
    found = {str(ing.get("ip") or ing.get("hostname")) for ing in mappings(field(obj, "status", "loadBalancer",
                                                                                "ingress"))
             if ing.get("ip") or ing.get("hostname")}
    return sorted(found)


def containers_cells(pod_spec: Any) -> list[str]:
    """[names, images] of a pod template's containers, comma-joined."""
    containers = [c for c in as_list(field(pod_spec, "containers")) if isinstance(c, Mapping)]
    return [",".join(str(c.get("name", "")) for c in containers), ",".join(str(c.get("image", "")) for c in containers)]
