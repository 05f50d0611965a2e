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
    final_table = out[out.rindex("phase: converged"):]
    relists = re.search(r"relists \(after 410\)\s*│\s*(\d+)", final_table)
    assert relists and int(relists.group(1)) >= 1, "the forced 410 must make the foos informer relist"
