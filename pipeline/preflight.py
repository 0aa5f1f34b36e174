"""What `kbroker analyze` checks before it starts Spark (which costs seconds): each bad argument is one
line and exit code 2, never a traceback from the JVM.

Checked: the master URL's form, the data directory (there, a directory, not empty, laid out as kbroker
lays it out), the broker log, the output location (a directory that can be written, not under a
file), and Java (found, and 17 or newer: PySpark 4's floor).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from . import storage

MIN_JAVA = 17

_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?"          # local, local[4], local[*], local[2,3]
    r"|local-cluster\[[1-9]\d*,\s*[1-9]\d*,\s*[1-9]\d*\]"  # local-cluster[workers,cores,memory MB]
    r"|spark://[^\s/:,]+:\d{1,5}(,[^\s/:,]+:\d{1,5})*"    # standalone, HA masters comma-separated
    r"|yarn|k8s://\S+")


class PreflightError(Exception):
    """One line for the operator."""


def check_master(master: str | None) -> None:
    if master is None:
        return
    if not _MASTER.fullmatch(master.strip()):
        raise PreflightError(f"--master {master!r} is not a Spark master URL: use local, local[N], local[*], "
                             f"spark://HOST:PORT, yarn or k8s://URL")


def is_local_master(master: str) -> bool:
    return master.startswith("local")


def check_data_dir(data_dir: str) -> None:
    kind = storage.kind(data_dir)
    if kind == "missing":
        raise PreflightError(f"data directory {data_dir!r} does not exist")
    if kind != "dir":
        raise PreflightError(f"data directory {data_dir!r} is not a directory")
    entries = storage.listdir(data_dir)
    if not entries:
        raise PreflightError(f"data directory {data_dir!r} is empty: point --data-dir at a kbroker broker's "
                             f"--data-dir")
    names = {e.name for e in entries if e.is_dir}
    if "topics" not in names and not any(re.fullmatch(r".+-\d+", n) for n in names):
        raise PreflightError(f"{data_dir!r} is not a kbroker data directory (no topics/ folder, no "
                             f"<topic>-<partition> folders)")


def check_output(out: str) -> None:
    """The output must be a directory we can create or write; a local one is checked here, a remote
    one (hdfs:, s3a:) by Spark's first write."""
    if not storage.is_local(out):
        return
    path = Path(storage.local_path(out)).absolute()
    if path.exists() and not path.is_dir():
        raise PreflightError(f"--out {out!r} is a file, not a directory")
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise PreflightError(f"--out {out!r} cannot be created: {str(probe)!r} is a file")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise PreflightError(f"--out {out!r} cannot be written: no write permission on {str(probe)!r}")


def java_command() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def java_major(version_output: str) -> int | None:
    """17 from `openjdk version "17.0.15"`, 8 from `java version "1.8.0_392"`."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if match is None:
        return None
    major = int(match[1])
    return int(match[2] or 0) if major == 1 else major


def check_java() -> None:
    java = java_command()
    if java is None:
        raise PreflightError(f"Java is not installed (no JAVA_HOME, no java on PATH): Spark needs Java "
                             f"{MIN_JAVA} or newer (Debian: apt-get install openjdk-{MIN_JAVA}-jre-headless)")
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PreflightError(f"{java} -version failed: {exc}") from None
    major = java_major(done.stderr + done.stdout)
    if major is None:
        raise PreflightError(f"cannot tell the version of {java} from its -version output")
    if major < MIN_JAVA:
        raise PreflightError(f"{java} is Java {major}: Spark needs Java {MIN_JAVA} or newer (set JAVA_HOME)")


def spark_python(master: str | None) -> str:
    """The Python Spark runs for this job's Python code (executors, and the data source's planning on
    the driver): ours on a local master, else spark.pyspark.python, PYSPARK_PYTHON, or python3."""
    if master is None or is_local_master(master):
        import sys

        return os.environ.get("PYSPARK_PYTHON", sys.executable)
    match = re.search(r"spark\.pyspark\.python=(\S+)", os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    return match[1] if match else os.environ.get("PYSPARK_PYTHON", "python3")


def check_spark_python(master: str | None) -> None:
    """On a cluster the executors' Python must have kbroker[pipeline]'s dependencies; this machine's
    is asked here (the data source plans on it too), the workers' when they run the job."""
    if master is None or is_local_master(master):
        return
    python = spark_python(master)
    probe = "import pyarrow, pandas, construct, crc32c"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PreflightError(f"cannot run the Python Spark will use ({python}): {exc}; set PYSPARK_PYTHON or "
                             f"--conf spark.pyspark.python") from None
    if done.returncode != 0:
        missing = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise PreflightError(f"the Python Spark will use ({python}) cannot run the job ({missing}): install "
                             f"kbroker[pipeline]'s dependencies there, or set PYSPARK_PYTHON / spark.pyspark.python")
