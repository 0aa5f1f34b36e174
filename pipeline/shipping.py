"""The job ships itself to a cluster's executors: the `kbroker` package as a zip, added with
`SparkContext.addPyFile`, so the executors import the driver's very code (the decoders, the record
codec) without kbroker installed on the workers. What the package imports from elsewhere (pyarrow,
construct, crc32c, lz4, zstandard, cramjam: `pip install 'kbroker[pipeline]'` less kbroker itself)
must be in the workers' Python.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

# Not needed by executors: the tests, the benchmarks, the code generator, documents.
_LEAVE_OUT = {"tests", "bench", "tools", "docs", "docker", "build", "data", "report", "node_modules"}


def package_root() -> Path:
    """The installed `kbroker` package's folder (this module's parent's parent)."""
    return Path(__file__).resolve().parent.parent


def build_zip(target_dir: str | None = None) -> str:
    """kbroker.zip (Python sources and package data, `kbroker/...` inside) in a fresh directory."""
    root = package_root()
    folder = Path(target_dir or tempfile.mkdtemp(prefix="kbroker-ship-"))
    path = folder / "kbroker.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for dirpath, dirnames, filenames in os.walk(root):
            rel = Path(dirpath).relative_to(root)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__"))
                                 and not (rel == Path(".") and d in _LEAVE_OUT) and not d.endswith(".egg-info"))
            for name in sorted(filenames):
                if name.endswith((".py", ".json")):
                    file = Path(dirpath) / name
                    zf.write(file, str(Path("kbroker") / rel / name))
    return str(path)


def ship(spark: Any) -> str:
    path = build_zip()
    spark.sparkContext.addPyFile(path)
    return path
