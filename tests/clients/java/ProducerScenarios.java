// Producers: idempotent (every acknowledged record once, in order per partition) and transactional
// (consume-transform-produce with sendOffsetsToTransaction, an aborted transaction, a fenced producer).
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

final class ProducerScenarios {
    private ProducerScenarios() {}

    static Map<String, Object> idempotent(Matrix m) throws Exception {
        m.createTopics(3, "idem");
        List<TopicPartition> parts = m.partitions("idem", 3);
        Properties p = m.producerProps();
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        List<String> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < 300; i++) {
                String value = "v-" + i;
                sent.add(value);
                acks.add(producer.send(new ProducerRecord<>(m.name("idem"), "k" + (i % 17), value)));
            }
            producer.flush();
        }
        // what the acknowledgements said: partition and offset of every record, in send order
        Map<Integer, List<String>> sentByPartition = new TreeMap<>();
        Map<Integer, List<Long>> ackedOffsets = new TreeMap<>();
        for (int i = 0; i < acks.size(); i++) {
            RecordMetadata md = acks.get(i).get();
            sentByPartition.computeIfAbsent(md.partition(), k -> new ArrayList<>()).add(sent.get(i));
            ackedOffsets.computeIfAbsent(md.partition(), k -> new ArrayList<>()).add(md.offset());
        }
        boolean contiguous = true;
        for (List<Long> offsets : ackedOffsets.values()) {
            for (int i = 0; i < offsets.size(); i++) contiguous &= offsets.get(i) == i;
        }
        // what a consumer reads back: each record once, in the order sent, per partition
        Map<Integer, List<String>> readByPartition = new TreeMap<>();
        for (ConsumerRecord<String, String> r : m.readAll(parts, "read_uncommitted")) {
            readByPartition.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value());
        }
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, Integer> perPartition = new TreeMap<>();
        sentByPartition.forEach((k, v) -> perPartition.put(String.valueOf(k), v.size()));
        out.put("records_per_partition", perPartition);
        out.put("acked_offsets_contiguous", contiguous);
        out.put("read_back_in_send_order", readByPartition.equals(sentByPartition));
        out.put("end_offsets", m.endOffsets(parts));
        return out;
    }

    static Map<String, Object> transactional(Matrix m) throws Exception {
        m.createTopics(2, "tx-in", "tx-out");
        List<TopicPartition> in = m.partitions("tx-in", 2);
        List<TopicPartition> out = m.partitions("tx-out", 2);
        m.produce("tx-in", 40, "in");
        String group = m.name("tx-group");
        Properties pp = m.producerProps();
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, m.name("tx-id"));
        Properties cp = m.consumerProps(group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7");
        int transactions = 0;
        String fenced;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp);
             KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            producer.initTransactions();
            consumer.subscribe(List.of(m.name("tx-in")));
            int[] transformed = {0};
            int[] count = {0};
            Matrix.waitFor("transforming 40 records", () -> {
                ConsumerRecords<String, String> records = consumer.poll(Matrix.POLL);
                if (records.isEmpty()) return transformed[0] >= 40;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(m.name("tx-out"), r.key(), r.value().toUpperCase()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    transformed[0]++;
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                count[0]++;
                return transformed[0] >= 40;
            });
            transactions = count[0];
            producer.beginTransaction();
            for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>(m.name("tx-out"), "k" + i, "aborted-" + i));
            producer.flush();
            producer.abortTransaction();
            producer.beginTransaction();
            for (int i = 0; i < 3; i++) producer.send(new ProducerRecord<>(m.name("tx-out"), "k" + i, "late-" + i));
            producer.commitTransaction();
            // a second producer with the same transactional.id fences this one
            try (KafkaProducer<String, String> successor = new KafkaProducer<>(pp)) {
                successor.initTransactions();
                try {
                    producer.beginTransaction();
                    producer.send(new ProducerRecord<>(m.name("tx-out"), "k", "zombie")).get();
                    producer.commitTransaction();
                    fenced = "not fenced";
                } catch (Exception e) {
                    Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                    fenced = cause.getClass().getSimpleName();
                }
            }
        }
        List<ConsumerRecord<String, String>> committed = m.readAll(out, "read_committed");
        List<ConsumerRecord<String, String>> uncommitted = m.readAll(out, "read_uncommitted");
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < 40; i++) expected.add("IN-" + i);
        for (int i = 0; i < 3; i++) expected.add("late-" + i);
        expected.sort(null);
        List<String> seen = new ArrayList<>();
        for (ConsumerRecord<String, String> r : committed) seen.add(r.value());
        seen.sort(null);
        int aborted = 0;
        for (ConsumerRecord<String, String> r : uncommitted) if (r.value().startsWith("aborted-")) aborted++;
        Map<String, Object> obs = new LinkedHashMap<>();
        obs.put("read_committed_count", committed.size());
        obs.put("read_committed_is_exactly_the_committed", seen.equals(expected));
        obs.put("read_uncommitted_count", uncommitted.size());
        obs.put("read_uncommitted_aborted", aborted);
        obs.put("transactions_committed_at_least_one", transactions >= 1);
        obs.put("group_committed", m.committed(group));
        obs.put("group_lag", m.lag(group, in));
        obs.put("zombie_producer", fenced);
        return obs;
    }
}
