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
