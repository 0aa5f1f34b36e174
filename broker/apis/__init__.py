"""One module per Kafka API: API_KEY, VERSIONS and `handle(ctx, request)`.

`SERVED` lists them without importing them: the router loads a module on the first request of its
API, while ApiVersions advertises every entry from the start (a broker that is only asked
ApiVersions, Metadata and a few group APIs never imports the rest). tests/unit/test_router_lazy.py
checks the table against each module's API_KEY and VERSIONS, and that every module is listed.
The handlers' shared helpers (HELPERS) live beside them and serve no API.
"""

# what the handlers share: the group APIs' coordinator calls, repeated ids, the fetch sessions' cache,
# the bound on a request's state-file changes, the delegation token APIs' refusal
HELPERS = ("delegation_tokens", "fetch_sessions", "group_wire", "limits", "repeats")

# api key -> (module in this package, lowest version served, highest version served)
SERVED: dict[int, tuple[str, int, int]] = {
    0: ('produce', 0, 13),
    1: ('fetch', 0, 18),
    2: ('list_offsets', 0, 11),
    3: ('metadata', 0, 13),
    8: ('offset_commit', 0, 10),
    9: ('offset_fetch', 0, 10),
    10: ('find_coordinator', 0, 6),
    11: ('join_group', 0, 9),
    12: ('heartbeat', 0, 4),
    13: ('leave_group', 0, 5),
    14: ('sync_group', 0, 5),
    15: ('describe_groups', 0, 6),
    16: ('list_groups', 0, 5),
    17: ('sasl_handshake', 0, 1),
    18: ('api_versions', 0, 5),
    19: ('create_topics', 0, 7),
    20: ('delete_topics', 0, 6),
    21: ('delete_records', 0, 2),
    22: ('init_producer_id', 0, 5),
    23: ('offset_for_leader_epoch', 0, 4),
    24: ('add_partitions_to_txn', 0, 5),
    25: ('add_offsets_to_txn', 0, 4),
    26: ('end_txn', 0, 4),
    28: ('txn_offset_commit', 0, 4),
    29: ('describe_acls', 0, 3),
    30: ('create_acls', 0, 3),
    31: ('delete_acls', 0, 3),
    32: ('describe_configs', 0, 4),
    33: ('alter_configs', 0, 2),
    34: ('alter_replica_log_dirs', 0, 2),
    35: ('describe_log_dirs', 0, 5),
    36: ('sasl_authenticate', 0, 2),
    37: ('create_partitions', 0, 3),
    38: ('create_delegation_token', 0, 3),
    39: ('renew_delegation_token', 0, 2),
    40: ('expire_delegation_token', 0, 2),
    41: ('describe_delegation_token', 0, 3),
    42: ('delete_groups', 0, 3),
    43: ('elect_leaders', 0, 2),
    44: ('incremental_alter_configs', 0, 1),
    45: ('alter_partition_reassignments', 0, 1),
    46: ('list_partition_reassignments', 0, 0),
    47: ('offset_delete', 0, 0),
    48: ('describe_client_quotas', 0, 1),
    49: ('alter_client_quotas', 0, 1),
    50: ('describe_user_scram_credentials', 0, 0),
    51: ('alter_user_scram_credentials', 0, 0),
    55: ('describe_quorum', 0, 2),
    57: ('update_features', 0, 2),
    60: ('describe_cluster', 0, 2),
    61: ('describe_producers', 0, 0),
    64: ('unregister_broker', 0, 0),
    65: ('describe_transactions', 0, 0),
    66: ('list_transactions', 0, 2),
    68: ('consumer_group_heartbeat', 0, 1),
    69: ('consumer_group_describe', 0, 1),
    71: ('get_telemetry_subscriptions', 0, 0),
    72: ('push_telemetry', 0, 0),
    74: ('list_config_resources', 0, 1),
    75: ('describe_topic_partitions', 0, 0),
}
