"""kube 1.32's pkg/controller/deployment/util: pure functions over Deployment and ReplicaSet dicts.

* the pod-template hash: FNV-32a over the template (kube hashes its Go struct dump, here its canonical
  JSON) and the collisionCount (4 bytes, little-endian), printed in decimal and safe-encoded
  (``rand.SafeEncodeString``), so names look like kube's (``web-5d8b9c7f6``) without being byte-identical;
* maxSurge / maxUnavailable: an int or a percent of replicas, surge rounded up, unavailable down, both 0
  -> unavailable 1 (``ResolveFenceposts``), maxUnavailable capped at replicas;
* the revision annotations (revision, revision-history capped at 2000 characters, desired-replicas,
  max-replicas) and which Deployment annotations are copied to its ReplicaSets;
* conditions (Available, Progressing, ReplicaFailure) with kube's reasons, messages and time rules
  (``lastTransitionTime`` kept while the status stays, nothing changes for the same status and reason);
* the orderings (by creation time, by revision, by size) and proportional scaling's fractions.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from functools import cmp_to_key
from typing import Any, TypeVar

from kinformer.controller.conditions import find_condition, remove_condition

from ..metatime import parse_time, rfc3339
from .expectations import Obj, meta
from .intstr import scaled_value

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
ROLLBACK_TO = "deprecated.deployment.rollback.to"
MAX_REVISION_HISTORY_CHARS = 2000
MAX_INT32 = 2**31 - 1
_SKIP_COPY = frozenset({LAST_APPLIED, REVISION, REVISION_HISTORY, DESIRED_REPLICAS, MAX_REPLICAS, ROLLBACK_TO})

# condition reasons (deployment/util/deployment_util.go)
NEW_RS_CREATED = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
RS_UPDATED = "ReplicaSetUpdated"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
FAILED_RS_CREATE = "FailedRSCreate"
MIN_AVAILABLE = "MinimumReplicasAvailable"
MIN_UNAVAILABLE = "MinimumReplicasUnavailable"

#: a ReplicaSet: a cached read-only one or a mutable copy (functions return what they were given).
_RS = TypeVar("_RS", bound=Mapping[str, Any])

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


# -- hashing and template equality -------------------------------------------------------------------------

def _fnv32a(data: bytes, h: int = 0x811C9DC5) -> int:
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def safe_encode(text: str) -> str:
    """``rand.SafeEncodeString``: each character mapped into an alphabet without vowels or look-alikes."""
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in text)


def compute_hash(template: Mapping[str, Any], collision_count: int | None) -> str:
    """The ``pod-template-hash`` of ``template`` (``controller.ComputeHash``)."""
    h = _fnv32a(json.dumps(_normalized(template), sort_keys=True, separators=(",", ":")).encode())
    if collision_count is not None:
        h = _fnv32a((collision_count & 0xFFFFFFFF).to_bytes(4, "little"), h)
    return safe_encode(str(h))


def _normalized(value: Any) -> Any:
    """Empty maps and lists dropped (apimachinery's semantic equality treats nil and empty alike)."""
    if isinstance(value, Mapping):
        out = {k: _normalized(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in ({}, [], None)}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def without_hash(template: Mapping[str, Any]) -> Any:
    t = copy.deepcopy(dict(template))
    labels = (t.get("metadata") or {}).get("labels")
    if labels:
        labels.pop(HASH_LABEL, None)
    return _normalized(t)


def equal_ignore_hash(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Templates equal but for the pod-template-hash label (``EqualIgnoreHash``)."""
    return bool(without_hash(a) == without_hash(b))


# -- accessors -----------------------------------------------------------------------------------------------

def replicas(obj: Obj) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def status_of(obj: Obj, field: str) -> int:
    return int((obj.get("status") or {}).get(field) or 0)


def annotations_of(obj: Obj) -> Mapping[str, str]:
    return meta(obj).get("annotations") or {}


def revision(rs: Obj) -> int:
    try:
        return int(annotations_of(rs).get(REVISION, "0"))
    except ValueError:
        return 0


def max_revision(rss: Iterable[Obj]) -> int:
    return max((revision(rs) for rs in rss), default=0)


def is_rolling(d: Obj) -> bool:
    return ((d.get("spec") or {}).get("strategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"


def has_progress_deadline(d: Obj) -> bool:
    value = (d.get("spec") or {}).get("progressDeadlineSeconds")
    return value is not None and value != MAX_INT32


def has_revision_history_limit(d: Obj) -> bool:
    value = (d.get("spec") or {}).get("revisionHistoryLimit")
    return value is not None and value != MAX_INT32


# -- maxSurge / maxUnavailable -------------------------------------------------------------------------------

def fenceposts(d: Obj) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) for the desired replicas (``ResolveFenceposts``)."""
    rolling = ((d.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    desired = replicas(d)
    surge = scaled_value(rolling.get("maxSurge", "25%"), desired, True)
    unavailable = scaled_value(rolling.get("maxUnavailable", "25%"), desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(d: Obj) -> int:
    return fenceposts(d)[0] if is_rolling(d) else 0


def max_unavailable(d: Obj) -> int:
    if not is_rolling(d) or replicas(d) == 0:
        return 0
    return min(fenceposts(d)[1], replicas(d))


# -- annotations ------------------------------------------------------------------------------------------------

def copy_annotations(d: Obj, rs_annotations: MutableMapping[str, str]) -> bool:
    """Copy the Deployment's annotations (but the revision and kubectl ones) to a ReplicaSet's."""
    changed = False
    for key, value in annotations_of(d).items():
        if key in _SKIP_COPY or rs_annotations.get(key) == value:
            continue
        rs_annotations[key] = value
        changed = True
    return changed


def set_replicas_annotations(rs_annotations: MutableMapping[str, str], desired: int, maximum: int) -> bool:
    changed = False
    for key, value in ((DESIRED_REPLICAS, str(desired)), (MAX_REPLICAS, str(maximum))):
        if rs_annotations.get(key) != value:
            rs_annotations[key] = value
            changed = True
    return changed


def replicas_annotations_need_update(rs: Obj, desired: int, maximum: int) -> bool:
    current = annotations_of(rs)
    return current.get(DESIRED_REPLICAS) != str(desired) or current.get(MAX_REPLICAS) != str(maximum)


def set_new_rs_annotations(d: Obj, rs_annotations: MutableMapping[str, str], new_revision: str, exists: bool) -> bool:
    """``SetNewReplicaSetAnnotations``: copied annotations, the new revision, and the revision it had before
    appended to revision-history when an old ReplicaSet becomes the new one again (a rollback)."""
    changed = copy_annotations(d, rs_annotations)
    old = rs_annotations.get(REVISION)
    try:
        old_int = int(old) if old else 0
    except ValueError:
        return False
    if old_int < int(new_revision):
        rs_annotations[REVISION] = new_revision
        changed = True
        if old is not None:
            _append_history(rs_annotations, old)
    if not exists and set_replicas_annotations(rs_annotations, replicas(d), replicas(d) + max_surge(d)):
        changed = True
    return changed


def _append_history(rs_annotations: MutableMapping[str, str], old: str) -> None:
    history = rs_annotations.get(REVISION_HISTORY, "")
    if not history:
        rs_annotations[REVISION_HISTORY] = old
        return
    revisions = history.split(",")
    total, start = len(history) + len(old) + 1, 0
    while total > MAX_REVISION_HISTORY_CHARS and start < len(revisions):
        total -= len(revisions[start]) + 1
        start += 1
    if total <= MAX_REVISION_HISTORY_CHARS:
        rs_annotations[REVISION_HISTORY] = ",".join([*revisions[start:], old])


# -- conditions -------------------------------------------------------------------------------------------------

def new_condition(type_: str, status: str, reason: str, message: str, now: float) -> dict[str, Any]:
    stamp = rfc3339(now)
    return {"type": type_, "status": status, "lastUpdateTime": stamp, "lastTransitionTime": stamp,
            "reason": reason, "message": message}


def set_condition(status: MutableMapping[str, Any], cond: dict[str, Any]) -> None:
    """``SetDeploymentCondition``: nothing for the same status and reason; the transition time kept for the
    same status; the condition moved to the end."""
    current = find_condition(status, cond["type"])
    if current is not None and current.get("status") == cond["status"] and current.get("reason") == cond["reason"]:
        return
    if current is not None and current.get("status") == cond["status"]:
        cond["lastTransitionTime"] = current.get("lastTransitionTime")
    remove_condition(status, cond["type"])
    status["conditions"] = [*(status.get("conditions") or []), cond]


# -- orderings --------------------------------------------------------------------------------------------------

def _created(obj: Obj) -> float:
    return parse_time(meta(obj).get("creationTimestamp")) or 0.0


def by_creation(rss: Iterable[_RS]) -> list[_RS]:
    """Oldest first, ties by name (``ReplicaSetsByCreationTimestamp``)."""
    return sorted(rss, key=lambda rs: (_created(rs), meta(rs).get("name", "")))


def by_revision(rss: Iterable[_RS]) -> list[_RS]:
    """Lowest revision first, ties by creation (``ReplicaSetsByRevision``)."""
    return sorted(rss, key=lambda rs: (revision(rs), _created(rs), meta(rs).get("name", "")))


def by_size(rss: Iterable[_RS], sizes: Mapping[str, int], newer_first: bool) -> list[_RS]:
    """Largest first; equal sizes newer first (``BySizeNewer``) or older first (``BySizeOlder``)."""
    def cmp(a: _RS, b: _RS) -> int:
        size_a, size_b = sizes[meta(a)["name"]], sizes[meta(b)["name"]]
        if size_a != size_b:
            return -1 if size_a > size_b else 1
        ka, kb = (_created(a), meta(a).get("name", "")), (_created(b), meta(b).get("name", ""))
        if ka == kb:
            return 0
        older = -1 if ka < kb else 1
        return -older if newer_first else older
    return sorted(rss, key=cmp_to_key(cmp))


# -- counts and predicates over ReplicaSets ---------------------------------------------------------------------

def active(rss: Iterable[_RS | None]) -> list[_RS]:
    return [rs for rs in rss if rs is not None and replicas(rs) > 0]


def spec_total(rss: Iterable[Obj | None]) -> int:
    return sum(replicas(rs) for rs in rss if rs is not None)


def status_total(rss: Iterable[Obj | None], field: str) -> int:
    return sum(status_of(rs, field) for rs in rss if rs is not None)


def find_new(d: Obj, rss: Sequence[_RS]) -> _RS | None:
    """The oldest ReplicaSet whose template equals the Deployment's (``FindNewReplicaSet``)."""
    template = (d.get("spec") or {}).get("template") or {}
    for rs in by_creation(rss):
        if equal_ignore_hash((rs.get("spec") or {}).get("template") or {}, template):
            return rs
    return None


def find_active_or_latest(new: _RS | None, olds: Sequence[_RS]) -> _RS | None:
    if new is None and not olds:
        return None
    olds_newest_first = list(reversed(by_creation(olds)))
    live = active([*olds_newest_first, new])
    if not live:
        return new if new is not None else olds_newest_first[0]
    return live[0] if len(live) == 1 else None


def is_saturated(d: Obj, rs: Obj | None) -> bool:
    if rs is None:
        return False
    try:
        desired = int(annotations_of(rs).get(DESIRED_REPLICAS, ""))
    except ValueError:
        return False
    want = replicas(d)
    return replicas(rs) == want and desired == want and status_of(rs, "availableReplicas") == want


def round_half_away(x: float) -> int:
    """Go's ``math.Round``."""
    return math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1)


def proportion(d: Obj, rs: Obj, size: int, to_add: int, added: int) -> int:
    """``GetProportion``: how many of ``to_add`` replicas this ReplicaSet (now ``size``) gets."""
    if size == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = _fraction(d, rs, size)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def _fraction(d: Obj, rs: Obj, size: int) -> int:
    if replicas(d) == 0:
        return -size
    deployment_replicas = replicas(d) + max_surge(d)
    try:
        annotated = int(annotations_of(rs).get(MAX_REPLICAS, ""))
    except ValueError:
        annotated = status_of(d, "replicas")
    if annotated == 0:
        return 0
    return round_half_away(size * deployment_replicas / annotated) - size


def deployment_complete(d: Obj, status: Mapping[str, Any]) -> bool:
    want = replicas(d)
    return (status.get("updatedReplicas", 0) == want and status.get("replicas", 0) == want
            and status.get("availableReplicas", 0) == want
            and status.get("observedGeneration", 0) >= meta(d).get("generation", 0))


def deployment_progressing(d: Obj, status: Mapping[str, Any]) -> bool:
    old = d.get("status") or {}
    old_olds = old.get("replicas", 0) - old.get("updatedReplicas", 0)
    new_olds = status.get("replicas", 0) - status.get("updatedReplicas", 0)
    return (status.get("updatedReplicas", 0) > old.get("updatedReplicas", 0) or new_olds < old_olds
            or status.get("readyReplicas", 0) > old.get("readyReplicas", 0)
            or status.get("availableReplicas", 0) > old.get("availableReplicas", 0))


def deployment_timed_out(d: Obj, status: Mapping[str, Any], now: float) -> bool:
    if not has_progress_deadline(d):
        return False
    cond = find_condition(status, "Progressing")
    if cond is None or cond.get("reason") == NEW_RS_AVAILABLE:
        return False
    if cond.get("reason") == TIMED_OUT:
        return True
    since = parse_time(cond.get("lastUpdateTime")) or 0.0
    return since + (d.get("spec") or {})["progressDeadlineSeconds"] < now
