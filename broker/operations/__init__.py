"""Seeing into and steering a running broker: request counters (observe), the Prometheus exposition,
the admin HTTP endpoint, the rebalance history file, test controls, and client quotas."""
