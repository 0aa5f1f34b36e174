// The Admin client as an operator's tool uses it: topics (create with configs, describe, add partitions,
// delete), configs (incremental alter, describe), groups (list, describe, offsets: list, alter, delete;
// delete the group), records (list offsets, delete records).
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

final class AdminScenario {
    private AdminScenario() {}

    static <T> T get(KafkaFuture<T> f) throws Exception {
        return f.get(30, TimeUnit.SECONDS);
    }

    interface Check { boolean holds() throws Exception; }

    /** Waits (10 s at most) until a change shows: Kafka answers CreateTopics, CreatePartitions and
     *  IncrementalAlterConfigs once its controller has taken them, and its broker's view follows a moment
     *  later; kbroker's at once. What is observed is the settled state. */
    static void settle(Check check) throws Exception {
        long deadline = System.currentTimeMillis() + 10_000;
        while (!check.holds() && System.currentTimeMillis() < deadline) Thread.sleep(50);
    }

    /** The simple name of the exception a failed call ends with ("ok" when it succeeds). */
    static String outcome(KafkaFuture<?> f) {
        try {
            get(f);
            return "ok";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }

    static Map<String, Object> run(Matrix m) throws Exception {
        Admin admin = m.admin;
        Map<String, Object> obs = new LinkedHashMap<>();
        String topic = m.name("adm-topic");
        NewTopic withConfigs = new NewTopic(topic, 2, (short) 1)
                .configs(Map.of("cleanup.policy", "compact", "retention.ms", "3600000"));
        obs.put("create", outcome(admin.createTopics(List.of(withConfigs)).all()));
        obs.put("create_again", outcome(admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all()));
        obs.put("create_bad_name", outcome(admin.createTopics(List.of(new NewTopic("bad/name", 1, (short) 1))).all()));
        obs.put("listed", admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic));

        settle(() -> admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic));
        TopicDescription td = get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
        obs.put("describe_partitions", td.partitions().size());
        obs.put("describe_internal", td.isInternal());
        obs.put("describe_replicas", td.partitions().get(0).replicas().size());
        obs.put("describe_unknown", outcome(admin.describeTopics(List.of(m.name("no-such-topic"))).allTopicNames()));

        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(res, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("max.message.bytes", "200000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE)));
        obs.put("alter_configs", outcome(admin.incrementalAlterConfigs(ops).all()));
        settle(() -> "7200000".equals(get(admin.describeConfigs(List.of(res)).all()).get(res).get("retention.ms").value()));
        Config config = get(admin.describeConfigs(List.of(res)).all()).get(res);
        Map<String, Object> described = new TreeMap<>();
        for (String name : List.of("retention.ms", "max.message.bytes", "cleanup.policy", "segment.bytes")) {
            ConfigEntry e = config.get(name);
            described.put(name, e == null ? null : List.of(String.valueOf(e.value()), e.source().toString(), e.isReadOnly()));
        }
        obs.put("described_configs", described);
        Map<ConfigResource, Collection<AlterConfigOp>> bad = Map.of(res, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)));
        obs.put("alter_bad_value", outcome(admin.incrementalAlterConfigs(bad).all()));
        Map<ConfigResource, Collection<AlterConfigOp>> unknown = Map.of(res, List.of(
                new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET)));
        obs.put("alter_unknown_name", outcome(admin.incrementalAlterConfigs(unknown).all()));

        obs.put("create_partitions", outcome(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all()));
        obs.put("create_partitions_fewer", outcome(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all()));
        settle(() -> get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic).partitions().size() == 3);
        obs.put("partitions_after", get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic).partitions().size());

        // records: 30 with timestamps of their own (base + 10 ms a record, but offsets 7 and 20 carry the
        // largest, base + 10 s), then list offsets by each spec and delete the first twelve
        String data = m.name("adm-data");
        admin.createTopics(List.of(new NewTopic(data, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        long base = System.currentTimeMillis() - 3_600_000;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(m.producerProps())) {
            for (int i = 0; i < 30; i++) {
                long ts = i == 7 || i == 20 ? base + 10_000 : base + 10L * i;
                producer.send(new ProducerRecord<>(data, 0, ts, "k" + i, "d-" + i));
            }
        }
        TopicPartition tp = new TopicPartition(data, 0);
        obs.put("offsets_before_delete", listOffsets(admin, tp, base));
        Map<TopicPartition, RecordsToDelete> del = Map.of(tp, RecordsToDelete.beforeOffset(12));
        obs.put("delete_records_low_watermark", get(admin.deleteRecords(del).lowWatermarks().get(tp)).lowWatermark());
        obs.put("offsets_after_delete", listOffsets(admin, tp, base));
        Map<TopicPartition, RecordsToDelete> beyond = Map.of(tp, RecordsToDelete.beforeOffset(99));
        obs.put("delete_records_beyond_end", outcome(admin.deleteRecords(beyond).all()));
        obs.put("read_after_delete", m.readAll(List.of(tp), "read_uncommitted").size());

        // groups: a group with commits (made through the Admin client), listed, described, changed, deleted
        String group = m.name("adm-group");
        Map<TopicPartition, OffsetAndMetadata> offsets = Map.of(tp, new OffsetAndMetadata(20, "meta"));
        obs.put("alter_group_offsets", outcome(admin.alterConsumerGroupOffsets(group, offsets).all()));
        Map<TopicPartition, OffsetAndMetadata> listed = get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
        obs.put("group_offsets", listed.get(tp) == null ? null : List.of(listed.get(tp).offset(), listed.get(tp).metadata()));
        Set<String> groups = new TreeSet<>();
        for (GroupListing g : get(admin.listGroups(ListGroupsOptions.forConsumerGroups()).all())) {
            if (g.groupId().startsWith(m.run + "-adm")) {
                groups.add(m.strip(g.groupId()) + ":" + g.type().map(Object::toString).orElse("?") + ":"
                        + g.groupState().map(Object::toString).orElse("?") + ":" + g.protocol());
            }
        }
        obs.put("listed_groups", groups);
        ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
        obs.put("described_group", List.of(d.groupState().toString(), d.type().toString(), d.members().size(),
                d.partitionAssignor(), d.isSimpleConsumerGroup()));
        obs.put("described_unknown_group", outcome(admin.describeConsumerGroups(List.of(m.name("adm-no-group"))).all()));
        obs.put("delete_group_offsets", outcome(admin.deleteConsumerGroupOffsets(group, Set.of(tp)).all()));
        obs.put("group_offsets_after_delete", get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()).size());
        obs.put("delete_group", outcome(admin.deleteConsumerGroups(List.of(group)).all()));
        obs.put("delete_group_again", outcome(admin.deleteConsumerGroups(List.of(group)).all()));

        // a group with a live member: offsets cannot be altered or the group deleted under it
        String live = m.name("adm-live");
        Properties cp = m.consumerProps(live);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of(data));
            Matrix.waitFor("the live member's assignment", () -> { c.poll(Matrix.POLL); return !c.assignment().isEmpty(); });
            c.commitSync();
            obs.put("alter_live_group_offsets", outcome(admin.alterConsumerGroupOffsets(live, offsets).all()));
            obs.put("delete_live_group", outcome(admin.deleteConsumerGroups(List.of(live)).all()));
            obs.put("delete_live_group_offsets", outcome(admin.deleteConsumerGroupOffsets(live, Set.of(tp)).all()));
        }

        obs.put("delete_topic", outcome(admin.deleteTopics(List.of(topic)).all()));
        obs.put("delete_topic_again", outcome(admin.deleteTopics(List.of(topic)).all()));
        return obs;
    }

    private static Map<String, Long> listOffsets(Admin admin, TopicPartition tp, long base) throws Exception {
        Map<String, OffsetSpec> specs = new LinkedHashMap<>();
        specs.put("for_timestamp_base+55", OffsetSpec.forTimestamp(base + 55));
        specs.put("for_timestamp_base+5000", OffsetSpec.forTimestamp(base + 5_000));
        specs.put("for_timestamp_after_all", OffsetSpec.forTimestamp(base + 20_000));
        specs.put("earliest", OffsetSpec.earliest());
        specs.put("latest", OffsetSpec.latest());
        specs.put("max_timestamp", OffsetSpec.maxTimestamp());
        Map<String, Long> out = new TreeMap<>();
        for (Map.Entry<String, OffsetSpec> e : specs.entrySet()) {
            out.put(e.getKey(), get(admin.listOffsets(Map.of(tp, e.getValue())).partitionResult(tp)).offset());
        }
        return out;
    }
}
