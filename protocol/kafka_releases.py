"""What each Apache Kafka release answers to ApiVersions on its broker listener: its APIs and their
versions, its supported and finalized features. `kbroker serve --kafka-version 3.9` advertises and serves
that release's table (broker/network/router.py caps the routes to it); without the flag kbroker
advertises the newest release's table (LATEST).

The tables (kafka_releases.json beside this module) were not written by hand: tools/kafka_releases.py
started the newest release of each line from Maven Central and recorded its answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Mapping

_TABLES = Path(__file__).with_name("kafka_releases.json")
LATEST = "4.4"
_NAME = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")


@dataclass(frozen=True, slots=True)
class KafkaRelease:
    line: str  # "3.9": what --kafka-version names
    release: str  # "3.9.2": the release the table was taken from
    apis: Mapping[int, tuple[int, int]]  # api key -> (min version, max version) on the broker listener
    supported_features: Mapping[str, tuple[int, int]]  # feature -> (min level, max level)
    finalized_features: Mapping[str, int]  # feature -> finalized level, for those above 0

    @property
    def version(self) -> tuple[int, int]:
        major, minor = self.line.split(".")
        return int(major), int(minor)

    def serves(self, api_key: int, version: int) -> bool:
        low, high = self.apis.get(api_key, (0, -1))
        return low <= version <= high


@cache
def _load() -> dict[str, KafkaRelease]:
    raw = json.loads(_TABLES.read_text(encoding="utf-8"))
    return {
        line: KafkaRelease(
            line=line, release=table["release"],
            apis={int(key): (low, high) for key, (low, high) in table["apis"].items()},
            supported_features={name: (low, high) for name, (low, high) in table["supported_features"].items()},
            finalized_features=dict(table["finalized_features"]),
        )
        for line, table in raw.items()
    }


def lines() -> tuple[str, ...]:
    """The release lines with a table, oldest first ("3.6", ..., "4.4")."""
    return tuple(_load())


def kafka_release(name: str = LATEST) -> KafkaRelease:
    """The table of a release line, named `3.9` or by any of its releases (`3.9.0`, `3.9.2`: patch releases
    of a line serve the same APIs); ValueError naming the known lines otherwise."""
    match = _NAME.match(name.strip())
    tables = _load()
    line = f"{match.group(1)}.{match.group(2)}" if match else None
    if line not in tables:
        raise ValueError(f"{name!r} is not a Kafka release kbroker can answer as; one of {', '.join(tables)}")
    return tables[line]
