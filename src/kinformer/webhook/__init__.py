"""Admission and conversion webhooks served by kinformer (controller-runtime's webhook package).

:class:`WebhookServer` serves validating, mutating and CRD conversion handlers over HTTPS with
generated (development) or mounted (cert-manager) certificates; :func:`patch_ca_bundle` writes its CA
into the webhook configurations and CRDs that call it.
"""

from kinformer.webhook.admission import AdmissionRequest, Denied
from kinformer.webhook.install import patch_ca_bundle
from kinformer.webhook.server import WebhookServer

__all__ = ["AdmissionRequest", "Denied", "WebhookServer", "patch_ca_bundle"]
