"""Kafka's consumer-group coordinator as pure state machines plus a thin asyncio shell.

Folders: runtime/ (service, runtime, outcome, execute), groups/ (commands, results, group types,
history), groups/classic/ (the shard and the classic protocol), groups/consumer/ (KIP-848), txn/
(the transaction coordinator); the record formats are the protocol's (protocol/records/). The
module names below are unique across the folders.

Layers (as Kafka 4's GroupCoordinatorService / CoordinatorRuntime / GroupCoordinatorShard):

- `service.GroupCoordinatorService` (re-exported by `actor` for older imports): the request
  front. Prechecks once per request, routes by `__consumer_offsets` partition (Java's
  String.hashCode, cached per group id), `submit` / `submit_now`, life cycle, retention check.
- `runtime.PartitionRuntime`: one per loaded partition. Per-group order without locks (an idle
  group's command runs inline; a group waiting for a write queues what follows), write-then-
  respond through `execute.execute_outcome`, timers bridged to the group, load / unload.
- `classic.GroupStateMachine`: the shard, every group of one partition. `handle(command, now_ms)`
  returns an `outcome.Outcome` (replies, records to persist, timers, events); `replay(record)`.
  Consumer groups (KIP-848: consumer_*.py, migration.py, downgrade.py) plug in behind it as
  `consumer_machine.ConsumerGroups`, which takes every command about its groups.
- Classic groups: `transitions` (every state change, with the table of which event moves which
  state), `join`, `membership`, `offsets`, `admin`, `controls` (test controls), `rebalance` (shared
  helpers); `group.ClassicGroup` and `member.Member` hold the state.
- `commands`, `results`, and the protocol's `records` (+ their `codec`): what goes in, comes out,
  gets stored.
- `txn/`: the transaction coordinator (`__transaction_state`), separate from groups.
- `tests/coordinator_harness.Harness`: a manual-clock driver for one shard in tests.

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
    handleCommitOffsets             offsets.handle_offset_commit           test_coordinator_offsets
    handleFetchOffsets              offsets.handle_offset_fetch            test_coordinator_offsets
    handleDeleteOffsets             offsets.handle_offset_delete           test_coordinator_offsets
    cleanupGroupMetadata,           offsets.handle_offset_expiry_check     test_coordinator_offsets
      removeExpiredOffsets, getExpiredOffsets
    handleDeleteGroups              admin.handle_delete_group              test_coordinator_offsets
    handleDescribeGroup             admin.handle_describe_group            test_coordinator_load
    handleListGroups                admin.list_groups                      test_coordinator_load
    loadGroupsAndOffsets            classic.GroupStateMachine.replay       test_coordinator_load
    onGroupLoaded                   classic.GroupStateMachine.finish_load  test_coordinator_load
    onGroupUnloaded                 classic.GroupStateMachine.unload       test_coordinator_load
    transitionTo, canRebalance      group.ClassicGroup.transition_to,      test_coordinator_group
                                      can_rebalance (VALID_PREVIOUS_STATES)
    initNextGeneration              group.ClassicGroup.init_next_generation test_coordinator_group
    selectProtocol, candidateProtocols, supportsProtocols, vote
                                    group.ClassicGroup.select_protocol, ..., member.Member.vote
                                                                           test_coordinator_group
    partitionFor                    partitioning.partition_for             test_coordinator_partitioning
    isCoordinatorForGroup,          service.GroupCoordinatorService._route test_coordinator_actor,
      isCoordinatorLoadingInProgress  (the prechecks)                      test_coordinator_runtime

Where we differ from the seeds on purpose, the code says so at the spot (e.g. the initial delay
on removal, transitions.maybe_complete_join_phase: Kafka 4's Java behaviour).
"""
