"""Point webhook configurations and CRD conversion at a webhook server's CA (``caBundle``).

In development and tests the webhook server generates its own CA; the API server must trust it.
:func:`patch_ca_bundle` writes that CA into every webhook of the named Validating/Mutating
WebhookConfigurations and into the named CRDs' conversion webhook, as cert-manager's CA injector does in
a cluster. Each object is read, changed and written back with its resourceVersion, retried on conflict.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from typing import Any

from kinformer.client.objects import to_plain
from kinformer.errors import Conflict

__all__ = ["patch_ca_bundle"]

_RETRIES = 5


async def _update(client: Any, resource: str, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    for attempt in range(_RETRIES):
        obj = to_plain(await client.get(resource, name))
        change(obj)
        try:
            await client.replace(resource, obj)
            return
        except Conflict:
            if attempt == _RETRIES - 1:
                raise


async def patch_ca_bundle(client: Any, ca_bundle: bytes, *, validating: Iterable[str] = (),
                          mutating: Iterable[str] = (), crds: Iterable[str] = ()) -> None:
    """Set ``caBundle`` (base64 of the PEM ``ca_bundle``) in the named configurations and CRDs."""
    encoded = base64.b64encode(ca_bundle).decode()

    def webhooks(obj: dict[str, Any]) -> None:
        for hook in obj.get("webhooks") or []:
            hook.setdefault("clientConfig", {})["caBundle"] = encoded

    def conversion(obj: dict[str, Any]) -> None:
        conv = obj.setdefault("spec", {}).setdefault("conversion", {})
        conv.setdefault("webhook", {}).setdefault("clientConfig", {})["caBundle"] = encoded

    for name in validating:
        await _update(client, "admissionregistration.k8s.io/v1/validatingwebhookconfigurations", name, webhooks)
    for name in mutating:
        await _update(client, "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", name, webhooks)
    for name in crds:
        await _update(client, "apiextensions.k8s.io/v1/customresourcedefinitions", name, conversion)
