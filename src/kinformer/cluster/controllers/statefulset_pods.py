"""A StatefulSet's pods and claims: identity, storage and the claims' retention policy, as kube 1.32's
pkg/controller/statefulset (stateful_set_utils.go, stateful_pod_control.go).

Invariants:

* pod ``<set>-<ordinal>`` for ordinals ``spec.ordinals.start`` .. ``start + replicas - 1``; hostname the pod's
  name, subdomain ``spec.serviceName``; labels ``statefulset.kubernetes.io/pod-name``,
  ``apps.kubernetes.io/pod-index`` and ``controller-revision-hash`` (the revision's *name*);
* claim ``<template>-<set>-<ordinal>`` per volumeClaimTemplate, labelled with the set's ``matchLabels``, mounted
  as the volume named after the template; claims are created before their pod and never deleted by the
  controller (the garbage collector does, through the owner references the retention policy sets);
* ``persistentVolumeClaimRetentionPolicy``: ``whenDeleted: Delete`` makes the set an owner of its claims,
  ``whenScaled: Delete`` makes a condemned pod (ordinal out of range) the owner of its claims;
* events as kube's: ``SuccessfulCreate`` "create Pod db-0 in StatefulSet db successful", ``SuccessfulDelete``,
  ``FailedCreate``/``FailedDelete`` with the error, and the claims' "create Claim ... success".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kinformer.client import to_plain
from kinformer.errors import APIError, NotFound

from .history import CONTROLLER_REVISION_HASH_LABEL
from .podtemplate import pod_from_template

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
_ORDINAL = re.compile(r"^(.*)-([0-9]+)$")
_INT32_MAX = 2**31 - 1

Obj = Mapping[str, Any]


# -- ordinals and names ------------------------------------------------------------------------------------


def parent_and_ordinal(pod: Obj) -> tuple[str, int]:
    """The set's name and the ordinal a pod's name carries, or ("", -1)."""
    match = _ORDINAL.match(pod["metadata"]["name"])
    if match is None or int(match.group(2)) > _INT32_MAX:
        return "", -1
    return match.group(1), int(match.group(2))


def ordinal_of(pod: Obj) -> int:
    return parent_and_ordinal(pod)[1]


def start_ordinal(sts: Obj) -> int:
    return int(((sts["spec"].get("ordinals") or {}).get("start")) or 0)


def replicas_of(sts: Obj) -> int:
    replicas = sts["spec"].get("replicas")
    return 1 if replicas is None else int(replicas)


def in_ordinal_range(pod: Obj, sts: Obj) -> bool:
    start = start_ordinal(sts)
    return start <= ordinal_of(pod) < start + replicas_of(sts)


def is_member_of(sts: Obj, pod: Obj) -> bool:
    return parent_and_ordinal(pod)[0] == sts["metadata"]["name"]


def pod_name(sts: Obj, ordinal: int) -> str:
    return f"{sts['metadata']['name']}-{ordinal}"


def claim_name(sts: Obj, template_name: str, ordinal: int) -> str:
    return f"{template_name}-{sts['metadata']['name']}-{ordinal}"


def pod_revision(pod: Obj) -> str:
    return (pod["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH_LABEL, "")


# -- the pod ------------------------------------------------------------------------------------------------


def claims_for(sts: Obj, ordinal: int) -> dict[str, dict[str, Any]]:
    """``getPersistentVolumeClaims``: template name -> the claim for the pod of ``ordinal``."""
    match_labels = (sts["spec"].get("selector") or {}).get("matchLabels") or {}
    claims = {}
    for template in sts["spec"].get("volumeClaimTemplates") or ():
        claim = to_plain(template)
        meta = claim.setdefault("metadata", {})
        meta["name"] = claim_name(sts, template["metadata"]["name"], ordinal)
        meta["namespace"] = sts["metadata"]["namespace"]
        meta["labels"] = {**(meta.get("labels") or {}), **match_labels}
        claim.pop("status", None)
        claims[template["metadata"]["name"]] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **claim}
    return claims


def identity_matches(sts: Obj, pod: Obj) -> bool:
    parent, ordinal = parent_and_ordinal(pod)
    labels = pod["metadata"].get("labels") or {}
    return (ordinal >= 0 and parent == sts["metadata"]["name"] and pod["metadata"]["name"] == pod_name(sts, ordinal)
            and pod["metadata"].get("namespace") == sts["metadata"]["namespace"]
            and labels.get(POD_NAME_LABEL) == pod["metadata"]["name"] and labels.get(POD_INDEX_LABEL) == str(ordinal))


def storage_matches(sts: Obj, pod: Obj) -> bool:
    ordinal = ordinal_of(pod)
    if ordinal < 0:
        return False
    volumes = {v.get("name"): v for v in pod["spec"].get("volumes") or ()}
    for name, claim in claims_for(sts, ordinal).items():
        source = (volumes.get(name) or {}).get("persistentVolumeClaim") or {}
        if source.get("claimName") != claim["metadata"]["name"]:
            return False
    return True


def update_identity(sts: Obj, pod: dict[str, Any], ordinal: int) -> None:
    meta = pod["metadata"]
    meta["name"] = pod_name(sts, ordinal)
    meta["namespace"] = sts["metadata"]["namespace"]
    meta.setdefault("labels", {}).update({POD_NAME_LABEL: meta["name"], POD_INDEX_LABEL: str(ordinal)})


def update_storage(sts: Obj, pod: dict[str, Any], ordinal: int) -> None:
    """The claims' volumes first (template order), then the pod's other volumes."""
    claims = claims_for(sts, ordinal)
    volumes = [{"name": name, "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
               for name, claim in claims.items()]
    volumes += [v for v in pod["spec"].get("volumes") or () if v.get("name") not in claims]
    if volumes:
        pod["spec"]["volumes"] = volumes


def new_pod(sts: Obj, template: Obj, ordinal: int, revision_name: str) -> dict[str, Any]:
    """``newStatefulSetPod`` from ``template`` (the template of the revision the pod is made at)."""
    pod = pod_from_template(template, sts)
    del pod["metadata"]["generateName"]
    update_identity(sts, pod, ordinal)
    pod["spec"]["hostname"] = pod["metadata"]["name"]
    if sts["spec"].get("serviceName"):
        pod["spec"]["subdomain"] = sts["spec"]["serviceName"]
    update_storage(sts, pod, ordinal)
    pod["metadata"]["labels"][CONTROLLER_REVISION_HASH_LABEL] = revision_name
    return pod


# -- the retention policy of claims --------------------------------------------------------------------------


def retention_policy(sts: Obj) -> tuple[str, str]:
    """(whenDeleted, whenScaled), each "Retain" unless "Delete"."""
    policy = sts["spec"].get("persistentVolumeClaimRetentionPolicy") or {}
    return (("Delete" if policy.get("whenDeleted") == "Delete" else "Retain"),
            ("Delete" if policy.get("whenScaled") == "Delete" else "Retain"))


def _owner_ref(owner: Obj, api_version: str, kind: str) -> dict[str, Any]:
    meta = owner["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": meta["name"], "uid": meta["uid"]}


def wanted_claim_owners(sts: Obj, pod: Obj) -> tuple[bool, bool]:
    """(the set owns the claim, the pod owns the claim) under the set's retention policy."""
    when_deleted, when_scaled = retention_policy(sts)
    scaled_down = not in_ordinal_range(pod, sts)
    if when_scaled == "Delete" and scaled_down:
        return False, True
    return when_deleted == "Delete", False


def claim_owner_refs(claim: Obj, sts: Obj, pod: Obj) -> list[dict[str, Any]] | None:
    """The claim's owner references the policy wants, or None when they already are."""
    refs = [dict(r) for r in claim["metadata"].get("ownerReferences") or ()]
    set_owns, pod_owns = wanted_claim_owners(sts, pod)
    changed = False
    for owner, wanted, api_version, kind in ((sts, set_owns, "apps/v1", "StatefulSet"), (pod, pod_owns, "v1", "Pod")):
        uid = owner["metadata"].get("uid")
        has = any(r.get("uid") == uid for r in refs) if uid else False
        if wanted and uid and not has:
            refs.append(_owner_ref(owner, api_version, kind))
            changed = True
        elif not wanted and has:
            refs = [r for r in refs if r.get("uid") != uid]
            changed = True
    return refs if changed else None


def has_stale_pod_ref(claim: Obj, pod: Obj) -> bool:
    """A claim still owned by an earlier pod of that name (another uid, or the new pod has none yet)."""
    for ref in claim["metadata"].get("ownerReferences") or ():
        if ref.get("kind") == "Pod" and ref.get("name") == pod["metadata"]["name"]:
            return bool(ref.get("uid") != pod["metadata"].get("uid"))
    return False


class StatefulPodControl:
    """The writes of the StatefulSet controller on pods and claims, each recorded as kube records it."""

    def __init__(self, client: Any, recorder: Any) -> None:
        self.client, self.recorder = client, recorder

    def _pod_event(self, verb: str, sts: Obj, pod: Obj, err: Exception | None) -> None:
        """kube's ``recordPodEvent``: the message names the pod, so each pod's events are their own Event."""
        name, set_name = pod["metadata"]["name"], sts["metadata"]["name"]
        if err is None:
            self.recorder.event(sts, "Normal", f"Successful{verb.title()}",
                                f"{verb} Pod {name} in StatefulSet {set_name} successful")
        else:
            self.recorder.event(sts, "Warning", f"Failed{verb.title()}",
                                f"{verb} Pod {name} in StatefulSet {set_name} failed error: {err}")

    def _claim_event(self, verb: str, sts: Obj, pod: Obj, claim: Obj, err: Exception | None) -> None:
        names = f"Claim {claim['metadata']['name']} Pod {pod['metadata']['name']} in StatefulSet " \
                f"{sts['metadata']['name']}"
        if err is None:
            self.recorder.event(sts, "Normal", f"Successful{verb.title()}", f"{verb} {names} success")
        else:
            self.recorder.event(sts, "Warning", f"Failed{verb.title()}", f"{verb} {names} failed error: {err}")

    async def get_claim(self, namespace: str, name: str) -> Obj | None:
        try:
            claim: Obj = await self.client.get("persistentvolumeclaims", name, namespace=namespace)
        except NotFound:
            return None
        return claim

    async def create_missing_claims(self, sts: Obj, pod: Obj) -> None:
        """Create the pod's claims that do not exist; a claim being deleted is an error (retried)."""
        for claim in claims_for(sts, ordinal_of(pod)).values():
            meta = claim["metadata"]
            existing = await self.get_claim(meta["namespace"], meta["name"])
            if existing is not None:
                if existing["metadata"].get("deletionTimestamp"):
                    raise RuntimeError(f"pvc {meta['name']} is being deleted")
                continue
            try:
                await self.client.create("persistentvolumeclaims", claim, namespace=meta["namespace"])
            except APIError as err:
                self._claim_event("create", sts, pod, claim, err)
                raise
            self._claim_event("create", sts, pod, claim, None)

    async def create_pod(self, sts: Obj, pod: dict[str, Any]) -> Obj:
        """Claims first, then the pod, then the claims' owners per the retention policy."""
        try:
            await self.create_missing_claims(sts, pod)
            created: Obj = await self.client.create("pods", pod, namespace=pod["metadata"]["namespace"])
        except APIError as err:
            self._pod_event("create", sts, pod, err)
            raise
        await self.update_claims_for_retention(sts, created)
        self._pod_event("create", sts, created, None)
        return created

    async def delete_pod(self, sts: Obj, pod: Obj) -> None:
        try:
            await self.client.delete("pods", pod["metadata"]["name"], namespace=pod["metadata"]["namespace"],
                                     preconditions={"uid": pod["metadata"]["uid"]})
        except NotFound:
            return
        except APIError as err:
            self._pod_event("delete", sts, pod, err)
            raise
        self._pod_event("delete", sts, pod, None)

    async def claims_match_retention(self, sts: Obj, pod: Obj) -> bool:
        for claim in claims_for(sts, ordinal_of(pod)).values():
            existing = await self.get_claim(claim["metadata"]["namespace"], claim["metadata"]["name"])
            if existing is not None and claim_owner_refs(existing, sts, pod) is not None:
                return False
        return True

    async def update_claims_for_retention(self, sts: Obj, pod: Obj) -> None:
        """Give each existing claim of ``pod`` the owners the retention policy wants."""
        for claim in claims_for(sts, ordinal_of(pod)).values():
            existing = await self.get_claim(claim["metadata"]["namespace"], claim["metadata"]["name"])
            refs = None if existing is None else claim_owner_refs(existing, sts, pod)
            if existing is None or refs is None:
                continue
            meta = existing["metadata"]
            patch = {"metadata": {"ownerReferences": refs, "resourceVersion": meta["resourceVersion"]}}
            try:
                await self.client.patch("persistentvolumeclaims", meta["name"], patch, namespace=meta["namespace"])
            except APIError as err:
                self._claim_event("update", sts, pod, existing, err)
                raise

    async def claim_is_stale(self, sts: Obj, pod: Obj) -> bool:
        """``PodClaimIsStale``: with ``whenScaled: Delete``, a claim still owned by a former pod of that name."""
        if retention_policy(sts)[1] == "Retain":
            return False
        for claim in claims_for(sts, ordinal_of(pod)).values():
            existing = await self.get_claim(claim["metadata"]["namespace"], claim["metadata"]["name"])
            if existing is not None and has_stale_pod_ref(existing, pod):
                return True
        return False

    async def fix_identity(self, sts: Obj, pod: Obj) -> None:
        """``UpdateStatefulPod``: restore the pod's identity labels and its claims' retention owners."""
        await self.create_missing_claims(sts, pod)
        if not identity_matches(sts, pod):
            labels = dict(pod["metadata"].get("labels") or {})
            labels.update({POD_NAME_LABEL: pod["metadata"]["name"], POD_INDEX_LABEL: str(ordinal_of(pod))})
            patch = {"metadata": {"labels": labels, "resourceVersion": pod["metadata"]["resourceVersion"]}}
            try:
                await self.client.patch("pods", pod["metadata"]["name"], patch, namespace=pod["metadata"]["namespace"])
            except APIError as err:
                self._pod_event("update", sts, pod, err)
                raise
            self._pod_event("update", sts, pod, None)
        await self.update_claims_for_retention(sts, pod)
