"""Groups' dynamic config overrides (the GROUP config resource; Kafka keeps them in its metadata log as
ConfigRecords): one JSON file in the data directory, rewritten whole (write, fsync, rename) before an
IncrementalAlterConfigs is answered. The names, checks and order are coordinator/groups/group_configs.py's;
the defaults are the broker's `group.*` settings (their synonyms).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from ..coordinator.groups.group_configs import BY_NAME, GROUP_CONFIGS, validate

if TYPE_CHECKING:
    from .config import BrokerConfig

log = structlog.get_logger("kbroker.group_configs")

FILE = "group-configs.json"
# Kafka 4.4's defaults of the synonyms kbroker has no setting for.
_KAFKA_DEFAULTS = {
    "group.streams.assignors": "sticky", "group.consumer.assignment.interval.ms": "1000",
    "errors.deadletterqueue.copy.record.enable": "false", "share.auto.offset.reset": "latest",
    "group.streams.rack.aware.assignment.tags": "", "share.renew.acknowledge.enable": "true",
    "group.streams.initial.rebalance.delay.ms": "3000", "group.streams.assignment.interval.ms": "1000",
    "group.streams.heartbeat.interval.ms": "5000", "errors.deadletterqueue.topic.name": "",
    "group.share.assignment.interval.ms": "1000", "share.isolation.level": "read_uncommitted",
    "group.streams.session.timeout.ms": "45000", "group.streams.num.standby.replicas": "0",
    "group.streams.assignor.offload.enable": "true",
}


class GroupConfigStore:
    def __init__(self, data_dir: Path, config: BrokerConfig) -> None:
        self.path = Path(data_dir) / FILE
        self.defaults: dict[str, str] = {}
        for definition in GROUP_CONFIGS:
            attr = definition.synonym.replace(".", "_")
            value = getattr(config, attr, None)
            self.defaults[definition.name] = str(value) if value is not None else _KAFKA_DEFAULTS[definition.synonym]
        self.overrides: dict[str, dict[str, str]] = {}
        if self.path.exists():
            try:
                loaded = json.loads(self.path.read_text())
                self.overrides = {str(g): {str(k): str(v) for k, v in c.items() if k in BY_NAME}
                                  for g, c in loaded.items()}
            except (OSError, ValueError, AttributeError) as exc:
                log.error("group_configs_unreadable", path=str(self.path), error=repr(exc))

    def value(self, group: str, name: str) -> str:
        return self.overrides.get(group, {}).get(name, self.defaults[name])

    def int_value(self, group: str, name: str) -> int:
        return int(self.value(group, name))

    def alter(self, group: str, change: Callable[[dict[str, str]], dict[str, str]], validate_only: bool) -> None:
        """Apply `change` to the group's overrides; every value checked (GroupConfigError) before any is
        kept, and kept durably before this returns."""
        new = change(dict(self.overrides.get(group, {})))
        for name, value in new.items():
            validate(name, value)
        if validate_only:
            return
        if new:
            self.overrides[group] = new
        else:
            self.overrides.pop(group, None)
        self._save()

    def forget(self, group: str) -> None:
        """A deleted group's overrides go with it (Kafka's DeleteGroups removes them)."""
        if self.overrides.pop(group, None) is not None:
            self._save()

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(self.overrides, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
