"""``kinformer watch RESOURCE``: run one informer and print every delta as it arrives, plus periodic stats.

A live view of the pipeline the library implements: list -> watch -> DeltaFIFO -> indexer -> handlers.
Deltas go to stdout (``-o text`` or one JSON document per line with ``-o json``); the one-line stats go to
stderr. SIGINT/SIGTERM stop the informer cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from typing import Any, TextIO

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("resource", help='e.g. "cm", "v1/pods", "apps/v1/deployments", "foos.example.com"')
    parser.add_argument("-n", "--namespace", help="namespace (default: the context's namespace)")
    parser.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace")
    parser.add_argument("-l", "--selector", help="label selector, e.g. app=web,tier!=db")
    parser.add_argument("--field-selector", help="field selector, e.g. metadata.name=x")
    parser.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG, then ~/.kube/config)")
    parser.add_argument("--context", help="kubeconfig context (default: current-context)")
    parser.add_argument("--server", help="API server URL (instead of a kubeconfig)")
    parser.add_argument("--token", help="bearer token for --server")
    parser.add_argument("--insecure-skip-tls-verify", action="store_true",
                        help="do not verify the server's certificate")
    parser.add_argument("--resync", type=float, default=0.0, metavar="SECONDS", help="resync period (0: never)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument("--stats-interval", type=float, default=10.0, metavar="SECONDS",
                        help="seconds between stats lines on stderr (default: %(default)g; 0: none)")
    parser.add_argument("--max-events", type=int, default=0, metavar="N", help="exit after N deltas (0: never)")


class _Printer:
    """Formats deltas and counts them (runs on the event loop: the handlers are coroutines)."""

    def __init__(self, output: str, out: TextIO, max_events: int, done: asyncio.Event) -> None:
        self.output = output
        self.out = out
        self.max_events = max_events
        self.done = done
        self.count = 0

    def emit(self, kind: str, obj: Any, *, resync: bool = False, initial: bool = False) -> None:
        from kinformer.cache.tombstone import DeletedFinalStateUnknown
        from kinformer.meta import meta_namespace_key

        tombstone = isinstance(obj, DeletedFinalStateUnknown)
        key = meta_namespace_key(obj)
        inner = obj.obj if tombstone else obj
        meta = inner.get("metadata") if hasattr(inner, "get") else None
        rv = (meta.get("resourceVersion") if meta is not None else None) or ""
        if self.output == "json":
            import orjson

            from kinformer.client.objects import to_plain

            doc = {"type": kind, "key": key, "resourceVersion": rv, "resync": resync, "initial": initial,
                   "tombstone": tombstone, "object": to_plain(inner) if inner is not None else None}
            self.out.write(orjson.dumps(doc).decode() + "\n")
        else:
            flags = " ".join(f for f, on in (("(resync)", resync), ("(initial list)", initial),
                                              ("(tombstone)", tombstone)) if on)
            self.out.write(f"{kind:<8} {key}  rv={rv or '-'}{'  ' + flags if flags else ''}\n")
        self.out.flush()
        self.count += 1
        if self.max_events and self.count >= self.max_events:
            self.done.set()

    async def on_add(self, obj: Any, is_in_initial_list: bool = False) -> None:
        self.emit("Added", obj, initial=is_in_initial_list)

    async def on_update(self, old: Any, new: Any, is_resync: bool = False) -> None:
        self.emit("Sync" if is_resync else "Updated", new, resync=is_resync)

    async def on_delete(self, obj: Any) -> None:
        self.emit("Deleted", obj)


async def _stats_loop(informer: Any, printer: _Printer, interval: float, err: TextIO) -> None:
    last_count, last_time = 0, time.monotonic()
    while True:
        await asyncio.sleep(interval)
        now = time.monotonic()
        rate = (printer.count - last_count) / (now - last_time)
        last_count, last_time = printer.count, now
        rs = informer.stats.reflector
        since = informer.seconds_since_last_event()
        stale = "-" if since is None else f"{since:.0f}s"
        err.write(f"# {rate:.1f} events/s, {printer.count} total, cache {len(informer.indexer)}, "
                  f"relists {rs.relists}, watch restarts {rs.watch_restarts}, synced {informer.has_synced()}, "
                  f"last event {stale} ago, cache at RV {informer.cache_resource_version or '-'}\n")
        err.flush()


async def _make_client(args: argparse.Namespace) -> Any:
    from kinformer.client import Client

    if args.server:
        return Client(args.server, token=args.token, verify=not args.insecure_skip_tls_verify)
    client = await Client.from_kubeconfig(args.kubeconfig, args.context)
    if args.insecure_skip_tls_verify:
        client.config.verify = False
    return client


async def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """The body of ``kinformer watch`` (returns the exit code)."""
    import aiohttp

    from kinformer.aio import first_completed
    from kinformer.cache.factory import SharedInformerFactory
    from kinformer.client.discovery import ResourceNotFound
    from kinformer.errors import KinformerError

    try:
        client = await _make_client(args)
    except (KinformerError, OSError) as exc:
        err.write(f"error: {exc}\n")
        return 1
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, done.set)
            installed.append(sig)
    factory = None
    try:
        resource = await client.resolve(args.resource)
        namespace = None if args.all_namespaces or not resource.namespaced else (args.namespace or
                                                                                  client.default_namespace)
        factory = SharedInformerFactory(client, resync=args.resync)
        informer = factory.informer(resource, namespace=namespace, label_selector=args.selector,
                                    field_selector=args.field_selector)
        printer = _Printer(args.output, out, args.max_events, done)
        informer.add_event_handler(printer)
        factory.start()
        if args.stats_interval > 0:
            await first_completed(done.wait(), _stats_loop(informer, printer, args.stats_interval, err))
        else:
            await done.wait()
        return 0
    except ResourceNotFound as exc:
        err.write(f"error: {exc}\n")
        return 1
    except KinformerError as exc:
        err.write(f"error: {exc}\n")
        return 1
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        err.write(f"error: cannot reach the API server at {client.config.server}: {exc or type(exc).__name__}\n")
        return 1
    finally:
        if factory is not None:
            await factory.shutdown()
        await client.close()
        for sig in installed:
            loop.remove_signal_handler(sig)


def main(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130
