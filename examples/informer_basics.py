"""Informer basics: a typed, shared informer on ConfigMaps, an event handler and a lister.

    kinformer serve &                       # or any cluster: $KUBECONFIG picks it
    python informer_basics.py --timeout 30

Creates a ConfigMap, sees it arrive through the informer, reads it back from the cache and exits.
"""

from __future__ import annotations

import argparse
import asyncio

import kinformer as ki
from kinformer.kinds.core_v1 import ConfigMap


async def main(timeout: float) -> None:
    async with await ki.Client.from_kubeconfig() as client, ki.SharedInformerFactory(client) as factory:
        informer = factory.informer(ConfigMap, namespace="default")   # typed: the lister returns ConfigMaps
        seen = asyncio.Event()

        async def on_add(cm: ki.Object) -> None:  # a coroutine runs on the loop; a plain function in a thread
            print("added", cm["metadata"]["name"])
            if cm["metadata"]["name"] == "informer-basics":
                seen.set()

        informer.add_event_handler(on_add=on_add)
        factory.start()
        await factory.wait_for_cache_sync(timeout=timeout)
        await client.create(ConfigMap, {"metadata": {"name": "informer-basics"}, "data": {"color": "blue"}},
                            namespace="default")
        async with asyncio.timeout(timeout):
            await seen.wait()
        cached = informer.lister().get("informer-basics", "default")
        print("from the cache:", cached.get("data", {}))
        await client.delete(ConfigMap, "informer-basics", namespace="default")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds")
    asyncio.run(main(parser.parse_args().timeout))
