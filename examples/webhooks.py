"""Admission webhooks: a validating webhook that refuses ConfigMaps holding a password, and a mutating one that
labels each ConfigMap with its creator, served by a ki.WebhookServer (its own CA and serving certificate).

    python webhooks.py --timeout 30     # against $KUBECONFIG; the API server must reach 127.0.0.1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any

import kinformer as ki

RULES = [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
          "scope": "Namespaced"}]
SELECTOR = {"matchLabels": {"webhook-demo": "on"}}  # only the demo's objects go through the webhooks


def no_passwords(request: ki.AdmissionRequest) -> None:
    if "password" in ((request.object or {}).get("data") or {}):
        raise ki.Denied("configmaps must not hold passwords; use a Secret")


def creator_label(obj: dict[str, Any], request: ki.AdmissionRequest) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {}).setdefault("created-by", request.user_info["username"].split(":")[-1])
    return obj


def configuration(kind: str, name: str, client_config: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
            "webhooks": [{"name": f"{name}.example.com", "clientConfig": client_config, "rules": RULES,
                          "objectSelector": SELECTOR, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                          "failurePolicy": "Fail", "timeoutSeconds": 10}]}


async def main(timeout: float) -> None:
    async with await ki.Client.from_kubeconfig() as client, ki.WebhookServer(port=0) as webhooks:
        webhooks.validating("/validate", no_passwords)
        webhooks.mutating("/mutate", creator_label)
        configs = [("validatingwebhookconfigurations", configuration(
                       "ValidatingWebhookConfiguration", "webhook-demo-validate", webhooks.client_config("/validate"))),
                   ("mutatingwebhookconfigurations", configuration(
                       "MutatingWebhookConfiguration", "webhook-demo-mutate", webhooks.client_config("/mutate")))]
        try:
            async with asyncio.timeout(timeout):
                for resource, body in configs:
                    await client.create(resource, body)
                labels = SELECTOR["matchLabels"]
                try:
                    await client.create("configmaps", {"metadata": {"name": "webhook-bad", "labels": labels},
                                                       "data": {"password": "hunter2"}}, namespace="default")
                except ki.Forbidden as exc:
                    print("refused:", exc.message)
                good = await client.create("configmaps", {"metadata": {"name": "webhook-good", "labels": labels},
                                                          "data": {"color": "blue"}}, namespace="default")
                print("labelled:", good["metadata"]["labels"]["created-by"])
        finally:
            with contextlib.suppress(ki.NotFound):
                await client.delete("configmaps", "webhook-good", namespace="default")
            for resource, body in configs:
                with contextlib.suppress(ki.NotFound):
                    await client.delete(resource, body["metadata"]["name"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds")
    asyncio.run(main(parser.parse_args().timeout))
