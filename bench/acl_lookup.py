"""What many PREFIXED ACLs cost each authorized request.

    python -m bench.acl_lookup [--acls 10,10000] [--seconds S]

Multi-tenant clusters give each tenant a PREFIXED ACL (`tenant-00077-` and so on). Every Produce,
Fetch and Metadata authorizes each topic it names against the ACLs of that name. For each count,
a fresh kbroker with the StandardAuthorizer gets that many PREFIXED topic ACLs for its anonymous
PLAINTEXT principal (CreateAcls, 10,000 per request), then one connection keeps 32 Metadata v12
requests for one tenant's topic in flight for S seconds; answered requests per second and the
broker's CPU per request. Not part of `make bench`: no peer serves ACLs on this path.
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


def measure(acls: int, seconds: float) -> tuple[float, str]:
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
        return rate.per_s, rate.cpu_note()
    finally:
        handle.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.acl_lookup", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--acls", default="10,10000", help="comma-separated counts of PREFIXED ACLs")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    for n in (int(x) for x in args.acls.split(",")):
        per_s, note = measure(n, args.seconds)
        print(f"{n:>7,} PREFIXED ACLs: Metadata v12 of one topic {per_s:>9,.0f} requests/s  ({note})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
