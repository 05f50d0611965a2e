"""Admission webhooks: what a validating and a mutating webhook cost a create, beside no webhook.

Run: ``python bench/bench_webhooks.py [--creates 300] [--repeat 3]``.

One in-process embedded server (memory storage) and one kinformer WebhookServer (generated certificate,
HTTPS on 127.0.0.1) in the same event loop; ``creates`` sequential ConfigMap creates through ``ki.Client``
per configuration: none, a validating webhook, a mutating webhook (adds a label, answered as a JSONPatch),
both. Reported per configuration: the median creates/s over ``repeat`` interleaved rounds and the ratio to
no webhook (the same round's). One process runs both sides, so the figures include the webhook's own work.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from benchlib import parse_args

import kinformer as ki
from kinformer.server import APIServer

RULES = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]
CONFIGS = {"validating": "admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
           "mutating": "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"}


def configuration(kind: str, name: str, client_config: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
            "webhooks": [{"name": f"{name}.example.com", "clientConfig": client_config, "rules": RULES,
                          "sideEffects": "None", "admissionReviewVersions": ["v1"]}]}


async def creates_per_second(client: ki.Client, prefix: str, n: int) -> float:
    started = time.perf_counter()
    for i in range(n):
        await client.create("configmaps", {"metadata": {"name": f"{prefix}-{i}"}, "data": {"k": "v"}},
                            namespace="default")
    return n / (time.perf_counter() - started)


async def main(creates: int, repeat: int) -> None:
    hooks = ki.WebhookServer(port=0)
    hooks.validating("/validate", lambda req: None)
    hooks.mutating("/mutate", lambda obj, req: {**obj, "metadata": {**obj["metadata"], "labels": {"seen": "1"}}})
    results: dict[str, list[float]] = {"none": [], "validating": [], "mutating": [], "both": []}
    async with APIServer(storage="memory") as server, hooks, ki.Client(server.url) as client:
        for r in range(repeat):
            for setup in results:
                wanted = {"validating", "mutating"} if setup == "both" else {setup} - {"none"}
                for kind in ("validating", "mutating"):
                    resource = CONFIGS[kind]
                    if kind in wanted:
                        await client.create(resource, configuration(
                            kind.capitalize() + "WebhookConfiguration", f"bench-{kind}",
                            hooks.client_config(f"/{kind[:-3]}e")))
                results[setup].append(await creates_per_second(client, f"r{r}-{setup}", creates))
                for kind in wanted:
                    await client.delete(CONFIGS[kind], f"bench-{kind}")
    base = results["none"]
    print(f"{'webhooks':<12}{'creates/s':>12}{'vs none':>10}")
    for setup, figures in results.items():
        ratio = statistics.median(f / b for f, b in zip(figures, base, strict=True))
        print(f"{setup:<12}{statistics.median(figures):>12.0f}{ratio:>9.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    args = parse_args(parser, creates=20, repeat=1)
    asyncio.run(main(args.creates, args.repeat))
