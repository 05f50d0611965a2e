"""`kinformer demo` runs non-interactively, injects its faults, converges and exits 0."""

from __future__ import annotations

import re
import subprocess
import sys


def test_demo_converges_under_faults() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kinformer.cli", "demo", "--plain", "--duration", "8", "--foos", "12",
         "--timeout", "60"],
        capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "every Foo converged" in out
    assert "forced relist" in out and "dropped" in out
    lines = proc.stdout.splitlines()
    assert lines and all(re.match(r"\s*\d+\.\ds  ", line) for line in lines), "--plain prints log lines only"
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
