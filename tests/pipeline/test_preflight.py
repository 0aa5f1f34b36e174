"""`kbroker analyze` with bad arguments, as the real CLI in a subprocess: one line on stderr, exit code 2,
and Spark never started (no JVM, none of its log lines)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbroker.pipeline import preflight


def _analyze(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbroker", "analyze", *args], capture_output=True, text=True,
                          timeout=120, env=env or dict(os.environ), cwd=tmp_path)


def _refused(done: subprocess.CompletedProcess, *needles: str) -> None:
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kbroker analyze: "), done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "log4j" not in done.stderr and done.stdout == ""
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_bad_arguments_are_one_line_before_spark(scenario, tmp_path) -> None:
    data = str(scenario.root)
    _refused(_analyze(tmp_path, "--data-dir", data, "--master", "garbage"), "--master 'garbage' is not a Spark master URL")
    (tmp_path / "afile").write_text("x")
    _refused(_analyze(tmp_path, "--data-dir", data, "--out", str(tmp_path / "afile" / "report")), "is a file")
    _refused(_analyze(tmp_path, "--data-dir", data, "--out", str(tmp_path / "afile")), "is a file, not a directory")
    (tmp_path / "empty").mkdir()
    _refused(_analyze(tmp_path, "--data-dir", str(tmp_path / "empty")), "is empty")
    (tmp_path / "foreign" / "photos").mkdir(parents=True)
    _refused(_analyze(tmp_path, "--data-dir", str(tmp_path / "foreign")), "not a kbroker data directory")
    _refused(_analyze(tmp_path, "--data-dir", data, "--broker-log", str(tmp_path / "nope.log")), "broker log")


def test_java_missing_or_too_old_is_one_line(scenario, tmp_path) -> None:
    data = str(scenario.root)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(Path(sys.executable).parent)  # our Python, no java
    _refused(_analyze(tmp_path, "--data-dir", data, env=env), "Java is not installed")
    old = tmp_path / "jdk11" / "bin"
    old.mkdir(parents=True)
    (old / "java").write_text('#!/bin/sh\necho \'openjdk version "11.0.22" 2024-01-16\' >&2\n')
    (old / "java").chmod(0o755)
    env["JAVA_HOME"] = str(tmp_path / "jdk11")
    _refused(_analyze(tmp_path, "--data-dir", data, env=env), "is Java 11: Spark needs Java 17 or newer")


@pytest.mark.parametrize("text,major", [('openjdk version "17.0.15" 2025-04-15', 17),
                                        ('java version "1.8.0_392"', 8), ('openjdk version "25" 2025-09-16', 25),
                                        ("nonsense", None)])
def test_java_versions_are_read(text, major) -> None:
    assert preflight.java_major(text) == major


@pytest.mark.parametrize("master", ["local", "local[*]", "local[2]", "local[2,3]", "spark://10.0.0.1:7077",
                                    "spark://a:7077,b:7077", "yarn", "k8s://https://host:6443"])
def test_master_urls_spark_takes_pass(master) -> None:
    preflight.check_master(master)


@pytest.mark.parametrize("master", ["garbage", "spark://host", "local[0]", "local[x]", "spark://h:7077/"])
def test_master_urls_spark_refuses_are_refused(master) -> None:
    with pytest.raises(preflight.PreflightError):
        preflight.check_master(master)
