// Consumer groups: two members (clients "a" then "b") join, share, consume and commit, then "b" leaves;
// with the classic protocol and each client-side assignor, and with the consumer protocol (KIP-848) and
// each server-side assignor. Also regular-expression subscriptions, both protocols.
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;

final class ConsumerScenarios {
    private ConsumerScenarios() {}

    /** A member and what its rebalance listener saw. */
    static final class Member implements ConsumerRebalanceListener {
        final KafkaConsumer<String, String> consumer;
        final Set<String> consumed;
        final List<String> duplicates = new ArrayList<>();
        int assignedCalls, revokedCalls, lostCalls;

        Member(Properties props, Set<String> consumed) {
            this.consumer = new KafkaConsumer<>(props);
            this.consumed = consumed;
        }

        // Only calls that hand partitions over: under the cooperative protocol a round that adds nothing
        // still calls back (empty), and how many such rounds a join takes depends on timing (a SyncGroup
        // overtaken by the next rebalance is no round), on Kafka and on kbroker alike.
        @Override public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            if (!partitions.isEmpty()) assignedCalls++;
        }
        @Override public void onPartitionsLost(Collection<TopicPartition> partitions) { lostCalls++; }
        @Override public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            revokedCalls++;
            if (!partitions.isEmpty()) consumer.commitSync(); // what was consumed is committed before it moves
        }

        void poll() {
            for (ConsumerRecord<String, String> r : consumer.poll(Matrix.POLL)) {
                if (!consumed.add(r.topic() + "/" + r.value())) duplicates.add(r.value());
            }
        }

        Set<TopicPartition> assignment() { return consumer.assignment(); }
    }

    static String assignorClass(String assignor) {
        switch (assignor) {
            case "range": return RangeAssignor.class.getName();
            case "roundrobin": return RoundRobinAssignor.class.getName();
            case "sticky": return StickyAssignor.class.getName();
            case "cooperative-sticky": return CooperativeStickyAssignor.class.getName();
            default: throw new IllegalArgumentException(assignor);
        }
    }

    static Properties memberProps(Matrix m, String group, String protocol, String assignor, String clientId) {
        Properties p = m.consumerProps(group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "10");
        if (protocol.equals("consumer")) {
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
            if (assignor != null) p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        } else {
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignorClass(assignor));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        }
        return p;
    }

    /** Two topics of three partitions, 60 records; "a" joins alone, then "b"; both consume everything once and
     *  commit; then "b" leaves and "a" takes everything back. Classic members are labelled by client id (the
     *  broker makes member ids CLIENTID-UUID, so "a" sorts first as the classic assignors order members);
     *  consumer-protocol member ids are the client's random UUIDs, so only the split is compared there. */
    static Map<String, Object> group(Matrix m, String protocol, String assignor) throws Exception {
        String tag = protocol + "-" + assignor;
        m.createTopics(3, tag + "-x", tag + "-y");
        List<TopicPartition> all = new ArrayList<>(m.partitions(tag + "-x", 3));
        all.addAll(m.partitions(tag + "-y", 3));
        m.produce(tag + "-x", 30, "x");
        m.produce(tag + "-y", 30, "y");
        String group = m.name("group-" + tag);
        List<String> topics = List.of(m.name(tag + "-x"), m.name(tag + "-y"));
        Set<String> consumed = new HashSet<>();
        Member a = new Member(memberProps(m, group, protocol, assignor, m.name("a")), consumed);
        Member b = new Member(memberProps(m, group, protocol, assignor, m.name("b")), consumed);
        Map<String, Object> obs = new LinkedHashMap<>();
        try {
            a.consumer.subscribe(topics, a);
            Matrix.waitFor("a alone owns all six", () -> { a.poll(); return a.assignment().size() == 6; });
            obs.put("alone_a", m.tps(a.assignment()));
            b.consumer.subscribe(topics, b);
            Matrix.waitFor("a and b share the six", () -> {
                a.poll();
                b.poll();
                Set<TopicPartition> union = new HashSet<>(a.assignment());
                union.addAll(b.assignment());
                return !a.assignment().isEmpty() && !b.assignment().isEmpty()
                        && a.assignment().size() + b.assignment().size() == 6 && union.size() == 6;
            });
            Matrix.waitFor("consuming 60 records", () -> { a.poll(); b.poll(); return consumed.size() >= 60; });
            if (protocol.equals("classic")) {
                obs.put("shared_a", m.tps(a.assignment()));
                obs.put("shared_b", m.tps(b.assignment()));
            } else {
                List<List<String>> split = new ArrayList<>(List.of(m.tps(a.assignment()), m.tps(b.assignment())));
                split.sort((x, y) -> x.size() != y.size() ? x.size() - y.size() : x.toString().compareTo(y.toString()));
                obs.put(assignor.equals("range") ? "shared_split" : "shared_sizes",
                        assignor.equals("range") ? split : List.of(split.get(0).size(), split.get(1).size()));
            }
            a.consumer.commitSync();
            b.consumer.commitSync();
            obs.put("records_consumed", consumed.size());
            obs.put("duplicates", a.duplicates.size() + b.duplicates.size());
            obs.put("committed", m.committed(group));
            obs.put("lag", m.lag(group, all));
            ConsumerGroupDescription d = m.admin.describeConsumerGroups(List.of(group)).all()
                    .get(30, TimeUnit.SECONDS).get(group);
            obs.put("described_state", d.groupState().toString());
            obs.put("described_type", d.type().toString());
            obs.put("described_assignor", d.partitionAssignor());
            obs.put("described_members", d.members().size());
            List<Integer> described = new ArrayList<>();
            for (MemberDescription md : d.members()) described.add(md.assignment().topicPartitions().size());
            described.sort(null);
            obs.put("described_assignment_sizes", described);
            if (protocol.equals("consumer")) obs.put("described_group_epoch", d.groupEpoch().orElse(-1));
            b.consumer.close();
            Matrix.waitFor("a owns all six again", () -> { a.poll(); return a.assignment().size() == 6; });
            obs.put("after_leave_a", m.tps(a.assignment()));
            if (protocol.equals("classic")) {
                // a JoinGroup round that hands partitions over is one onPartitionsAssigned call (eager: each revocation too)
                obs.put("rebalance_callbacks_a", List.of(a.assignedCalls, a.revokedCalls, a.lostCalls));
                obs.put("rebalance_callbacks_b", List.of(b.assignedCalls, b.revokedCalls, b.lostCalls));
            } else {
                // the client calls onPartitionsAssigned per reconciliation, and how many targets it reconciles
                // toward depends on when its heartbeats fall (a loaded machine saw a fourth, empty, call for
                // "a" once); the group epoch counts the rebalances, the revocations what moved
                obs.put("revocations_a", a.revokedCalls);
                obs.put("revocations_b", b.revokedCalls);
                obs.put("group_epoch_after_leave", m.admin.describeConsumerGroups(List.of(group)).all()
                        .get(30, TimeUnit.SECONDS).get(group).groupEpoch().orElse(-1));
            }
        } finally {
            a.consumer.close();
            b.consumer.close();
        }
        ConsumerGroupDescription after = m.admin.describeConsumerGroups(List.of(group)).all()
                .get(30, TimeUnit.SECONDS).get(group);
        obs.put("state_after_close", after.groupState().toString());
        return obs;
    }

    static Map<String, Object> regexClassic(Matrix m) throws Exception {
        m.createTopics(1, "rxc-a", "rxc-b", "other-rxc");
        Properties p = memberProps(m, m.name("group-rxc"), "classic", "range", m.name("rxc"));
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "500");
        Map<String, Object> obs = new LinkedHashMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(Pattern.compile(Pattern.quote(m.name("rxc-")) + ".*"));
            return regexPhases(m, obs, c, "rxc");
        }
    }

    static Map<String, Object> regexConsumer(Matrix m) throws Exception {
        m.createTopics(1, "rxk-a", "rxk-b", "other-rxk");
        Properties p = memberProps(m, m.name("group-rxk"), "consumer", null, m.name("rxk"));
        Map<String, Object> obs = new LinkedHashMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(new SubscriptionPattern(m.name("rxk-") + ".*"));
            return regexPhases(m, obs, c, "rxk");
        }
    }

    private static Map<String, Object> regexPhases(Matrix m, Map<String, Object> obs, KafkaConsumer<String, String> c,
                                                   String tag) throws Exception {
        Matrix.waitFor("the two matching topics", () -> { c.poll(Matrix.POLL); return c.assignment().size() == 2; });
        obs.put("assigned", topics(m, c.assignment()));
        m.createTopics(1, tag + "-c");
        long deadline = System.currentTimeMillis() + 30_000;
        while (c.assignment().size() < 3 && System.currentTimeMillis() < deadline) c.poll(Matrix.POLL);
        obs.put("assigned_after_new_topic", topics(m, c.assignment()));
        return obs;
    }

    private static Set<String> topics(Matrix m, Set<TopicPartition> parts) {
        Set<String> out = new TreeSet<>();
        for (TopicPartition tp : parts) out.add(m.strip(tp.topic()));
        return out;
    }
}
