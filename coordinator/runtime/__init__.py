"""The coordinator's runtime: the service that routes each request to its `__consumer_offsets`
partition (service.py), one runtime per partition with per-group order, write-then-respond and
timers (runtime.py), and the execution of a shard's decisions (outcome.py, execute.py). The home
of the generic `CoordinatorRuntime` over a `Shard` protocol (issue 39, item 4)."""
