"""ControllerRevision history, as kube's pkg/controller/history (shared by the StatefulSet and DaemonSet
controllers).

Rules carried over from kube 1.32:

* a revision is named ``<owner>-<hash>`` (the owner's name cut to 223 characters), and carries the hash in
  the ``controller-revision-hash`` label; the hash is FNV-32a over the revision's data (JSON, keys sorted,
  compact, as Go's ``json.Marshal`` of a map writes it) followed by the decimal collision count when there is
  one, its decimal value "safe-encoded" (each digit mapped into a vowel-free alphabet); FNV and the encoding
  are :mod:`.deployment_util`'s (the pod-template-hash's);
* revision numbers start at 1 and grow by one (``next_revision``); revisions sort by number, then creation
  time, then name; two revisions are equal when their data are;
* creating a revision whose name is taken by a revision with other data bumps the collision count and
  retries under the next name; a revision with the same data is taken as is.

Not carried over: Go hashes the raw bytes its own encoder wrote from the typed object; here the data are
re-encoded from what the server returned, in Go's map encoding, so a hash equals Go's only where those bytes
agree (not verified against Go; nothing relies on it: names only have to be stable and distinct here).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kinformer.client import to_plain
from kinformer.errors import AlreadyExists

from .deployment_util import _fnv32a as fnv32a
from .deployment_util import safe_encode
from .refs import controller_ref

#: The label naming the revision (StatefulSet pods: the revision's name; DaemonSet pods: its hash).
CONTROLLER_REVISION_HASH_LABEL = "controller-revision-hash"
#: ``spec.revisionHistoryLimit`` when unset (the API server defaults it to the same).
DEFAULT_REVISION_HISTORY_LIMIT = 10
_NAME_PREFIX_MAX = 223  # 253 - the longest hash ("-" + up to 29 characters)

Obj = Mapping[str, Any]


def go_json(value: Any) -> bytes:
    """``value`` encoded as Go's ``json.Marshal`` encodes maps: sorted keys, compact, HTML characters escaped."""
    text = json.dumps(to_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text.encode()


def _hash(data: bytes, probe: int | None) -> str:
    h = fnv32a(data)
    if probe is not None:
        h = fnv32a(str(probe).encode(), h)
    return safe_encode(str(h))


def hash_revision(data: Any, collision_count: int | None) -> str:
    """``HashControllerRevision``: the hash of a revision's data and the collision count."""
    return _hash(go_json(data), collision_count)


def revision_name(prefix: str, hash_: str) -> str:
    """``<prefix>-<hash>``, the prefix cut so the name stays a valid object name."""
    return f"{prefix[:_NAME_PREFIX_MAX]}-{hash_}"


def template_patch(owner: Obj) -> dict[str, Any]:
    """The data of a StatefulSet's or DaemonSet's revision: a patch replacing ``spec.template`` by the owner's."""
    template = to_plain(owner["spec"]["template"])
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def revision_template(revision: Obj) -> dict[str, Any]:
    """The pod template a revision made by :func:`template_patch` restores (``ApplyRevision``)."""
    template = to_plain(((revision.get("data") or {}).get("spec") or {}).get("template") or {})
    template.pop("$patch", None)
    return template


def new_revision(owner: Obj, data: Any, number: int, collision_count: int | None, *,
                 labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None,
                 hash_: str | None = None) -> dict[str, Any]:
    """``NewControllerRevision``: a revision of ``owner`` (controlled by it) named after its data's hash (or
    after ``hash_`` when given)."""
    meta = owner["metadata"]
    hash_ = hash_ or hash_revision(data, collision_count)
    return {
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": revision_name(meta["name"], hash_), "namespace": meta["namespace"],
                     "labels": {**(labels or {}), CONTROLLER_REVISION_HASH_LABEL: hash_},
                     "annotations": dict(annotations or {}),
                     "ownerReferences": [controller_ref(owner)]},
        "data": copy.deepcopy(data), "revision": number,
    }


def history_limit(owner: Obj) -> int:
    """How many old revisions ``owner`` keeps (``spec.revisionHistoryLimit``)."""
    limit = owner["spec"].get("revisionHistoryLimit")
    return DEFAULT_REVISION_HISTORY_LIMIT if limit is None else int(limit)


def revision_number(revision: Obj) -> int:
    return int(revision.get("revision") or 0)


def next_revision(revisions: Iterable[Obj]) -> int:
    """One more than the highest revision number (1 for no revisions)."""
    return max((revision_number(r) for r in revisions), default=0) + 1


def sort_revisions(revisions: Iterable[Obj]) -> list[Obj]:
    """Oldest first: by revision number, then creation time, then name."""
    return sorted(revisions, key=lambda r: (revision_number(r), r["metadata"].get("creationTimestamp") or "",
                                            r["metadata"]["name"]))


def equal_revision(a: Obj | None, b: Obj | None) -> bool:
    """Two revisions are equal when their data are (and their hash labels, where both have one, agree)."""
    if a is None or b is None:
        return a is b
    hash_a = (a["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH_LABEL)
    hash_b = (b["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH_LABEL)
    if hash_a and hash_b and hash_a != hash_b:
        return False
    return to_plain(a.get("data")) == to_plain(b.get("data"))


def find_equal_revisions(revisions: Sequence[Obj], needle: Obj) -> list[Obj]:
    """The revisions equal to ``needle``, in the order given."""
    return [r for r in revisions if equal_revision(r, needle)]


async def create_revision(client: Any, owner: Obj, revision: Obj, collision_count: int) -> tuple[Any, int]:
    """``CreateControllerRevision``: create ``revision`` under its hash name; on a name taken by other data,
    bump the collision count and retry. Returns the revision (created or the equal one found) and the count."""
    while True:
        body = new_revision(owner, revision["data"], revision_number(revision), collision_count,
                            labels={k: v for k, v in (revision["metadata"].get("labels") or {}).items()
                                    if k != CONTROLLER_REVISION_HASH_LABEL},
                            annotations=revision["metadata"].get("annotations"))
        try:
            return await client.create("controllerrevisions", body, namespace=body["metadata"]["namespace"]), \
                collision_count
        except AlreadyExists:
            existing = await client.get("controllerrevisions", body["metadata"]["name"],
                                        namespace=body["metadata"]["namespace"])
            if equal_revision(existing, body):
                return existing, collision_count
            collision_count += 1


async def update_revision_number(client: Any, revision: Obj, number: int) -> Any:
    """``UpdateControllerRevision``: give ``revision`` the number ``number`` (a roll back to it)."""
    if revision_number(revision) == number:
        return revision
    meta = revision["metadata"]
    return await client.patch("controllerrevisions", meta["name"],
                              {"metadata": {"resourceVersion": meta["resourceVersion"]}, "revision": number},
                              namespace=meta["namespace"])


__all__ = [
    "CONTROLLER_REVISION_HASH_LABEL",
    "create_revision",
    "equal_revision",
    "find_equal_revisions",
    "fnv32a",
    "hash_revision",
    "history_limit",
    "new_revision",
    "next_revision",
    "revision_name",
    "revision_template",
    "safe_encode",
    "sort_revisions",
    "template_patch",
    "update_revision_number",
]
