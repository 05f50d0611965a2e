"""Leader election: two replicas of one controller, only the Lease holder reconciles; when it stops (and releases
the Lease), the other takes over at once.

    python leader_election.py --timeout 60     # against $KUBECONFIG
"""

from __future__ import annotations

import argparse
import asyncio

import kinformer as ki


class Leaders:
    """Who has led, in order; ``changed`` is set each time a replica starts leading."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.changed = asyncio.Event()

    async def wait_for(self, count: int) -> str:
        while len(self.order) < count:
            self.changed.clear()
            await self.changed.wait()
        return self.order[count - 1]


def replica(client: ki.Client, name: str, leaders: Leaders) -> ki.Manager:
    """A Manager that reconciles ConfigMaps only while it holds the Lease "election-demo"."""

    async def started() -> None:
        print(f"{name} leads")
        leaders.order.append(name)
        leaders.changed.set()

    config = ki.LeaderElectionConfig(lease_name="election-demo", lease_namespace="default", identity=name,
                                     lease_duration=4.0, renew_deadline=3.0, retry_period=0.5,
                                     on_started_leading=started)
    mgr = ki.Manager(client, leader_election=config)
    mgr.controller(lambda request: None, name=f"noop-{name}").for_("configmaps")
    return mgr


async def main(timeout: float) -> None:
    async with await ki.Client.from_kubeconfig() as client:
        leaders = Leaders()
        managers = {name: replica(client, name, leaders) for name in ("a", "b")}
        runs = {name: asyncio.create_task(mgr.run()) for name, mgr in managers.items()}
        try:
            async with asyncio.timeout(timeout):
                first = await leaders.wait_for(1)
                managers[first].stop()  # a graceful stop releases the Lease
                await runs[first]
                second = await leaders.wait_for(2)
                print(f"{first} stepped down, {second} took over")
        finally:
            for name, mgr in managers.items():
                mgr.stop()
                await runs[name]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds")
    asyncio.run(main(parser.parse_args().timeout))
