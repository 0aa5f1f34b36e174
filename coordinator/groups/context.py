"""What a group handler needs besides its group: the settings, the time, where its decisions go."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import GroupConfig
from ..runtime.outcome import Outcome


@dataclass(slots=True)
class Ctx:
    config: GroupConfig
    now_ms: int
    out: Outcome
