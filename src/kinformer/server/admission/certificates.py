"""kube-apiserver's admission plugins for CertificateSigningRequests: who may approve, sign and ask for what.

As kube-apiserver 1.32 runs CertificateApproval, CertificateSigning and CertificateSubjectRestriction
(validating plugins, after the object's own validation and before the validating webhooks):

* an update through ``/approval`` needs verb ``approve`` on the resource ``signers`` of certificates.k8s.io,
  named the stored request's ``spec.signerName`` or its domain wildcard ``<domain>/*`` (for
  ``kubernetes.io/kube-apiserver-client``: ``kubernetes.io/*``);
* an update through ``/status`` that changes ``status.certificate`` or ``status.conditions`` needs verb
  ``sign`` on ``signers`` likewise;
* creating a ``kubernetes.io/kube-apiserver-client`` request whose subject has the organization
  ``system:masters`` is refused, whoever asks: a certificate in that group would bypass authorization.

Each refusal is a 403 ``Forbidden`` worded as kube's: ``certificatesigningrequests.certificates.k8s.io "<name>"
is forbidden: user not permitted to approve requests with signerName "<signer>"``. ``system:masters`` holds
every permission, so a server without authentication (everyone the admin) is not restricted by the first two.
The server's own writes (the built-in signer, :mod:`.controllers.csrsigning`) do not pass through admission.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from ..auth.authentication import UserInfo
from ..auth.authorization import Authorizer, RequestAttributes, authorize_fresh
from ..machinery import status as st
from ..registry.resources import ResourceInfo

__all__ = ["CLIENT_SIGNER", "MASTERS", "CertificateAdmission", "request_organizations"]

GROUP = "certificates.k8s.io"
CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
MASTERS = "system:masters"
_VERB_OF_SUBRESOURCE = {"approval": "approve", "status": "sign"}


def request_organizations(request: Any) -> list[str]:
    """The subject organizations (the groups a client certificate carries) of a base64 PEM certificate request.

    Raises ``ValueError`` when ``request`` is not one.
    """
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    try:
        pem = base64.b64decode(request if isinstance(request, str) else "", validate=True)
    except binascii.Error as exc:
        raise ValueError(str(exc)) from None
    csr = x509.load_pem_x509_csr(pem)
    return [str(a.value) for a in csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def _signer_attributes(verb: str, name: str) -> RequestAttributes:
    return RequestAttributes(verb=verb, path="", resource_request=True, api_group=GROUP, api_version="*",
                             resource="signers", name=name)


def _spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


class CertificateAdmission:
    """The three plugins over one authorizer (see the module docstring)."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    async def authorized_for_signer(self, user: UserInfo, verb: str, signer: str) -> bool:
        """kube's IsAuthorizedForSignerName: ``verb`` on the signer's name, or on ``<domain>/*``."""
        for name in (signer, signer.split("/", 1)[0] + "/*"):
            allowed, _ = await authorize_fresh(self.authorizer, user, _signer_attributes(verb, name))
            if allowed:
                return True
        return False

    async def validate(self, user: UserInfo, info: ResourceInfo, subresource: str, obj: Mapping[str, Any],
                       old: Mapping[str, Any] | None) -> None:
        """Raise the 403 of the plugin that refuses this write of ``obj`` (``old``: the stored object, None on
        create); any other resource passes."""
        if info.group != GROUP or info.plural != "certificatesigningrequests":
            return
        name = (obj.get("metadata") or {}).get("name", "")
        if old is None:
            if not subresource:
                self._check_subject(info, name, obj)
            return
        verb = _VERB_OF_SUBRESOURCE.get(subresource)
        if verb is None:
            return
        if verb == "sign" and all(_status(obj).get(k) == _status(old).get(k) for k in ("certificate", "conditions")):
            return
        signer = str(_spec(old).get("signerName") or "")
        if not await self.authorized_for_signer(user, verb, signer):
            raise st.forbidden(info, name, f'user not permitted to {verb} requests with signerName "{signer}"')

    @staticmethod
    def _check_subject(info: ResourceInfo, name: str, obj: Mapping[str, Any]) -> None:
        spec = _spec(obj)
        if spec.get("signerName") != CLIENT_SIGNER:
            return
        try:
            organizations = request_organizations(spec.get("request"))
        except ValueError as exc:
            raise st.forbidden(info, name, f"failed to parse CSR: {exc}") from None
        if MASTERS in organizations:
            raise st.forbidden(info, name, f"use of {CLIENT_SIGNER} signer with {MASTERS} group is not allowed")
