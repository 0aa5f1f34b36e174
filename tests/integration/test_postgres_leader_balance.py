"""Preferred leaders on the PostgreSQL cluster (issue 44: the controller "balances preferred leaders";
auto.leader.rebalance.enable, on by default, every leader.imbalance.check.interval.seconds, here 1 s by
flag): three `kbroker serve --cluster` processes; the node preferred for a partition is killed with
kill -9, its partitions move to the others, it starts again with the same node id, and the controller
gives it back what it was given, while an idempotent acks=all producer and a group (confluent-kafka)
run throughout: no acknowledged record lost or repeated, every record consumed, offsets kept."""

from __future__ import annotations

import time

from kbroker.tests.integration.cluster_scenarios import ConfluentWorkload, errors_seen, verify
from kbroker.tests.integration.test_postgres_nodes import running_nodes, topic_on_every_node, view, wait_for


def test_a_node_killed_and_started_again_leads_its_preferred_partitions_again(postgres, tmp_path, capsys):
    with running_nodes(postgres.url(postgres.create_database()), tmp_path,
                       "--leader-imbalance-check-interval-seconds", "1") as nodes:
        bootstrap, topic, group = topic_on_every_node(nodes, "preferred")
        preferred = {p: replicas[0] for p, _, _, replicas in view(nodes[1], topic)[2]}
        clients = ConfluentWorkload(bootstrap, topic, group)
        clients.start()
        try:
            wait_for(lambda: len(clients.consumed) >= 200, "the group consumes before the kill", timeout=120)
            victim = preferred[0]
            others = [b for n, b in nodes.items() if n != victim]

            def led_by(broker) -> dict[int, int]:
                return {p: leader for p, leader, _, _ in view(broker, topic)[2]}

            nodes[victim].kill()
            wait_for(lambda: all(not {victim, -1} & set(led_by(b).values()) for b in others),
                     f"node {victim}'s partitions move to the others")
            nodes[victim].start()
            back = time.monotonic()
            wait_for(lambda: all(led_by(b) == preferred for b in nodes.values()),
                     f"every partition led by its preferred replica again ({preferred})")
            back_s = round(time.monotonic() - back, 2)
            before = len(clients.consumed)
            wait_for(lambda: len(clients.consumed) > before + 50, "the group consumes after the leaders went back")
        finally:
            clients.stop()
        moves = [e for b in nodes.values() for e in b.events("leader_moved") if e.get("reason") == "preferred leader"]
        with capsys.disabled():
            print(f"\n[postgres cluster, preferred leaders] node {victim} led its partitions again {back_s} s after "
                  f"its restart; acked={len(clients.acked)} consumed={len(clients.consumed)}; "
                  f"errors seen: {errors_seen(clients)}")
        assert {(e["topic"], e["partition"], e["leader"]) for e in moves} >= {
            (topic, p, victim) for p, node in preferred.items() if node == victim}
        verify(bootstrap, topic, group, clients)
