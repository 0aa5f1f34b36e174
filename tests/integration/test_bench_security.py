"""bench.security runs: both listeners of one --dev-security broker give produce and consume figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kbroker.bench import security

ROOT = Path(__file__).resolve().parents[2]


def test_security_bench_measures_both_protocols():
    results = security.run(messages=2000, size=1024, repeat=1)
    assert set(results) == {"PLAINTEXT", "SASL_SSL"}
    for r in results.values():
        assert r["produce_mb_s"] > 0 and r["consume_mb_s"] > 0


def test_security_bench_has_help_with_size_flags():
    out = subprocess.run([sys.executable, "-m", "bench.security", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "--messages" in out.stdout, out.stderr
