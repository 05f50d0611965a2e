"""The CSR signing controller: approved ``kubernetes.io/kube-apiserver-client`` requests get a certificate.

What kube-controller-manager's csrsigning controller does with ``--cluster-signing-*`` set to the cluster
CA, for the signer whose certificates authenticate users to the API server. Invariants:

* Only a request that is Approved, neither Denied nor Failed, has no ``status.certificate`` yet and names
  the ``kubernetes.io/kube-apiserver-client`` signer is acted on; every other signer's requests are left
  for their own signer (none runs here), as on a cluster without it.
* The certificate has the request's subject and public key, only the client-auth usage, and lives
  ``spec.expirationSeconds`` (at least 10 minutes) or a year, never past the CA. A request with a usage a
  client certificate may not have, a bad signature, an unusable key or the subject organization
  ``system:masters`` (admission refuses such requests; one stored before, or written past admission, is
  never signed either) gets a ``Failed`` condition (reason ``SignerValidationFailure``) instead.
* The controller follows the watch cache (:class:`~kinformer.server.controllers.cachecontroller.CacheController`): a
  CSR change or a reload triggers a pass; each write re-checks that the request is still signable on the
  state it replaces, so replicas never issue two certificates for one request.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime as dt
from collections.abc import Mapping
from typing import Any

from ...tls import CLIENT_VALIDITY, CertPaths, sign_client_csr
from ..admission.certificates import CLIENT_SIGNER, MASTERS, request_organizations
from ..machinery import status as st
from ..registry.objects import ObjectStore, timestamp
from ..registry.resources import Registry
from ..storage.watchcache import WatchCache
from .cachecontroller import CacheController

__all__ = ["CLIENT_SIGNER", "CertificateSigner", "signable"]

_CLIENT_USAGES = frozenset({"client auth", "digital signature", "key encipherment"})
_MIN_VALIDITY = dt.timedelta(minutes=10)


def _conditions(csr: Mapping[str, Any]) -> dict[Any, Any]:
    return {c.get("type"): c for c in (csr.get("status") or {}).get("conditions") or () if isinstance(c, Mapping)}


def signable(csr: Mapping[str, Any]) -> bool:
    """Whether this controller issues ``csr`` a certificate now (see the module invariants)."""
    conditions = _conditions(csr)
    spec = csr.get("spec") or {}
    return (spec.get("signerName") == CLIENT_SIGNER and "Approved" in conditions and "Denied" not in conditions
            and "Failed" not in conditions and not (csr.get("status") or {}).get("certificate"))


def _validity(spec: Mapping[str, Any]) -> dt.timedelta:
    seconds = spec.get("expirationSeconds")
    if isinstance(seconds, int) and not isinstance(seconds, bool) and seconds > 0:
        return max(_MIN_VALIDITY, min(dt.timedelta(seconds=seconds), CLIENT_VALIDITY))
    return CLIENT_VALIDITY


def issue(ca: CertPaths, csr: Mapping[str, Any]) -> tuple[str | None, str]:
    """(base64 of the certificate PEM, "") for a signable request, or (None, why it cannot be signed)."""
    spec = csr.get("spec") or {}
    bad = sorted(set(spec.get("usages") or ()) - _CLIENT_USAGES)
    if bad:
        return None, f"invalid usage for client certificate: {bad[0]}"
    if "client auth" not in (spec.get("usages") or ()):
        return None, "missing required usage for client certificate: client auth"
    try:
        if MASTERS in request_organizations(spec.get("request")):
            return None, f"use of {CLIENT_SIGNER} signer with {MASTERS} group is not allowed"
        pem = base64.b64decode(spec.get("request") or "", validate=True)
        cert = sign_client_csr(ca, pem, validity=_validity(spec))
    except (binascii.Error, ValueError, TypeError) as e:
        return None, str(e)
    return base64.b64encode(cert).decode(), ""


class CertificateSigner(CacheController):
    """Issues the certificates of approved client requests (see the module invariants)."""

    what = "certificate signing"

    def __init__(self, cache: WatchCache, store: ObjectStore, registry: Registry, ca: CertPaths, *,
                 retry: float = 1.0) -> None:
        info = registry.get("certificates.k8s.io", "v1", "certificatesigningrequests")
        assert info is not None
        super().__init__(cache, store, info.storage_prefix, retry=retry)
        self.info = info
        self.ca = ca

    async def sync(self) -> int:
        """One pass over the requests: sign (or fail) each signable one; returns how many were written."""
        info = self.info
        bucket = self.cache.buckets.get(self._prefix)
        if bucket is None:
            return 0
        written = 0
        for co in list(bucket.objects.values()):
            if not signable(co.obj):
                continue
            certificate, why = await asyncio.to_thread(issue, self.ca, co.obj)
            now = timestamp(self.store.clock)

            def update(current: dict[str, Any], certificate: str | None = certificate, why: str = why,
                       now: str = now) -> dict[str, Any] | None:
                if not signable(current):
                    return None
                status = current.setdefault("status", {})
                if certificate is not None:
                    status["certificate"] = certificate
                else:
                    status.setdefault("conditions", []).append({
                        "type": "Failed", "status": "True", "reason": "SignerValidationFailure", "message": why,
                        "lastUpdateTime": now, "lastTransitionTime": now})
                return current

            try:
                await self.store.mutate(info, "", co.name, update, raw=True)
            except st.StatusError as e:
                if e.code != 404:
                    raise
                continue
            written += 1
        return written
