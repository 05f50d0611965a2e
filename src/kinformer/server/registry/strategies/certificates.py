"""CertificateSigningRequests (certificates.k8s.io/v1): create rules and the approval and status subresources.

As kube-apiserver 1.32's registry has them:

* a create starts with an empty status (nobody creates a pre-approved request) and must carry a PEM
  ``CERTIFICATE REQUEST`` in ``spec.request``, a ``spec.signerName``, known ``spec.usages`` and an
  ``expirationSeconds`` of at least 600; the requester's identity (``spec.username``, ``uid``, ``groups``,
  ``extra``) is the authenticated user of the request (:func:`stamp_requester`), whatever the client sent;
* an update of the request changes only its metadata; ``/approval`` changes only ``status.conditions``
  (:func:`take_approval`), ``/status`` everything in status but the Approved and Denied conditions
  (:func:`take_status`);
* conditions: one of each type, Approved and Denied exclusive, Approved/Denied/Failed never removed once
  set, Approved and Denied only with status True; ``lastUpdateTime`` and ``lastTransitionTime`` are stamped
  by the server when the client leaves them out.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from ...auth.authentication import ADMIN, CURRENT_USER, UserInfo
from ...machinery.jsoncopy import json_copy
from .base import Cause, KindStrategy, forbidden, invalid, not_supported, required

__all__ = ["KNOWN_USAGES", "CSRStrategy", "approval_causes", "stamp_requester", "take_approval", "take_status"]

KNOWN_USAGES = ("signing", "digital signature", "content commitment", "key encipherment", "key agreement",
                "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
                "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
                "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc")
_APPROVAL_TYPES = ("Approved", "Denied")
_STICKY_TYPES = ("Approved", "Denied", "Failed")
MIN_EXPIRATION_SECONDS = 600


def _pem_csr(request: Any) -> bool:
    try:
        der = base64.b64decode(request, validate=True) if isinstance(request, str) else b""
    except (binascii.Error, ValueError):
        return False
    from cryptography import x509

    try:
        x509.load_pem_x509_csr(der)
    except ValueError:
        return False
    return True


def stamp_requester(obj: dict[str, Any], user: UserInfo) -> None:
    """Record who asked: kube's PrepareForCreate overwrites whatever the client sent in these fields."""
    spec = obj.setdefault("spec", {})
    for key in ("username", "uid", "groups", "extra"):
        spec.pop(key, None)
    spec.update({k: v for k, v in user.to_dict().items() if v})


def _condition_causes(conditions: Any) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, cond in enumerate(conditions if isinstance(conditions, list) else ()):
        path = f"status.conditions[{i}]"
        ctype = cond.get("type") if isinstance(cond, Mapping) else None
        if not ctype:
            causes.append(required(f"{path}.type"))
            continue
        if ctype in seen:
            causes.append({"reason": "FieldValueDuplicate", "field": f"{path}.type",
                           "message": f'Duplicate value: "{ctype}"'})
        seen.add(ctype)
        status = cond.get("status")
        if ctype in _APPROVAL_TYPES and status != "True":
            causes.append(not_supported(f"{path}.status", status, ["True"]))
        elif status not in ("True", "False", "Unknown"):
            causes.append(not_supported(f"{path}.status", status, ["False", "True", "Unknown"]))
    if {"Approved", "Denied"} <= seen:
        causes.append(invalid("status.conditions", "Approved", "Approved and Denied conditions are mutually "
                                                               "exclusive"))
    return causes


def approval_causes(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """An update's condition rules (see the module docstring)."""
    causes = _condition_causes((new.get("status") or {}).get("conditions"))
    kept = {c.get("type") for c in (new.get("status") or {}).get("conditions") or () if isinstance(c, Mapping)}
    for cond in (old.get("status") or {}).get("conditions") or ():
        ctype = cond.get("type") if isinstance(cond, Mapping) else None
        if ctype in _STICKY_TYPES and ctype not in kept:
            causes.append(forbidden("status.conditions", f'updates may not remove a condition of type "{ctype}"'))
    return causes


def _stamped(conditions: Any, old: Mapping[str, Any], now: str) -> list[Any]:
    before = {c.get("type"): c for c in (old.get("status") or {}).get("conditions") or () if isinstance(c, Mapping)}
    out = []
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, dict):
            cond = dict(cond)
            cond.setdefault("lastUpdateTime", now)
            previous = before.get(cond.get("type"))
            if "lastTransitionTime" not in cond:
                same = previous is not None and previous.get("status") == cond.get("status")
                cond["lastTransitionTime"] = previous.get("lastTransitionTime", now) if same and previous else now
        out.append(cond)
    return out


def take_approval(old: dict[str, Any], new: Mapping[str, Any], now: str) -> dict[str, Any]:
    """``old`` with the client's ``status.conditions`` (the ``/approval`` subresource's update)."""
    result = json_copy(old)
    conditions = _stamped((new.get("status") or {}).get("conditions"), old, now)
    status = result.setdefault("status", {})
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)
    return result


def take_status(old: dict[str, Any], new: Mapping[str, Any], now: str) -> dict[str, Any]:
    """``old`` with the client's status, keeping the approval conditions as they are (``/status``)."""
    result = json_copy(old)
    status = dict(new.get("status") or {})
    approvals = [c for c in (old.get("status") or {}).get("conditions") or ()
                 if isinstance(c, Mapping) and c.get("type") in _APPROVAL_TYPES]
    others = [c for c in status.get("conditions") or () if not (isinstance(c, Mapping)
                                                                 and c.get("type") in _APPROVAL_TYPES)]
    conditions = approvals + _stamped(others, old, now)
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)
    result["status"] = status
    return result


class CSRStrategy(KindStrategy):
    """A request starts with an empty status; its spec never changes (see the module docstring)."""

    resets_status = True

    def create(self, obj: dict[str, Any]) -> None:
        stamp_requester(obj, CURRENT_USER.get() or ADMIN)

    def causes(self, obj: Mapping[str, Any]) -> list[Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
        assert isinstance(spec, Mapping)
        causes: list[Cause] = []
        if not spec.get("request"):
            causes.append(required("spec.request"))
        elif not _pem_csr(spec["request"]):
            causes.append(invalid("spec.request", "<request>", "PEM block type must be CERTIFICATE REQUEST"))
        if not spec.get("signerName"):
            causes.append(required("spec.signerName"))
        for i, usage in enumerate(spec.get("usages") or ()):
            if usage not in KNOWN_USAGES:
                causes.append(not_supported(f"spec.usages[{i}]", usage, list(KNOWN_USAGES)))
        seconds = spec.get("expirationSeconds")
        if isinstance(seconds, int) and seconds < MIN_EXPIRATION_SECONDS:
            causes.append(invalid("spec.expirationSeconds", seconds, f"may not specify a duration less than "
                                                                     f"{MIN_EXPIRATION_SECONDS // 60}m0s"))
        return causes

    def update(self, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        """An update of the request itself changes only its metadata (kube keeps spec and status as stored)."""
        for part in ("spec", "status"):
            if part in old:
                obj[part] = json_copy(old[part])
            else:
                obj.pop(part, None)

    def update_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        return approval_causes(obj, old)

    def status_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        return approval_causes(obj, old)
