"""What many PREFIXED ACLs cost each authorized request, and a DeleteAcls that matches them all.

    python -m bench.acl_lookup [--acls 10,10000] [--seconds S] [--delete-filters N]

Multi-tenant clusters give each tenant a PREFIXED ACL (`tenant-00077-` and so on). Every Produce,
Fetch and Metadata authorizes each topic it names against the ACLs of that name. For each count,
a fresh kbroker with the StandardAuthorizer gets that many PREFIXED topic ACLs for its anonymous
PLAINTEXT principal (CreateAcls, 10,000 per request), then one connection keeps 32 Metadata v12
requests for one tenant's topic in flight for S seconds; answered requests per second and the
broker's CPU per request. With --delete-filters N, then a DeleteAcls of N distinct filters that
name no resource (each is matched against every ACL; they match nothing) while another client
sends ApiVersions every 20 ms: how long the DeleteAcls took, and the other client's worst round
trip. Not part of `make bench`: no peer serves ACLs on this path.
"""

from __future__ import annotations

import argparse
import asyncio

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PRINCIPAL = "User:ANONYMOUS"
TOPIC = "tenant-00007-orders"
BOUND = 10_000


async def _prepare(bootstrap: str, acls: int) -> None:
    from kbroker.bench.wire import Connection
    from kbroker.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
    from kbroker.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest

    admin = await Connection.open(bootstrap, "bench-acl-admin")
    try:
        r = await admin.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(
            name=TOPIC, num_partitions=1, replication_factor=1)], timeout_ms=10_000, validate_only=False))
        assert r.topics[0].error_code == 0, r.topics[0]
        for start in range(0, acls, BOUND):
            # No ACL names the cluster: with allow.everyone.if.no.acl.found anyone may alter it.
            creations = [AclCreation(resource_type=2, resource_name=f"tenant-{i:05d}-", resource_pattern_type=4,
                                     principal=PRINCIPAL, host="*", operation=2, permission_type=3)
                         for i in range(start, min(acls, start + BOUND))]
            r = await admin.call(30, 3, CreateAclsRequest(creations=creations))
            assert {c.error_code for c in r.results} == {0}, {c.error_code for c in r.results}
    finally:
        await admin.close()


async def _delete_without_names(bootstrap: str, filters: int) -> tuple[float, float]:
    import time

    from kbroker.bench.wire import Connection, worst_round_trip
    from kbroker.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest

    admin = await Connection.open(bootstrap, "bench-acl-admin")
    other = await Connection.open(bootstrap, "bench-acl-other")
    request = DeleteAclsRequest(filters=[DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=f"User:none-{i}",
        host_filter=None, operation=1, permission_type=1) for i in range(filters)])
    started = time.perf_counter()
    deleting = asyncio.get_running_loop().create_task(admin.call(31, 3, request))
    worst, _ = await worst_round_trip(other, deleting)
    answer = await deleting
    took = time.perf_counter() - started
    assert len(answer.filter_results) == filters and not any(r.matching_acls for r in answer.filter_results)
    await admin.close()
    await other.close()
    return took, worst


def measure(acls: int, seconds: float, delete_filters: int = 0) -> tuple[float, str]:
    from kbroker.bench import brokers
    from kbroker.bench.loadgen import pipelined_rate, run as run_loop
    from kbroker.protocol import framing
    from kbroker.protocol.messages import metadata_request as md

    handle = brokers.start_kbroker(extra=("--authorizer-class-name", AUTHORIZER,
                                          "--allow-everyone-if-no-acl-found"))
    try:
        asyncio.run(_prepare(handle.bootstrap, acls))
        frame = framing.encode_request(3, 12, 0, "bench-acl", md.MetadataRequest(
            topics=[md.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False))
        rate = run_loop(lambda: pipelined_rate(handle.bootstrap, [[frame]], api_key=3, version=12, window=32,
                                               seconds=seconds, broker_pid=handle.pid))
        note = rate.cpu_note()
        if delete_filters:
            took, worst = asyncio.run(_delete_without_names(handle.bootstrap, delete_filters))
            note += (f"; a DeleteAcls of {delete_filters:,} filters without a name answered in {took:.2f} s, "
                     f"another client's worst round trip {1000 * worst:.0f} ms")
        return rate.per_s, note
    finally:
        handle.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.acl_lookup", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--acls", default="10,10000", help="comma-separated counts of PREFIXED ACLs")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--delete-filters", type=int, default=0)
    args = parser.parse_args(argv)
    for n in (int(x) for x in args.acls.split(",")):
        per_s, note = measure(n, args.seconds, args.delete_filters)
        print(f"{n:>7,} PREFIXED ACLs: Metadata v12 of one topic {per_s:>9,.0f} requests/s  ({note})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
