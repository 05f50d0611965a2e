"""A controller's owned objects converge under faults: the sample controller (the demo's) over several seeds.

Each seed runs the whole demo workload in-process on its own embedded server: Foos created, scaled and
deleted while the controllers' connections are dropped, their watches stalled and forced through a 410
relist, and reconciles fail a few times. The demo itself checks, through the API, that every Foo's
Deployment has the wanted replicas, every Foo reports them available, and every deleted Foo's Deployment
was garbage-collected.
"""

from __future__ import annotations

import argparse
import os

import pytest

from kinformer.demo import Demo

SEEDS = [int(s) for s in os.environ.get("KINFORMER_CONTROLLER_CHAOS_SEEDS", "11,12,13").split(",")]


@pytest.mark.parametrize("seed", SEEDS)
async def test_owned_objects_converge_under_faults(seed: int, capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(foos=10, seed=seed, storage="memory", duration=4.0, timeout=60.0, keep=False,
                              plain=True, replicas=1)
    demo = Demo(args)
    rc = await demo.run()
    out = capsys.readouterr().out
    assert rc == 0, out[-3000:]
    assert demo.faults.counts["dropped connections"] > 0 and demo.faults.counts["compactions"] == 1
    assert any(v is None for v in demo.expected.values()), "the workload deletes some Foos"
