"""`kinformer demo` runs non-interactively, injects its faults, converges and exits 0."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from typing import Any

import kinformer as ki
from kinformer.demo.sharded import ReconcileTracker


def test_demo_converges_under_faults() -> None:
    """Piped (stdout is not a terminal), the demo prints what --plain prints: log lines and a plain summary."""
    proc = subprocess.run(
        [sys.executable, "-m", "kinformer.cli", "demo", "--duration", "8", "--foos", "12", "--timeout", "60"],
        capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "every Foo converged" in out
    assert "forced relist" in out and "dropped" in out
    lines = proc.stdout.splitlines()
    assert lines and all(re.match(r"\s*\d+\.\ds  ", line) for line in lines), "log lines only, no tables"
    assert len(lines) < 60, proc.stdout
    # the slow handler's figures are final: taken once it went idle, before the stop could cut a call short
    assert re.search(r"summary: slow handler: processed [1-9]\d* events, still pending 0$", proc.stdout, re.M), out
    relists = re.search(r"summary: relists \(after 410\): foos (\d+)", out)
    assert relists and int(relists.group(1)) >= 1, "the forced 410 must make the foos informer relist"
    # the summary's figures agree with each other: every injected failure is one of the reconcile errors
    injected = int(re.search(r"reconcile failures: (\d+)", out).group(1))
    errors = int(re.search(r"summary: reconcile errors \(retried\): foo (\d+)", out).group(1))
    assert 1 <= injected <= errors
    cached = int(re.search(r"summary: cache size: foos (\d+)", out).group(1))
    assert re.search(rf"converged: {cached} Foos match their Deployments", out)


def test_sharding_demo_spreads_the_keys_and_hands_them_over() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kinformer.cli", "demo", "--plain", "--sharding", "--replicas", "3",
         "--duration", "6", "--foos", "12", "--timeout", "60"],
        capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "every Foo converged" in out
    assert "forced relist" in out and "dropped" in out
    split = dict(re.findall(r"(member-\d) (\d+)", re.search(r"rendezvous hashing splits the 12 Foos: (.*)", out)[1]))
    assert sorted(split) == ["member-0", "member-1", "member-2"] and sum(map(int, split.values())) == 12
    spread = dict(re.findall(r"(member-\d) reconciled (\d+) Foos", re.search(r"spread .*", out)[0]))
    assert sorted(spread) == ["member-0", "member-1", "member-2"], out[-4000:]
    assert all(int(n) >= 1 for n in spread.values())
    assert int(spread["member-2"]) == 12, "the last member standing reconciled every Foo"
    assert re.search(r"no overlap: \d+ reconciles by 3 members", out) and "OVERLAP" not in out
    assert re.search(r"hand-off: member-0's \d+ keys taken over by .* after it was killed; none lost", out)
    assert re.search(r"hand-off: member-1's \d+ keys taken over by member-2 \(\d+\) .* after it was asked to stop; "
                     r"none lost", out)


async def test_the_sharded_demos_tracker_sees_two_members_on_one_key() -> None:
    """The overlap detector behind the sharded demo's "no overlap" line can fail."""
    tracker = ReconcileTracker()
    release = asyncio.Event()

    class Held:
        def __init__(self) -> None:
            self.entered = asyncio.Event()

        async def reconcile(self, request: Any) -> None:
            self.entered.set()
            await release.wait()

    inner = {m: Held() for m in ("member-0", "member-1")}
    wrapped = {m: tracker.wrap(m)("foo", held) for m, held in inner.items()}
    key = ki.Request("demo-a", "foo-00")
    first = asyncio.create_task(wrapped["member-0"].reconcile(key))
    await asyncio.wait_for(inner["member-0"].entered.wait(), 5)
    since = asyncio.get_running_loop().time()
    second = asyncio.create_task(wrapped["member-1"].reconcile(key))
    await asyncio.wait_for(inner["member-1"].entered.wait(), 5)
    release.set()
    await asyncio.gather(first, second)
    assert tracker.overlaps == [("foo", "demo-a/foo-00", "member-0", "member-1")]
    assert tracker.taken_by(("foo", "demo-a/foo-00"), ["member-1"], since) == "member-1"
    assert tracker.keys_of("member-0", "foo") == {"demo-a/foo-00"} and tracker.active == {}
    await wrapped["member-0"].reconcile(ki.Request("demo-a", "foo-01"))  # one at a time: no overlap
    assert len(tracker.overlaps) == 1
