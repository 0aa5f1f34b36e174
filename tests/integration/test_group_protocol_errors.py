"""Group APIs on the wire, with kbroker's own codec over plain sockets against a real broker process.

Each test drives the classic group protocol by hand (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit/Fetch/Delete, Describe/List/DeleteGroups, FindCoordinator) to reach the error paths
clients hide: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, INCONSISTENT_GROUP_PROTOCOL,
GROUP_MAX_SIZE_REACHED, INVALID_SESSION_TIMEOUT, the MEMBER_ID_REQUIRED round trip, FENCED_INSTANCE_ID,
REBALANCE_IN_PROGRESS, NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC, and the exact shape of each
response version. One broker serves the module (`--group-max-size 2`, no initial rebalance delay);
every test uses its own group ids.
"""

from __future__ import annotations

import re
import threading
import time
import uuid

import pytest

from kbroker.coordinator.groups.classic.subscription import encode_subscription_topics
from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.messages.delete_groups_request import DeleteGroupsRequest
from kbroker.protocol.messages.describe_groups_request import DescribeGroupsRequest
from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kbroker.protocol.messages.heartbeat_request import HeartbeatRequest
from kbroker.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from kbroker.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from kbroker.protocol.messages.list_groups_request import ListGroupsRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kbroker.protocol.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kbroker.protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from kbroker.protocol.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire as _BaseWire

pytestmark = pytest.mark.timeout(120)

FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST, DELETE_GROUPS = 10, 11, 12, 13, 14, 15, 16, 42
OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE, METADATA = 8, 9, 47, 3
CLIENT_ID = "wire-groups"
SESSION_MS = 10_000


class Wire(_BaseWire):
    def __init__(self, bootstrap: str, client_id: str = CLIENT_ID) -> None:
        super().__init__(bootstrap, client_id)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("group-wire") / "data", "--group-initial-rebalance-delay-ms", "0",
                         "--group-max-size", "2", "--num-partitions", "3")
    wire = Wire(proc.bootstrap)
    deadline = time.monotonic() + 30
    while wire.call(LIST, 4, ListGroupsRequest()).error_code != E.NONE:  # __consumer_offsets still loading
        assert time.monotonic() < deadline, "group coordinator never finished loading"
        time.sleep(0.1)
    wire.call(METADATA, 4, MetadataRequest(topics=[MetadataRequestTopic(name=t) for t in ("orders", "audit")],
                                           allow_auto_topic_creation=True))
    wire.close()
    yield proc
    proc.stop()


@pytest.fixture
def wire(broker):
    w = Wire(broker.bootstrap)
    yield w
    w.close()


def group_name() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


SUBSCRIPTION = encode_subscription_topics(["orders"])


def join_request(group: str, member_id: str = "", *, instance_id: str | None = None, session_ms: int = SESSION_MS,
                 protocol_type: str = "consumer", protocols: tuple[str, ...] = ("range",),
                 metadata: bytes = SUBSCRIPTION) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=SESSION_MS, member_id=member_id,
        group_instance_id=instance_id, protocol_type=protocol_type,
        protocols=[JoinGroupRequestProtocol(name, metadata) for name in protocols],
    )


def join(wire: Wire, group: str, member_id: str = "", version: int = 5, **kw):
    """JoinGroup, doing the MEMBER_ID_REQUIRED round trip of a new dynamic member (v4+)."""
    response = wire.call(JOIN, version, join_request(group, member_id, **kw))
    if response.error_code == E.MEMBER_ID_REQUIRED:
        response = wire.call(JOIN, version, join_request(group, response.member_id, **kw))
    return response


def sync(wire: Wire, group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None,
         version: int = 3, instance_id: str | None = None):
    return wire.call(SYNC, version, SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id,
        protocol_type="consumer", protocol_name="range",
        assignments=[SyncGroupRequestAssignment(m, a) for m, a in (assignments or {}).items()],
    ))


def heartbeat(wire: Wire, group: str, generation: int, member_id: str, instance_id: str | None = None,
              version: int = 3) -> int:
    return wire.call(HEARTBEAT, version, HeartbeatRequest(group, generation, member_id, instance_id)).error_code


def stable_single(wire: Wire, group: str, assignment: bytes = b"\x00\x01assigned", **kw):
    """A group with one member, Stable: returns (member id, generation)."""
    joined = join(wire, group, **kw)
    assert joined.error_code == E.NONE, joined
    synced = sync(wire, group, joined.generation_id, joined.member_id, {joined.member_id: assignment},
                  instance_id=kw.get("instance_id"))
    assert synced.error_code == E.NONE, synced
    assert synced.assignment == assignment
    return joined.member_id, joined.generation_id


def describe(wire: Wire, *groups: str, version: int = 5, include_ops: bool = False):
    return wire.call(DESCRIBE, version, DescribeGroupsRequest(list(groups), include_ops)).groups


def commit(wire: Wire, group: str, offsets: dict[tuple[str, int], int], generation: int = -1, member_id: str = "",
           version: int = 8, metadata: str = "", instance_id: str | None = None) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(OffsetCommitRequestPartition(partition, offset, -1, metadata))
    response = wire.call(OFFSET_COMMIT, version, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=instance_id,
        topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    ))
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


class Background:
    """Runs one blocking call (a parked JoinGroup) on its own connection."""

    def __init__(self, fn, *args, **kwargs) -> None:
        self.result = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn, args, kwargs), daemon=True)
        self.thread.start()

    def _run(self, fn, args, kwargs) -> None:
        try:
            self.result = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - re-raised in get()
            self.error = e

    def get(self, timeout: float = 30):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "call did not return"
        if self.error is not None:
            raise self.error
        return self.result


def wait_state(wire: Wire, group: str, state: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while describe(wire, group)[0].group_state != state:
        assert time.monotonic() < deadline, f"{group} never reached {state}"
        time.sleep(0.02)


def two_member_group(broker: BrokerProcess, wire: Wire, group: str):
    """A Stable group of two members (A on `wire`, B on its own connection). Along the way, A's
    heartbeat during the rebalance that B's arrival starts must say REBALANCE_IN_PROGRESS."""
    a, gen1 = stable_single(wire, group)
    other = Wire(broker.bootstrap, "wire-groups-b")
    b_join = Background(join, other, group)
    wait_state(wire, group, "PreparingRebalance")
    assert heartbeat(wire, group, gen1, a) == E.REBALANCE_IN_PROGRESS
    a_rejoin = join(wire, group, a)
    b_joined = b_join.get()
    assert a_rejoin.error_code == E.NONE and b_joined.error_code == E.NONE
    assert a_rejoin.generation_id == b_joined.generation_id == gen1 + 1
    leader = a_rejoin if a_rejoin.leader == a else b_joined
    assert {m.member_id for m in leader.members} == {a, b_joined.member_id}
    gen2 = a_rejoin.generation_id
    assignments = {a: b"A-assignment", b_joined.member_id: b"B-assignment"}
    a_sync = Background(sync, wire, group, gen2, a, assignments if leader is a_rejoin else None)
    b_sync = sync(other, group, gen2, b_joined.member_id, assignments if leader is b_joined else None)
    assert a_sync.get().assignment == b"A-assignment"
    assert b_sync.assignment == b"B-assignment"
    return other, a, b_joined.member_id, gen2


# -- FindCoordinator ----------------------------------------------------------------------------------------------


def test_find_coordinator_v0_to_v3_single_key(broker, wire):
    host, port = broker.bootstrap.rsplit(":", 1)
    for version in (0, 1, 2, 3):
        r = wire.call(FIND_COORDINATOR, version, FindCoordinatorRequest(key="any-group", key_type=0))
        assert (r.error_code, r.node_id, r.host, r.port) == (E.NONE, 1, host, int(port)), version
        if version >= 1:
            assert r.error_message == "NONE"  # Kafka's Errors.NONE.message()
    # Transactions: this node is the transaction coordinator too.
    r = wire.call(FIND_COORDINATOR, 3, FindCoordinatorRequest(key="txn-1", key_type=1))
    assert (r.error_code, r.node_id, r.host, r.port) == (E.NONE, 1, host, int(port))
    # Share keys need v6.
    r = wire.call(FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g:AAAAAAAAAAAAAAAAAAAAAA:0", key_type=2))
    assert r.error_code == E.INVALID_REQUEST


def test_find_coordinator_v4_batched_keys(broker, wire):
    host, port = broker.bootstrap.rsplit(":", 1)
    keys = ["group-a", "group-b", "émoji-😀-group"]
    for version in (4, 5, 6):
        r = wire.call(FIND_COORDINATOR, version, FindCoordinatorRequest(key_type=0, coordinator_keys=keys))
        assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in r.coordinators] == [
            (k, E.NONE, 1, host, int(port)) for k in keys
        ]
    r = wire.call(FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["t1", "t2"]))
    assert [(c.key, c.error_code, c.node_id) for c in r.coordinators] == [("t1", E.NONE, 1), ("t2", E.NONE, 1)]
    r = wire.call(FIND_COORDINATOR, 5, FindCoordinatorRequest(key_type=2, coordinator_keys=["g:AAAAAAAAAAAAAAAAAAAAAA:0"]))
    assert r.coordinators[0].error_code == E.INVALID_REQUEST
    r = wire.call(FIND_COORDINATOR, 6, FindCoordinatorRequest(
        key_type=2, coordinator_keys=["g:AAAAAAAAAAAAAAAAAAAAAA:0", "not-a-share-key"]))
    assert [c.error_code for c in r.coordinators] == [E.COORDINATOR_NOT_AVAILABLE, E.INVALID_REQUEST]
    r = wire.call(FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=9, coordinator_keys=["x"]))
    assert r.coordinators[0].error_code == E.INVALID_REQUEST


# -- JoinGroup ----------------------------------------------------------------------------------------------------

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.mark.parametrize("version", [4, 6, 9])
def test_member_id_required_round_trip(wire, version):
    group = group_name()
    first = wire.call(JOIN, version, join_request(group))
    assert first.error_code == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith(CLIENT_ID + "-") and UUID_RE.fullmatch(first.member_id[len(CLIENT_ID) + 1:])
    assert first.generation_id == -1 and first.members == []
    second = wire.call(JOIN, version, join_request(group, first.member_id))
    assert second.error_code == E.NONE
    assert second.member_id == second.leader == first.member_id
    assert second.generation_id == 1
    assert second.protocol_name == "range"
    if version >= 7:
        assert second.protocol_type == "consumer"
    assert [(m.member_id, m.metadata) for m in second.members] == [(first.member_id, SUBSCRIPTION)]


@pytest.mark.parametrize("version", [0, 1, 3])
def test_join_before_v4_needs_no_member_id_round_trip(wire, version):
    group = group_name()
    joined = wire.call(JOIN, version, join_request(group))
    assert joined.error_code == E.NONE
    assert joined.member_id.startswith(CLIENT_ID + "-")
    assert joined.leader == joined.member_id and joined.generation_id == 1
    synced = sync(wire, group, 1, joined.member_id, {joined.member_id: b"x"}, version=0)
    assert synced.error_code == E.NONE and synced.assignment == b"x"


def test_invalid_session_timeout(wire):
    group = group_name()
    for session in (5_999, 1_800_001):
        r = wire.call(JOIN, 5, join_request(group, session_ms=session))
        assert r.error_code == E.INVALID_SESSION_TIMEOUT, session
    assert describe(wire, group)[0].group_state == "Dead"  # nothing was created


def test_inconsistent_group_protocol(wire):
    group = group_name()
    member, generation = stable_single(wire, group)
    # Nothing in common with the group's protocols.
    r = wire.call(JOIN, 3, join_request(group, protocols=("roundrobin",)))
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # Another protocol type.
    r = wire.call(JOIN, 3, join_request(group, protocol_type="connect"))
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # An empty protocol list, in a group of its own.
    r = wire.call(JOIN, 3, join_request(group_name(), protocols=()))
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # SyncGroup v5: protocol type and name are mandatory, and must match the group.
    for ptype, pname in ((None, "range"), ("consumer", None), ("consumer", "roundrobin"), ("connect", "range")):
        r = wire.call(SYNC, 5, SyncGroupRequest(group, generation, member, None, ptype, pname, []))
        assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL, (ptype, pname)
    r = wire.call(SYNC, 5, SyncGroupRequest(group, generation, member, None, "consumer", "range", []))
    assert (r.error_code, r.protocol_type, r.protocol_name) == (E.NONE, "consumer", "range")


def test_illegal_generation_and_unknown_member(wire):
    group = group_name()
    member, generation = stable_single(wire, group)
    assert heartbeat(wire, group, generation, member) == E.NONE
    assert heartbeat(wire, group, generation + 1, member) == E.ILLEGAL_GENERATION
    assert heartbeat(wire, group, generation, "nobody") == E.UNKNOWN_MEMBER_ID
    assert sync(wire, group, generation + 1, member).error_code == E.ILLEGAL_GENERATION
    assert sync(wire, group, generation, "nobody").error_code == E.UNKNOWN_MEMBER_ID
    assert commit(wire, group, {("orders", 0): 5}, generation + 1, member) == {("orders", 0): E.ILLEGAL_GENERATION}
    assert commit(wire, group, {("orders", 0): 5}, generation, "nobody") == {("orders", 0): E.UNKNOWN_MEMBER_ID}
    assert commit(wire, group, {("orders", 0): 5}, generation, member) == {("orders", 0): E.NONE}
    # A known member id the group does not know, on JoinGroup.
    assert wire.call(JOIN, 5, join_request(group, "nobody")).error_code == E.UNKNOWN_MEMBER_ID
    # Heartbeat to a group that does not exist.
    assert heartbeat(wire, group_name(), 1, "nobody") == E.UNKNOWN_MEMBER_ID


def test_rebalance_in_progress_then_group_max_size(broker, wire):
    group = group_name()
    other, a, b, generation = two_member_group(broker, wire, group)
    try:
        assert heartbeat(wire, group, generation, a) == E.NONE
        assert heartbeat(other, group, generation, b) == E.NONE
        # The group is full (--group-max-size 2): a third member is refused, also after its member id round trip.
        third = Wire(broker.bootstrap, "wire-groups-c")
        assert third.call(JOIN, 3, join_request(group)).error_code == E.GROUP_MAX_SIZE_REACHED
        assert join(third, group, version=5).error_code == E.GROUP_MAX_SIZE_REACHED
        third.close()
        d = describe(wire, group)[0]
        assert d.group_state == "Stable" and len(d.members) == 2
        # Existing members are unaffected.
        assert heartbeat(wire, group, generation, a) == E.NONE
    finally:
        other.close()


def test_fenced_instance_id(wire):
    group = group_name()
    old_member, generation = stable_single(wire, group, instance_id="instance-1")
    # The same instance id with an unknown member id replaces the member (a static member restarting) ...
    again = wire.call(JOIN, 5, join_request(group, "", instance_id="instance-1"))
    assert again.error_code == E.NONE and again.member_id != old_member
    # ... and fences the old member id.
    assert heartbeat(wire, group, generation, old_member, "instance-1") == E.FENCED_INSTANCE_ID
    assert sync(wire, group, generation, old_member, instance_id="instance-1").error_code == E.FENCED_INSTANCE_ID
    assert commit(wire, group, {("orders", 1): 3}, generation, old_member, instance_id="instance-1") == {
        ("orders", 1): E.FENCED_INSTANCE_ID}
    bogus = wire.call(JOIN, 5, join_request(group, "some-other-id", instance_id="instance-1"))
    assert bogus.error_code == E.FENCED_INSTANCE_ID
    # The replacement is the member now.
    assert heartbeat(wire, group, again.generation_id, again.member_id, "instance-1") == E.NONE
    d = describe(wire, group)[0]
    assert [(m.member_id, m.group_instance_id) for m in d.members] == [(again.member_id, "instance-1")]


# -- LeaveGroup ---------------------------------------------------------------------------------------------------


def test_leave_group_versions(wire):
    group = group_name()
    member, _ = stable_single(wire, group)
    # v0-2: one member, its error lifted to the top level.
    r = wire.call(LEAVE, 1, LeaveGroupRequest(group_id=group, member_id="nobody"))
    assert r.error_code == E.UNKNOWN_MEMBER_ID
    # v3+: a batch, an error per member.
    r = wire.call(LEAVE, 5, LeaveGroupRequest(group_id=group, members=[
        MemberIdentity(member_id=member, reason="test over"), MemberIdentity(member_id="nobody")]))
    assert r.error_code == E.NONE
    assert [(m.member_id, m.error_code) for m in r.members] == [(member, E.NONE), ("nobody", E.UNKNOWN_MEMBER_ID)]
    assert describe(wire, group)[0].group_state == "Empty"
    r = wire.call(LEAVE, 0, LeaveGroupRequest(group_id=group_name(), member_id="x"))
    assert r.error_code == E.UNKNOWN_MEMBER_ID


# -- DescribeGroups / ListGroups / DeleteGroups ------------------------------------------------------------------


def test_describe_and_list_groups_report_real_states(broker, wire):
    stable, simple, joining = group_name(), group_name(), group_name()
    member, generation = stable_single(wire, stable, assignment=b"\x00\x00stable-assignment")
    assert commit(wire, simple, {("orders", 2): 7}) == {("orders", 2): E.NONE}  # a "simple" group: Empty
    # A group that has joined but not synced: CompletingRebalance.
    joined = join(wire, joining)
    assert joined.error_code == E.NONE

    by_id = {g.group_id: g for g in describe(wire, stable, simple, joining, "never-seen", "")}
    s = by_id[stable]
    assert (s.error_code, s.group_state, s.protocol_type, s.protocol_data) == (E.NONE, "Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) for m in s.members] == [
        (member, CLIENT_ID, "/127.0.0.1", SUBSCRIPTION, b"\x00\x00stable-assignment")]
    assert s.authorized_operations == -(2**31)
    assert (by_id[simple].group_state, by_id[simple].protocol_type, by_id[simple].members) == ("Empty", "", [])
    assert by_id[joining].group_state == "CompletingRebalance"
    assert (by_id["never-seen"].error_code, by_id["never-seen"].group_state) == (E.NONE, "Dead")
    assert (by_id[""].error_code, by_id[""].group_state) == (E.NONE, "Dead")  # "" is allowed, as in Kafka
    # Asked for, the authorized operations are READ, DELETE and DESCRIBE (no authorizer).
    # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: Kafka 4's operations on a group
    assert describe(wire, stable, include_ops=True)[0].authorized_operations == \
        (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
    # v0 has the same content.
    v0 = describe(wire, stable, version=0)[0]
    assert (v0.group_state, v0.members[0].member_assignment) == ("Stable", b"\x00\x00stable-assignment")

    # A rebalance in progress: PreparingRebalance.
    other = Wire(broker.bootstrap, "wire-groups-b")
    parked = Background(join, other, stable)
    wait_state(wire, stable, "PreparingRebalance")
    listed = wire.call(LIST, 4, ListGroupsRequest(states_filter=["PreparingRebalance"]))
    assert (stable, "PreparingRebalance") in {(g.group_id, g.group_state) for g in listed.groups}
    assert join(wire, stable, member).error_code == E.NONE
    assert parked.get().error_code == E.NONE
    other.close()

    everything = wire.call(LIST, 0, ListGroupsRequest())
    assert everything.error_code == E.NONE
    protocol_types = {g.group_id: g.protocol_type for g in everything.groups}
    assert protocol_types[stable] == "consumer" and protocol_types[simple] == ""
    empty_only = wire.call(LIST, 4, ListGroupsRequest(states_filter=["empty"]))  # case-insensitive
    assert simple in {g.group_id for g in empty_only.groups} and stable not in {g.group_id for g in empty_only.groups}
    v5 = wire.call(LIST, 5, ListGroupsRequest(types_filter=["classic"]))
    assert {(g.group_id, g.group_type) for g in v5.groups} >= {(stable, "classic"), (simple, "classic")}
    assert wire.call(LIST, 5, ListGroupsRequest(types_filter=["consumer"])).groups == []


def test_delete_groups(wire):
    busy, idle = group_name(), group_name()
    member, generation = stable_single(wire, busy)
    assert commit(wire, idle, {("orders", 0): 1}) == {("orders", 0): E.NONE}
    for version in (0, 2):
        r = wire.call(DELETE_GROUPS, version, DeleteGroupsRequest([busy, "never-seen", ""]))
        # Kafka accepts the empty group id here (backward compatibility): it is just a group that does not exist.
        assert {x.group_id: x.error_code for x in r.results} == {
            busy: E.NON_EMPTY_GROUP, "never-seen": E.GROUP_ID_NOT_FOUND, "": E.GROUP_ID_NOT_FOUND}
    r = wire.call(DELETE_GROUPS, 1, DeleteGroupsRequest([idle, idle]))  # a repeated name is answered once
    assert [(x.group_id, x.error_code) for x in r.results] == [(idle, E.NONE)]
    assert describe(wire, idle)[0].group_state == "Dead"
    fetched = wire.call(OFFSET_FETCH, 7, OffsetFetchRequest(group_id=idle, topics=None))
    assert (fetched.error_code, fetched.topics) == (E.NONE, [])
    # Once the busy group's member leaves, it can be deleted.
    wire.call(LEAVE, 3, LeaveGroupRequest(group_id=busy, members=[MemberIdentity(member_id=member)]))
    r = wire.call(DELETE_GROUPS, 2, DeleteGroupsRequest([busy]))
    assert [(x.group_id, x.error_code) for x in r.results] == [(busy, E.NONE)]


# -- OffsetCommit / OffsetFetch / OffsetDelete -------------------------------------------------------------------


def test_offset_commit_errors(wire):
    group = group_name()
    # Unknown topics and partitions are refused per partition; the rest is stored.
    result = commit(wire, group, {("orders", 0): 10, ("orders", 3): 1, ("no-such-topic", 0): 1, ("audit", 1): 20})
    assert result == {("orders", 0): E.NONE, ("orders", 3): E.UNKNOWN_TOPIC_OR_PARTITION,
                      ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("audit", 1): E.NONE}
    # Metadata longer than offset.metadata.max.bytes (4096).
    assert commit(wire, group, {("orders", 1): 5}, metadata="m" * 4097) == {("orders", 1): E.OFFSET_METADATA_TOO_LARGE}
    assert commit(wire, group, {("orders", 1): 5}, metadata="m" * 4096) == {("orders", 1): E.NONE}
    # An unknown group with a generation: ILLEGAL_GENERATION below v9, GROUP_ID_NOT_FOUND from v9.
    for version, code in ((2, E.ILLEGAL_GENERATION), (7, E.ILLEGAL_GENERATION), (8, E.ILLEGAL_GENERATION),
                          (9, E.GROUP_ID_NOT_FOUND)):
        assert commit(wire, group_name(), {("orders", 0): 1}, 3, "m", version=version) == {("orders", 0): code}
    # Only unknown partitions: answered without the group being consulted.
    assert commit(wire, group_name(), {("no-such-topic", 0): 1}, 3, "m", version=9) == {
        ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION}

    # v1: partitions required, no top-level error.
    v1 = wire.call(OFFSET_FETCH, 1, OffsetFetchRequest(group_id=group, topics=[
        OffsetFetchRequestTopic("orders", [0, 1, 2])]))
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in v1.topics[0].partitions] == [
        (0, 10, "", E.NONE), (1, 5, "m" * 4096, E.NONE), (2, -1, "", E.NONE)]
    # v2+: topics = null is every committed partition.
    v7 = wire.call(OFFSET_FETCH, 7, OffsetFetchRequest(group_id=group, topics=None, require_stable=True))
    assert v7.error_code == E.NONE
    assert {(t.name, p.partition_index, p.committed_offset) for t in v7.topics for p in t.partitions} == {
        ("orders", 0, 10), ("orders", 1, 5), ("audit", 1, 20)}
    # v8+: several groups at once, each with its own answer.
    v8 = wire.call(OFFSET_FETCH, 8, OffsetFetchRequest(groups=[
        OffsetFetchRequestGroup(group_id=group, topics=[OffsetFetchRequestTopics(name="audit", partition_indexes=[1])]),
        OffsetFetchRequestGroup(group_id="never-seen", topics=None),
        OffsetFetchRequestGroup(group_id=group, topics=None),
    ]))
    assert [g.group_id for g in v8.groups] == [group, "never-seen", group]
    assert [(p.partition_index, p.committed_offset) for p in v8.groups[0].topics[0].partitions] == [(1, 20)]
    assert (v8.groups[1].error_code, v8.groups[1].topics) == (E.NONE, [])
    assert len([p for t in v8.groups[2].topics for p in t.partitions]) == 3
    v9 = wire.call(OFFSET_FETCH, 9, OffsetFetchRequest(groups=[
        OffsetFetchRequestGroup(group_id=group, member_id="whoever", member_epoch=12, topics=None)]))
    assert v9.groups[0].error_code == E.NONE and len(v9.groups[0].topics) == 2


def test_offset_delete_group_subscribed_to_topic(wire):
    group = group_name()
    member, generation = stable_single(wire, group)  # subscribed to "orders"
    assert commit(wire, group, {("orders", 0): 4, ("audit", 0): 9, ("audit", 2): 11}, generation, member) == {
        ("orders", 0): E.NONE, ("audit", 0): E.NONE, ("audit", 2): E.NONE}
    r = wire.call(OFFSET_DELETE, 0, OffsetDeleteRequest(group_id=group, topics=[
        OffsetDeleteRequestTopic("orders", [OffsetDeleteRequestPartition(0)]),
        OffsetDeleteRequestTopic("audit", [OffsetDeleteRequestPartition(0), OffsetDeleteRequestPartition(7)]),
        OffsetDeleteRequestTopic("no-such-topic", [OffsetDeleteRequestPartition(0)]),
    ]))
    assert r.error_code == E.NONE
    assert {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions} == {
        ("orders", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("audit", 0): E.NONE, ("audit", 7): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    left = wire.call(OFFSET_FETCH, 7, OffsetFetchRequest(group_id=group, topics=None))
    assert {(t.name, p.partition_index) for t in left.topics for p in t.partitions} == {("orders", 0), ("audit", 2)}
    # Group-level errors come alone.
    r = wire.call(OFFSET_DELETE, 0, OffsetDeleteRequest(group_id="never-seen", topics=[
        OffsetDeleteRequestTopic("audit", [OffsetDeleteRequestPartition(0)])]))
    assert (r.error_code, r.topics) == (E.GROUP_ID_NOT_FOUND, [])


# -- Edges: every request gets an answer ---------------------------------------------------------------------------


def test_empty_and_invalid_group_ids_and_empty_batches_are_answered(wire):
    assert wire.call(JOIN, 5, join_request("")).error_code == E.INVALID_GROUP_ID
    assert sync(wire, "", 1, "m").error_code == E.INVALID_GROUP_ID
    assert heartbeat(wire, "", 1, "m") == E.INVALID_GROUP_ID
    assert wire.call(LEAVE, 1, LeaveGroupRequest(group_id="", member_id="m")).error_code == E.INVALID_GROUP_ID
    r = wire.call(OFFSET_DELETE, 0, OffsetDeleteRequest(group_id="", topics=[]))
    assert r.error_code == E.INVALID_GROUP_ID
    # The offsets APIs accept the empty group id (backward compatibility).
    assert commit(wire, "", {("orders", 0): 1}) == {("orders", 0): E.NONE}
    fetched = wire.call(OFFSET_FETCH, 3, OffsetFetchRequest(group_id="", topics=[OffsetFetchRequestTopic("orders", [0])]))
    assert (fetched.error_code, fetched.topics[0].partitions[0].committed_offset) == (E.NONE, 1)
    # Empty batches.
    assert wire.call(OFFSET_COMMIT, 8, OffsetCommitRequest(group_id=group_name(), topics=[])).topics == []
    assert wire.call(OFFSET_FETCH, 8, OffsetFetchRequest(groups=[])).groups == []
    assert wire.call(DESCRIBE, 5, DescribeGroupsRequest([])).groups == []
    assert wire.call(DELETE_GROUPS, 2, DeleteGroupsRequest([])).results == []
    assert wire.call(FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[])).coordinators == []
    r = wire.call(LEAVE, 3, LeaveGroupRequest(group_id=group_name(), members=[]))
    assert r.members == []
    # The connection is still open and serving.
    assert wire.call(LIST, 0, ListGroupsRequest()).error_code == E.NONE


def test_client_host_is_printed_as_kafka_does():
    from kbroker.broker.apis.group_wire import client_host

    assert client_host("127.0.0.1:50123") == "/127.0.0.1"
    assert client_host("::1:50123") == "/0:0:0:0:0:0:0:1"
    assert client_host("::ffff:10.1.2.3:9") == "/10.1.2.3"


def test_completing_rebalance_commit_and_heartbeat(wire):
    group = group_name()
    joined = join(wire, group)  # joined, not yet synced: CompletingRebalance
    assert describe(wire, group)[0].group_state == "CompletingRebalance"
    assert heartbeat(wire, group, joined.generation_id, joined.member_id) == E.NONE
    assert commit(wire, group, {("orders", 0): 1}, joined.generation_id, joined.member_id) == {
        ("orders", 0): E.REBALANCE_IN_PROGRESS}
    assert sync(wire, group, joined.generation_id, joined.member_id, {joined.member_id: b"a"}).error_code == E.NONE
    assert commit(wire, group, {("orders", 0): 1}, joined.generation_id, joined.member_id) == {("orders", 0): E.NONE}
    # Once everyone has left, the group is Empty: heartbeats are from unknown members.
    wire.call(LEAVE, 3, LeaveGroupRequest(group_id=group, members=[MemberIdentity(member_id=joined.member_id)]))
    assert describe(wire, group)[0].group_state == "Empty"
    assert heartbeat(wire, group, joined.generation_id, joined.member_id) == E.UNKNOWN_MEMBER_ID


def test_leave_group_by_instance_id(wire):
    group = group_name()
    member, _ = stable_single(wire, group, instance_id="leaver")
    # A member id that does not match the instance's is fenced; an empty one (admin removal) is accepted.
    r = wire.call(LEAVE, 4, LeaveGroupRequest(group_id=group, members=[
        MemberIdentity(member_id="impostor", group_instance_id="leaver")]))
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
        ("impostor", "leaver", E.FENCED_INSTANCE_ID)]
    r = wire.call(LEAVE, 4, LeaveGroupRequest(group_id=group, members=[
        MemberIdentity(member_id="", group_instance_id="leaver"), MemberIdentity(member_id="", group_instance_id="ghost")]))
    assert [(m.group_instance_id, m.error_code) for m in r.members] == [("leaver", E.NONE), ("ghost", E.UNKNOWN_MEMBER_ID)]
    assert describe(wire, group)[0].group_state == "Empty"


def test_a_parked_join_holds_its_connection_until_answered(broker, wire):
    """Kafka mutes a connection while its request is in the broker, so what a client pipelines behind
    a JoinGroup runs after the rebalance it waits for. B pipelines JoinGroup then DescribeGroups while
    A must still rejoin: the DescribeGroups sees the rebalance done (CompletingRebalance), not the
    PreparingRebalance it would see if it ran while B's join was parked."""
    from kbroker.protocol import framing

    group = group_name()
    a, _ = stable_single(wire, group)
    other = Wire(broker.bootstrap, "wire-groups-b")
    try:
        first = other.call(JOIN, 5, join_request(group))
        assert first.error_code == E.MEMBER_ID_REQUIRED
        join_id = other.send(JOIN, 5, join_request(group, first.member_id))
        describe_id = other.send(DESCRIBE, 5, DescribeGroupsRequest([group], False))
        wait_state(wire, group, "PreparingRebalance")  # B's join is parked: A has not rejoined
        time.sleep(0.3)  # time enough for a DescribeGroups that did not wait to have run
        assert join(wire, group, a).error_code == E.NONE
        correlation, joined = framing.decode_response(JOIN, 5, other.read_frame())
        assert (correlation, joined.error_code) == (join_id, E.NONE)
        correlation, described = framing.decode_response(DESCRIBE, 5, other.read_frame())
        assert correlation == describe_id
        assert described.groups[0].group_state == "CompletingRebalance"
    finally:
        other.close()


def test_a_clients_long_reason_is_kept_cut_to_255_characters(broker, wire):
    """KIP-800 reasons go into the rebalance history and its file; Kafka's clients cut them to 255
    characters, and the coordinator keeps no more of anyone's (10 MiB reasons were kept whole)."""
    from kbroker.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity

    group = group_name()
    request = join_request(group)
    request.reason = "r" * 100_000
    first = wire.call(JOIN, 9, request)
    request.member_id = first.member_id
    joined = wire.call(JOIN, 9, request)
    assert joined.error_code == E.NONE, joined
    left = wire.call(LEAVE, 5, LeaveGroupRequest(group, members=[MemberIdentity(joined.member_id, None, "l" * 100_000)]))
    assert left.error_code == E.NONE
    deadline = time.monotonic() + 10
    reasons: list[str] = []
    while time.monotonic() < deadline and not reasons:
        reasons = [e["client_reason"] for e in broker.events("rebalance_completed")
                   if e.get("group_id") == group and e.get("client_reason")]
        time.sleep(0.1)
    assert reasons and all(len(r) <= 255 for r in reasons), [len(r) for r in reasons]
