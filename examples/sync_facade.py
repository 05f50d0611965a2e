"""The blocking facade (kinformer.sync) for code that is not asyncio: scripts, Django or Flask views, notebooks.
Same client, informers and Manager; each call blocks only its caller.

    python sync_facade.py --timeout 30     # against $KUBECONFIG
"""

from __future__ import annotations

import argparse
import threading

import kinformer as ki
from kinformer import sync as kis


def main(timeout: float) -> None:
    with kis.Client.from_kubeconfig() as client:  # closing it stops its informers and joins its loop thread
        factory = kis.SharedInformerFactory(client, resync=0)
        informer = factory.informer("configmaps", label_selector="demo=sync")
        updated = threading.Event()
        informer.add_event_handler(on_update=lambda old, new: updated.set())  # plain callables
        factory.start()
        print("synced:", all(factory.wait_for_cache_sync(timeout=timeout).values()))
        try:
            client.create("configmaps", {"metadata": {"name": "sync-demo", "labels": {"demo": "sync"}},
                                         "data": {"v": "1"}}, namespace="default")
        except ki.AlreadyExists:
            pass
        client.patch("configmaps", "sync-demo", {"data": {"v": "2"}}, namespace="default")
        if not updated.wait(timeout):
            raise TimeoutError("the informer did not see the update")
        print("cached:", informer.lister().get("sync-demo", "default")["data"])
        client.delete("configmaps", "sync-demo", namespace="default")
        factory.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds")
    main(parser.parse_args().timeout)
