"""Kafka's consumer-group and transaction coordinators as pure state machines on one runtime.

Folders: runtime/ (the coordinator runtime: shard, runtime, partition, outcome, execute), groups/ (the
group coordinator: service, shard, store, offset_store, group_types, registry, commands, results,
events, history), groups/classic/ and groups/consumer/ (the two group types), txn/ (the transaction
coordinator: coordinator, shard, service, commands); the record formats are the protocol's
(protocol/records/). A name below is the module of the folder it is listed under.

Layers (as Kafka 4's GroupCoordinatorService / CoordinatorRuntime / GroupCoordinatorShard):

- `runtime/`: one runtime for every coordinator, knowing a shard only by `shard.Shard` (handle,
  replay, on_write_done, begin_load / finish_load / unload, key_of, error_result) and writing only
  through `shard.PartitionWriter`. `runtime.CoordinatorRuntime`: loaded partitions, prechecks,
  routing, life cycle; `partition.PartitionRuntime`: per-key order without locks (an idle key's
  command runs inline; a key waiting for a write queues what follows), write-then-respond through
  `execute.execute_outcome`, keyed timers bridged to the shard.
- `groups/service.GroupCoordinatorService`: the group front. Prechecks once per request, routes by
  `__consumer_offsets` partition (Java's String.hashCode, cached per group id), `submit` /
  `submit_now`, life cycle, retention check, test controls.
- `groups/shard.GroupCoordinatorShard`: the shard of one partition. One map of groups of every type
  (`store.GroupStore`), one offset store (`offset_store.OffsetStore`: commit, fetch, delete, retention,
  once for every type, each group answering the `group_types.Group` protocol), and the registered
  group types (`registry.GROUP_TYPES`: `classic.ClassicGroups`, and the KIP-848 consumer groups,
  `consumer_machine.ConsumerGroups`, imported with their first use). A type gets its own commands,
  records and follow-ups; a group of another type is refused as Kafka refuses it.
- Classic groups: `transitions` (every state change, with the table of which event moves which
  state), `join`, `membership`, `admin`, `controls` (test controls), `rebalance` (shared helpers);
  `group.ClassicGroup` and `member.Member` hold the state.
- `commands`, `results`, `events` and the protocol's `records` (+ their `codec`): what goes in,
  comes out, is reported, gets stored.
- `txn/`: the transaction coordinator on the same runtime (`coordinator.TxnCoordinator` decides,
  `shard.TransactionShard` per `__transaction_state` partition, `service.TransactionCoordinatorService`).
- `tests/coordinator_harness.Harness`: a manual-clock driver for one group shard in tests.

Seed-to-code index: the classic protocol as the seeds (/work/shared/seeds/, Kafka's Scala
GroupCoordinator and GroupMetadata) name it -> where it lives here -> the unit tests that follow
that method branch by branch (tests/unit/, named `test_<seedMethod>_...`).

    handleJoinGroup                 join.handle_join_group                 test_coordinator_join
    acceptJoiningMember             join.accept_joining_member             test_coordinator_join
    doUnknownJoinGroup              join.do_unknown_join_group             test_coordinator_join
    doJoinGroup                     join.do_join_group                     test_coordinator_join
    addMemberAndRebalance           join.add_member_and_rebalance          test_coordinator_join
    updateMemberAndRebalance        join.update_member_and_rebalance       test_coordinator_join
    updateStaticMemberAndRebalance  join.update_static_member_and_rebalance test_coordinator_join
    replaceStaticMember             group.ClassicGroup.replace_static_member test_coordinator_join
    maybePrepareRebalance,          transitions.maybe_prepare_rebalance_or_complete_join,
      prepareRebalance                prepare_rebalance                    test_coordinator_join
    InitialDelayedJoin              transitions.on_initial_join_expired    test_coordinator_join
    DelayedJoin / onCompleteJoin    transitions.maybe_complete_join_phase, test_coordinator_join
                                      complete_join
    handleSyncGroup                 membership.handle_sync_group           test_coordinator_membership
    (storeGroup callback)           membership.on_assignment_written       test_coordinator_membership
    handleHeartbeat                 membership.handle_heartbeat            test_coordinator_membership
    handleLeaveGroup                membership.handle_leave_group          test_coordinator_membership
    onExpireHeartbeat/onMemberFailure membership.on_heartbeat_expired,     test_coordinator_membership
                                      transitions.remove_member_and_update_group
    removePendingMember             transitions.remove_pending_member_and_update_group
                                                                           test_coordinator_membership
    onExpirePendingSync             membership.on_sync_expired             test_coordinator_membership
    handleCommitOffsets             offset_store.OffsetStore.commit,       test_coordinator_offsets
                                      group.ClassicGroup.validate_offset_commit
    handleFetchOffsets              offset_store.OffsetStore.fetch         test_coordinator_offsets
    handleDeleteOffsets             offset_store.OffsetStore.delete        test_coordinator_offsets
    cleanupGroupMetadata,           shard.GroupCoordinatorShard._expire_offsets,
      removeExpiredOffsets,           offset_store.OffsetStore.expired,    test_coordinator_offsets
      getExpiredOffsets               group.ClassicGroup.offset_expiration
    handleDeleteGroups              shard.GroupCoordinatorShard._delete_group test_coordinator_offsets
    handleDescribeGroup             admin.handle_describe_group            test_coordinator_load
    handleListGroups                shard.GroupCoordinatorShard.list_groups test_coordinator_load
    loadGroupsAndOffsets            shard.GroupCoordinatorShard.replay,    test_coordinator_load
                                      classic.ClassicGroups.replay
    onGroupLoaded                   classic.ClassicGroups.finish_load      test_coordinator_load
    onGroupUnloaded                 classic.ClassicGroups.unload           test_coordinator_load
    transitionTo, canRebalance      group.ClassicGroup.transition_to,      test_coordinator_group
                                      can_rebalance (VALID_PREVIOUS_STATES)
    initNextGeneration              group.ClassicGroup.init_next_generation test_coordinator_group
    selectProtocol, candidateProtocols, supportsProtocols, vote
                                    group.ClassicGroup.select_protocol, ..., member.Member.vote
                                                                           test_coordinator_group
    partitionFor                    partitioning.partition_for             test_coordinator_partitioning
    isCoordinatorForGroup,          service.GroupCoordinatorService._route, test_coordinator_actor,
                                      runtime.CoordinatorRuntime.precheck
      isCoordinatorLoadingInProgress  (the prechecks)                      test_coordinator_runtime

Where we differ from the seeds on purpose, the code says so at the spot (e.g. the initial delay
on removal, transitions.maybe_complete_join_phase: Kafka 4's Java behaviour).
"""
