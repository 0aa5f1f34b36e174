"""The ACL authorizer's matching rules (Kafka's StandardAuthorizer) and the ACL store."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kbroker.broker.security.acl import (
    AclBinding, AclFilter, Authorizer, Operation as Op, PatternType as PT, Permission as P, ResourceType as RT,
    invalid_binding_reason, parse_super_users,
)
from kbroker.broker.security.acl_store import AclStore

ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(rt, name, op, perm=P.ALLOW, principal=ALICE, pt=PT.LITERAL, host="*"):
    return AclBinding(rt, name, pt, principal, host, op, perm)


def test_no_acls_denies_unless_allow_everyone_if_no_acl_found():
    assert not Authorizer().authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert Authorizer(allow_if_no_acl=True).authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")


def test_allow_if_no_acl_only_when_no_acl_matches_the_resource():
    a = Authorizer([acl(RT.TOPIC, "t", Op.READ, principal=BOB)], allow_if_no_acl=True)
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")  # the resource has ACLs, none for alice
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "other")


def test_literal_wildcard_and_prefixed_patterns():
    a = Authorizer([acl(RT.TOPIC, "orders", Op.READ), acl(RT.TOPIC, "*", Op.WRITE),
                    acl(RT.GROUP, "team-", Op.READ, pt=PT.PREFIXED)])
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders2")
    assert a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "anything")
    assert a.authorize(ALICE, HOST, Op.READ, RT.GROUP, "team-a")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.GROUP, "team")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "team-a")  # other resource type


def test_deny_wins_over_allow():
    a = Authorizer([acl(RT.TOPIC, "*", Op.ALL), acl(RT.TOPIC, "secret", Op.READ, P.DENY)])
    assert a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "secret")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "secret")
    a = Authorizer([acl(RT.TOPIC, "s", Op.READ), acl(RT.TOPIC, "s", Op.ALL, P.DENY, principal="User:*")])
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "s")


def test_implied_operations():
    a = Authorizer([acl(RT.TOPIC, "t", Op.WRITE), acl(RT.TOPIC, "c", Op.ALTER_CONFIGS)])
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t")  # WRITE implies DESCRIBE
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert a.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, RT.TOPIC, "c")
    assert not a.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "c")
    # a DENY of READ does not deny DESCRIBE (implication only widens ALLOW)
    a = Authorizer([acl(RT.TOPIC, "t", Op.DESCRIBE), acl(RT.TOPIC, "t", Op.READ, P.DENY)])
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t")


def test_principal_and_host_matching():
    a = Authorizer([acl(RT.TOPIC, "t", Op.READ, principal="User:*", host=HOST)])
    assert a.authorize(BOB, HOST, Op.READ, RT.TOPIC, "t")
    assert not a.authorize(BOB, "10.0.0.2", Op.READ, RT.TOPIC, "t")


def test_super_users_bypass_everything():
    supers = parse_super_users("User:admin; User:ops")
    a = Authorizer([acl(RT.TOPIC, "*", Op.ALL, P.DENY, principal="User:*")], super_users=supers)
    assert a.authorize("User:admin", HOST, Op.ALL, RT.TOPIC, "t")
    assert a.authorize("User:ops", HOST, Op.ALTER, RT.CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")


def test_authorize_any_for_idempotent_write_kip_679():
    a = Authorizer([acl(RT.TOPIC, "t", Op.WRITE)])
    assert a.authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert not a.authorize_any(BOB, HOST, Op.WRITE, RT.TOPIC)
    a = Authorizer([acl(RT.TOPIC, "t", Op.WRITE), acl(RT.TOPIC, "", Op.WRITE, P.DENY, pt=PT.PREFIXED)])
    assert not a.authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)


def test_filters_literal_any_and_match():
    rows = [acl(RT.TOPIC, "orders", Op.READ), acl(RT.TOPIC, "*", Op.READ), acl(RT.TOPIC, "ord", Op.READ, pt=PT.PREFIXED),
            acl(RT.GROUP, "g", Op.READ, principal=BOB)]
    a = Authorizer(rows)

    def f(rt=RT.ANY, name=None, pt=PT.ANY, principal=None, op=Op.ANY, perm=P.ANY):
        return set(a.matching(AclFilter(rt, name, pt, principal, None, op, perm)))

    assert f() == set(rows)
    assert f(rt=RT.TOPIC, name="orders", pt=PT.LITERAL) == {rows[0]}
    assert f(rt=RT.TOPIC, name="orders", pt=PT.MATCH) == {rows[0], rows[1], rows[2]}
    assert f(pt=PT.PREFIXED) == {rows[2]}
    assert f(principal=BOB) == {rows[3]}


def test_invalid_bindings_are_named():
    assert invalid_binding_reason(acl(RT.ANY, "t", Op.READ))
    assert invalid_binding_reason(acl(RT.TOPIC, "t", Op.ANY))
    assert invalid_binding_reason(acl(RT.TOPIC, "t", Op.READ, P.ANY))
    assert invalid_binding_reason(acl(RT.TOPIC, "t", Op.READ, pt=PT.MATCH))
    assert invalid_binding_reason(acl(RT.TOPIC, "t", Op.READ, principal="alice"))
    assert invalid_binding_reason(acl(RT.CLUSTER, "c", Op.ALTER))
    assert invalid_binding_reason(acl(RT.CLUSTER, "kafka-cluster", Op.ALTER)) is None


async def test_store_round_trip(tmp_path):
    rows = [acl(RT.TOPIC, "t", Op.READ), acl(RT.GROUP, "g-", Op.ALL, P.DENY, pt=PT.PREFIXED, host=HOST)]
    await AclStore(tmp_path, lambda: rows).save()
    assert AclStore(tmp_path).load() == rows
    a = Authorizer(AclStore(tmp_path).load())
    assert a.remove(rows[0]) and not a.remove(rows[0]) and a.acls() == rows[1:]


_NAMES = ["a", "ab", "abc", "b", "*", "", "abd"]
_bindings = st.builds(
    AclBinding, st.sampled_from([RT.TOPIC, RT.GROUP]), st.sampled_from(_NAMES),
    st.sampled_from([PT.LITERAL, PT.PREFIXED]), st.sampled_from(["User:u", "User:*"]),
    st.sampled_from(["*", "h"]), st.sampled_from([Op.READ, Op.WRITE, Op.ALL]),
    st.sampled_from([P.ALLOW, P.DENY]))
_filters = st.builds(
    AclFilter, st.sampled_from([RT.ANY, RT.TOPIC, RT.GROUP]),
    st.sampled_from([None, *_NAMES]), st.sampled_from([PT.ANY, PT.MATCH, PT.LITERAL,
                                                       PT.PREFIXED]),
    st.sampled_from([None, "User:u"]), st.sampled_from([None, "h"]), st.sampled_from([Op.ANY, Op.READ]),
    st.sampled_from([P.ANY, P.DENY]))


@settings(max_examples=300, deadline=None)
@example(added=[AclBinding(RT.TOPIC, "a", PT.PREFIXED, "User:u", "*", Op.READ, P.ALLOW),
                AclBinding(RT.TOPIC, "abc", PT.LITERAL, "User:u", "*", Op.READ, P.ALLOW)], removed=[],
         flt=AclFilter(RT.TOPIC, "abc", PT.MATCH, None, None, Op.ANY, P.ANY), name="abc", operation=Op.READ)
@given(added=st.lists(_bindings, max_size=25), removed=st.lists(_bindings, max_size=10), flt=_filters,
       name=st.sampled_from(["a", "abc", "abcd", "b", "*", "x"]), operation=st.sampled_from([Op.READ,
                                                                                         Op.DESCRIBE]))
def test_the_indexes_answer_what_a_walk_over_every_binding_would(added, removed, flt, name, operation) -> None:
    """Authorizations and filters look only in the buckets of a name and its prefixes; whatever was
    added and removed, they answer as the definitions applied to every binding in force do, and
    filters list their matches in the order the bindings came in."""
    authorizer = Authorizer(allow_if_no_acl=True)
    in_force: dict[AclBinding, None] = {}
    for acl in added:
        authorizer.add(acl)
        in_force.setdefault(acl, None)
    for acl in removed:
        authorizer.remove(acl)
        in_force.pop(acl, None)
    assert authorizer.matching(flt) == [acl for acl in in_force if flt.matches(acl)]
    for resource_type in (RT.TOPIC, RT.GROUP):
        applying = [a for a in in_force if a.matches_resource(resource_type, name)]
        mine = [a for a in applying if a.principal in ("User:u", "User:*") and a.host in ("h", "*")]
        denied = any(a.permission == P.DENY and a.operation in (operation, Op.ALL) for a in mine)
        granted = any(a.permission == P.ALLOW and (a.operation in (operation, Op.ALL) or (
            operation == Op.DESCRIBE and a.operation in (Op.READ, Op.WRITE))) for a in mine)
        expected = not denied and (granted or not applying)
        assert authorizer.authorize("User:u", "h", operation, resource_type, name) == expected
