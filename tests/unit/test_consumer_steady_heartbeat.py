"""The steady ConsumerGroupHeartbeat (consumer_heartbeat.steady_heartbeat) against the full path.

Whenever the fast path answers, the full path (consumer_group_heartbeat) on the same state must
give the same Outcome: the same reply, the same timers, no record, no event. Hypothesis drives a
group through joins, heartbeats of every shape, topic changes (the image the memo keys on), leaves
and session expiries with a manual clock; before each heartbeat both paths run on the state as it
is, then the heartbeat goes through the machine for real (which takes the fast path when it can).
"""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.coordinator.groups.consumer import consumer_commands as cc
from kbroker.coordinator.groups.consumer.consumer_group import TopicImage
from kbroker.coordinator.groups.consumer.consumer_heartbeat import CCtx, consumer_group_heartbeat, steady_heartbeat
from kbroker.coordinator.runtime.outcome import Outcome
from kbroker.tests.coordinator_harness import Harness

FOO, BAR, BAZ = uuid.UUID(int=0xF00), uuid.UUID(int=0xBA2), uuid.UUID(int=0xBA7)
IDS = {"foo": FOO, "bar": BAR, "baz": BAZ}
MEMBERS = ("m1", "m2", "m3")


class Topics:
    """A topics image as the broker serves it: the same mapping until the topics change."""

    def __init__(self) -> None:
        self.image: dict[str, TopicImage] = {"foo": TopicImage("foo", FOO, 3)}

    def __call__(self) -> dict[str, TopicImage]:
        return self.image

    def set(self, name: str, partitions: int) -> None:
        self.image = {**self.image, name: TopicImage(name, IDS[name], partitions)}

    def delete(self, name: str) -> None:
        self.image = {k: v for k, v in self.image.items() if k != name}


def consumer(h: Harness):  # noqa: ANN201 - the ConsumerGroups machine
    return h.machine.group_type("consumer").machine()


def both_paths(h: Harness, topics: Topics, cmd: cc.ConsumerGroupHeartbeat) -> bool:
    """Run the fast path and, when it answers, the full path on the same state; they must agree."""
    machine = consumer(h)
    fast = steady_heartbeat(h.config, topics, machine.groups, cmd)
    if fast is None:
        return False
    ctx = CCtx(h.config, h.clock.wall_ms(), Outcome(), topics)
    consumer_group_heartbeat(ctx, machine.groups, cmd, machine._get_or_create)
    assert fast == ctx.out
    assert not fast.writes and not fast.events
    return True


def join(member: str, names: tuple[str, ...] | None, regex: str | None) -> cc.ConsumerGroupHeartbeat:
    return cc.ConsumerGroupHeartbeat("g", member, 0, rebalance_timeout_ms=30_000,
                                     subscribed_topic_names=names if names or regex is None else None,
                                     subscribed_topic_regex=regex, owned_topic_partitions=())


_op = st.one_of(
    st.tuples(st.just("join"), st.sampled_from(MEMBERS), st.sampled_from([("foo",), ("foo", "bar"), ("bar",)]),
              st.sampled_from([None, None, "ba.*", "f.*"])),
    st.tuples(st.just("beat"), st.sampled_from(MEMBERS), st.sampled_from([0, 0, 0, 0, -1, 1]), st.sampled_from(
        ["steady", "steady", "steady", "owned", "rack", "timeout", "client", "names", "assignor"])),
    st.tuples(st.just("steady"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("steady"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("topic"), st.sampled_from(["foo", "bar", "baz"]), st.integers(0, 4)),
    st.tuples(st.just("advance"), st.sampled_from([1_000, 20_000, 46_000])),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
)


def _beat(member: str, epoch: int, shape: str, owned: cc.OwnedTopicPartitions | None) -> cc.ConsumerGroupHeartbeat:
    extra: dict = {}
    if shape == "owned":
        extra["owned_topic_partitions"] = owned or ()
    elif shape == "rack":
        extra["rack_id"] = "rack-1"
    elif shape == "timeout":
        extra["rebalance_timeout_ms"] = 30_000
    elif shape == "names":
        extra["subscribed_topic_names"] = ("foo",)
    elif shape == "assignor":
        extra["server_assignor"] = "uniform"
    cmd = cc.ConsumerGroupHeartbeat("g", member, epoch, **extra)
    if shape == "client":
        cmd.client_id = "another-client"
    return cmd


@settings(max_examples=400, deadline=None)
@given(ops=st.lists(_op, min_size=3, max_size=40))
def test_fast_path_answers_as_the_full_path(ops: list[tuple]) -> None:
    topics = Topics()
    h = Harness(topics=topics)
    epochs: dict[str, int] = {}
    owned: dict[str, cc.OwnedTopicPartitions | None] = {}

    def send(cmd: cc.ConsumerGroupHeartbeat) -> None:
        if h.machine.group_type("consumer").machine().groups.get("g") is not None:
            both_paths(h, topics, cmd)
        result = h.call(cmd)
        if result is not None and result.error.value == 0 and cmd.member_epoch >= 0:
            epochs[cmd.member_id] = result.member_epoch
            if result.assignment is not None:
                owned[cmd.member_id] = result.assignment

    send(join("m1", ("foo",), None))
    for op in ops:
        match op:
            case ("join", member, names, regex):
                send(join(member, names, regex))
            case ("beat", member, delta, shape):
                send(_beat(member, max(1, epochs.get(member, 1) + delta), shape, owned.get(member)))
            case ("steady", member):
                send(cc.ConsumerGroupHeartbeat("g", member, epochs.get(member, 1)))
            case ("ack", member):
                send(_beat(member, epochs.get(member, 1), "owned", owned.get(member)))
            case ("topic", name, partitions):
                if partitions == 0:
                    topics.delete(name)
                else:
                    topics.set(name, partitions)
            case ("advance", ms):
                h.advance(ms)
            case ("leave", member):
                send(cc.ConsumerGroupHeartbeat("g", member, -1))


def test_a_stable_member_takes_the_fast_path_until_its_topics_change() -> None:
    """The memo keys on the topics image: a grown topic sends the next heartbeat down the full path
    (which bumps the group epoch), and the member is steady again once it acknowledged its new target."""
    topics = Topics()
    h = Harness(topics=topics)
    first = h.call(join("m1", ("foo",), None))
    epoch = first.member_epoch
    steady = cc.ConsumerGroupHeartbeat("g", "m1", epoch)
    assert both_paths(h, topics, steady)
    assert h.call(steady).assignment is None
    assert consumer(h).groups["g"].steady_memo is not None
    topics.set("foo", 4)
    assert not both_paths(h, topics, cc.ConsumerGroupHeartbeat("g", "m1", epoch))
    bumped = h.call(cc.ConsumerGroupHeartbeat("g", "m1", epoch))
    assert bumped.member_epoch == epoch + 1 and bumped.assignment is not None
    assert both_paths(h, topics, cc.ConsumerGroupHeartbeat("g", "m1", bumped.member_epoch))
    key = cc.session_key("g", "m1")
    h.advance(40_000)
    h.call(cc.ConsumerGroupHeartbeat("g", "m1", bumped.member_epoch))
    assert h.deadline(key) == h.clock.now_ms() + h.config.group_consumer_session_timeout_ms
