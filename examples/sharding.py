"""Sharding: three replicas split the ConfigMaps of a namespace between them (a key is reconciled by one member
at a time); when one leaves, its keys move to the others.

    python sharding.py --timeout 60     # against $KUBECONFIG
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
from collections import Counter

import kinformer as ki

NAMESPACE = "sharding-demo"
KEYS = 12


class Tally:
    """Which member reconciled each key; ``complete`` is set once every key has been reconciled."""

    def __init__(self) -> None:
        self.by_key: dict[str, str] = {}
        self.complete = asyncio.Event()

    def record(self, key: str, member: str) -> None:
        self.by_key[key] = member
        if len(self.by_key) == KEYS:
            self.complete.set()

    def reset(self) -> None:
        self.by_key.clear()
        self.complete.clear()

    def per_member(self) -> list[tuple[str, int]]:
        return sorted(Counter(self.by_key.values()).items())


def replica(client: ki.Client, name: str, tally: Tally) -> ki.Manager:
    """One member of the group "sharding-demo"; it records which keys it reconciled."""

    async def reconcile(request: ki.Request) -> None:
        tally.record(request.key, name)

    sharding = ki.Sharding("sharding-demo", namespace=NAMESPACE, identity=name, lease_duration=3.0,
                           renew_deadline=2.0, retry_period=0.4)
    mgr = ki.Manager(client, sharding=sharding, namespace=NAMESPACE)
    mgr.controller(reconcile, name="sharded").for_("configmaps", label_selector="demo=sharding")
    return mgr


async def main(timeout: float) -> None:
    async with await ki.Client.from_kubeconfig() as client:
        try:
            await client.create("namespaces", {"metadata": {"name": NAMESPACE}})
        except ki.AlreadyExists:
            pass
        for i in range(KEYS):
            try:
                await client.create("configmaps", {"metadata": {"name": f"cm-{i}", "labels": {"demo": "sharding"}}},
                                    namespace=NAMESPACE)
            except ki.AlreadyExists:
                pass
        tally = Tally()
        managers = {name: replica(client, name, tally) for name in ("a", "b", "c")}
        runs = {name: asyncio.create_task(mgr.run()) for name, mgr in managers.items()}
        try:
            async with asyncio.timeout(timeout):
                await tally.complete.wait()
                print("keys per member:", tally.per_member())
                managers["a"].stop()  # "a" leaves: its shards go to b and c
                await runs["a"]
                tally.reset()
                touch = {"data": {"touched": secrets.token_hex(4)}}  # a change, so every key is reconciled again
                for i in range(KEYS):
                    await client.patch("configmaps", f"cm-{i}", touch, namespace=NAMESPACE)
                await tally.complete.wait()
                print("after a left:", tally.per_member())
        finally:
            for name, mgr in managers.items():
                mgr.stop()
                await runs[name]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds")
    asyncio.run(main(parser.parse_args().timeout))
