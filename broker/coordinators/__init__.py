"""Where the coordinators (kbroker.coordinator) meet the log: the `__consumer_offsets` writer and
loader of the group coordinator, and the transaction coordinator's service over `__transaction_state`."""
