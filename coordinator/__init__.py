"""Kafka's classic consumer-group coordinator as pure state machines plus an asyncio shell.

- `classic.GroupStateMachine`: one `__consumer_offsets` partition; `handle(command, now_ms)`
  returns an `outcome.Outcome` (replies, records to persist, timers, events); `replay(record)`.
- `actor.GroupCoordinatorService`: per-group actors, keyed timers, persistence through an
  injected `append_records(partition, records)`.
- `commands`, `results`, `records`: the data that goes in, comes out, and gets stored.
- `testing.Harness`: a manual-clock driver for tests.
"""
