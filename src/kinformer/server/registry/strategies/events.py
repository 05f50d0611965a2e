"""The rules kube-apiserver 1.32 holds an Event created through events.k8s.io/v1 to (ValidateEventCreate with
that request version, ``pkg/apis/core/validation/events.go``); core/v1 creates keep no such rules.

The object is checked as the client sent it (events.k8s.io/v1 field names), the causes named by the core fields
kube reports: ``eventTime`` required; ``type`` Normal or Warning; the deprecated fields (``firstTimestamp``,
``lastTimestamp``, ``count``, ``source``) unset; a ``series`` with a count of at least 2 and a
``lastObservedTime``; ``reportingController`` a qualified name, ``reportingInstance``, ``action`` and ``reason``
set and at most 128 characters, ``message`` (the note) at most 1024; without a ``regarding`` namespace, the
Event lives in ``default`` or ``kube-system``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from ....names import is_qualified_name
from .base import Cause, invalid, required

__all__ = ["LENGTH_LIMITS", "v1_create_causes"]

# events.k8s.io/v1 field -> (the core field kube names, its length limit)
LENGTH_LIMITS = {"reportingInstance": ("reportingInstance", 128), "action": ("action", 128),
                 "reason": ("reason", 128), "note": ("message", 1024)}
_DEPRECATED = (("deprecatedFirstTimestamp", "firstTimestamp"), ("deprecatedLastTimestamp", "lastTimestamp"),
               ("deprecatedCount", "count"))


def v1_create_causes(event: Mapping[str, Any], namespace: str) -> list[Cause]:
    """Why kube refuses to create ``event`` (an events.k8s.io/v1 Event) in ``namespace`` through events.k8s.io/v1;
    [] if it does not."""
    causes: list[Cause] = []
    series = event.get("series")
    if isinstance(series, Mapping):
        if not isinstance(series.get("count"), int) or series["count"] < 2:
            causes.append(invalid("series.count", "", "should be at least 2"))
        if not series.get("lastObservedTime"):
            causes.append(required("series.lastObservedTime"))
    if not event.get("eventTime"):
        causes.append(required("eventTime"))
    else:
        causes += _reporting_causes(event, namespace)
    if event.get("type") not in ("Normal", "Warning"):
        causes.append(invalid("type", "", f"has invalid value: {event.get('type') or ''}"))
    for field, core in _DEPRECATED:
        if event.get(field):
            causes.append(invalid(core, "", "needs to be unset"))
    source = event.get("deprecatedSource")
    if isinstance(source, Mapping) and (source.get("component") or source.get("host")):
        causes.append(invalid("source", "", "needs to be unset"))
    return causes


def _reporting_causes(event: Mapping[str, Any], namespace: str) -> list[Cause]:
    """legacyValidateEvent's rules for an Event with an ``eventTime``."""
    causes: list[Cause] = []
    regarding = event.get("regarding")
    if not (regarding or {}).get("namespace") and namespace not in ("default", "kube-system"):
        causes.append(invalid("involvedObject.namespace", "", "does not match event.namespace"))
    controller = event.get("reportingController") or ""
    if not controller:
        causes.append(required("reportingController"))
    causes += [invalid("reportingController", controller, msg) for msg in _qualified_name_errors(str(controller))]
    for field, (core, limit) in LENGTH_LIMITS.items():
        value = str(event.get(field) or "")
        if not value and field != "note":
            causes.append(required(core))
        if len(value) > limit:
            causes.append(invalid(core, "", f"can have at most {limit} characters"))
    return causes


@functools.lru_cache(maxsize=1024)
def _qualified_name_errors(value: str) -> tuple[str, ...]:
    """:func:`is_qualified_name` of a reporting controller, remembered: a cluster's events name few of them, and the
    check of a name without a prefix costs several times its name part's (the prefix's pattern is tried first)."""
    return tuple(is_qualified_name(value))
