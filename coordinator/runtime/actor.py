"""Kept for the import path `coordinator.actor.GroupCoordinatorService`: the coordinator is now
split into service.py (routing, prechecks), runtime.py (per partition: per-group order, writes,
timers) and classic.py (the shard)."""

from .service import GroupCoordinatorService

__all__ = ["GroupCoordinatorService"]
