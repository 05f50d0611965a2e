"""A ConfigMap -> Secret copier: a controller that keeps a Secret with the data of each ConfigMap labelled
copy=secret, owned by the ConfigMap (so the garbage collector deletes it with its ConfigMap).

    python configmap_to_secret.py --timeout 30     # against $KUBECONFIG; exits once a copy is made
    kinformer run configmap_to_secret:manager      # the controller alone, until SIGTERM
"""

from __future__ import annotations

import argparse
import asyncio
import base64

import kinformer as ki
from kinformer.kinds.core_v1 import ConfigMap, Secret


class Copier(ki.ObjectReconciler[ConfigMap]):
    """Writes the ConfigMap's data into the Secret of the same name."""

    async def reconcile(self, cm: ConfigMap) -> ki.Result | None:
        meta = cm["metadata"]
        desired: Secret = {"metadata": {"name": meta["name"], "namespace": meta["namespace"]}}

        def mutate(secret: dict[str, object]) -> None:
            secret["stringData"] = dict(cm.get("data", {}))
            ki.set_controller_reference(cm, secret)

        op, _ = await ki.create_or_update(self.client, "secrets", desired, mutate)
        if op != "unchanged":
            ki.reconcile_logger().info("secret %s", op)
        return None


def manager(client: ki.Client) -> ki.Manager:
    mgr = ki.Manager(client)
    mgr.controller(Copier()).for_(ConfigMap, label_selector="copy=secret").owns(Secret)
    return mgr


async def main(timeout: float) -> None:
    async with await ki.Client.from_kubeconfig() as client:
        mgr = manager(client)
        running = asyncio.create_task(mgr.run())
        try:
            await client.create(ConfigMap, {"metadata": {"name": "copier-demo", "labels": {"copy": "secret"}},
                                            "data": {"greeting": "hello"}}, namespace="default")
            secret = await ki.wait_for(client, "secrets", "copier-demo", lambda s: s is not None,
                                       namespace="default", timeout=timeout)
            assert secret is not None
            print("copied:", {k: base64.b64decode(v).decode() for k, v in secret["data"].items()})
            await client.delete(ConfigMap, "copier-demo", namespace="default")
        finally:
            mgr.stop()
            await running


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds")
    asyncio.run(main(parser.parse_args().timeout))
