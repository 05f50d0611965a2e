"""A plain Python program with no event loop of its own: an informer and a controller via the blocking facade.

Usage: ``python sync_script.py SERVER_URL``. Prints ``running`` once the controller has copied a ConfigMap into a
Secret and the informer has seen the ConfigMap, then runs until SIGTERM or SIGINT and prints ``stopped``.
(Run by tests/integration/test_sync.py.)
"""

import sys
import threading

import kinformer as ki
from kinformer import sync as kis


def main(url: str) -> None:
    with kis.Client(url) as client:
        client.create("configmaps", {"metadata": {"name": "web", "namespace": "default"}, "data": {"v": "1"}})

        factory = kis.SharedInformerFactory(client)
        seen = threading.Event()
        factory.informer("configmaps").add_event_handler(on_add=lambda obj: seen.set())
        factory.start()
        if not all(factory.wait_for_cache_sync(timeout=30).values()):
            sys.exit("the informer did not sync")

        copied = threading.Event()

        def reconcile(request: ki.Request) -> ki.Result:
            source = client.get("configmaps", request.name, namespace=request.namespace)
            client.patch("secrets", request.name, {
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": request.name, "namespace": request.namespace},
                "stringData": dict(source.get("data") or {}),
            }, "apply", namespace=request.namespace, field_manager="copier", force=True)
            copied.set()
            return ki.Result()

        mgr = kis.Manager(client)
        mgr.controller(reconcile, name="copier").for_("configmaps")

        def announce() -> None:
            if copied.wait(60) and seen.wait(60) and client.get("secrets", "web", namespace="default"):
                print("running", flush=True)

        threading.Thread(target=announce, daemon=True).start()
        mgr.run()  # blocks until SIGTERM / SIGINT
        factory.shutdown()
    print("stopped", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
