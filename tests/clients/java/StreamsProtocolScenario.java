// A Kafka Streams 4.4 application on the streams rebalance protocol (KIP-1071, group.protocol=streams):
// the word count of StreamsScenario (a repartition through an internal topic, a state store with a
// changelog) run by one instance, then by three; the broker assigns the tasks. Observed: the counts on
// the output after each phase, the tasks per instance once three run, and the internal topics made.
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;

final class StreamsProtocolScenario {
    private StreamsProtocolScenario() {}

    static KafkaStreams instance(Matrix m) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, m.name("sp"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, m.bootstrap);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("kbroker-streams").toString());
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        KafkaStreams streams = new KafkaStreams(StreamsScenario.wordCountTopology(m.name("sp-in"), m.name("sp-out")), p);
        streams.start();
        return streams;
    }

    static int activeTasks(KafkaStreams s) {
        int n = 0;
        for (ThreadMetadata t : s.metadataForLocalThreads()) n += t.activeTasks().size();
        return n;
    }

    static void produce(Matrix m, int rounds, Map<String, Long> expected) {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(m.producerProps())) {
            int i = 0;
            for (int round = 0; round < rounds; round++) {
                for (String line : StreamsScenario.LINES) {
                    producer.send(new ProducerRecord<>(m.name("sp-in"), "line" + (i++ % 5), line));
                    for (String w : line.split(" ")) expected.merge(w, 1L, Long::sum);
                }
            }
        }
    }

    static boolean awaitCounts(Matrix m, KafkaConsumer<String, Long> c, Map<String, Long> output,
                               Map<String, Long> expected) {
        Matrix.waitFor("the counts on the output", () -> {
            for (ConsumerRecord<String, Long> r : c.poll(Matrix.POLL)) output.put(r.key(), r.value());
            return output.equals(expected);
        });
        return output.equals(expected);
    }

    static Map<String, Object> run(Matrix m) throws Exception {
        m.createTopics(2, "sp-in", "sp-out");
        Map<String, Long> expected = new TreeMap<>();
        Map<String, Long> output = new TreeMap<>();
        Map<String, Object> obs = new LinkedHashMap<>();
        List<KafkaStreams> instances = new ArrayList<>();
        Properties cp = m.consumerProps(null);
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class.getName());
        try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(cp)) {
            List<TopicPartition> out = m.partitions("sp-out", 2);
            c.assign(out);
            c.seekToBeginning(out);
            instances.add(instance(m));
            produce(m, 3, expected);
            obs.put("one_instance_output_is_the_counts", awaitCounts(m, c, output, expected));
            obs.put("one_instance_tasks", activeTasks(instances.get(0)));

            instances.add(instance(m));
            instances.add(instance(m));
            Matrix.waitFor("three running instances sharing the tasks", () -> {
                int total = 0;
                for (KafkaStreams s : instances) {
                    if (s.state() != KafkaStreams.State.RUNNING || activeTasks(s) == 0) return false;
                    total += activeTasks(s);
                }
                return total == 4;
            });
            List<Integer> perInstance = new ArrayList<>();
            for (KafkaStreams s : instances) perInstance.add(activeTasks(s));
            perInstance.sort(null);
            obs.put("three_instances_tasks", perInstance);
            produce(m, 2, expected);
            obs.put("three_instances_output_is_the_counts", awaitCounts(m, c, output, expected));
        } finally {
            for (KafkaStreams s : instances) s.close(Duration.ofSeconds(30));
        }
        Set<String> internal = new TreeSet<>();
        for (String t : m.admin.listTopics().names().get(30, TimeUnit.SECONDS)) {
            boolean ours = t.startsWith(m.name("sp-")) && !t.equals(m.name("sp-in")) && !t.equals(m.name("sp-out"));
            if (ours) internal.add(m.strip(t));
        }
        obs.put("internal_topics", internal);
        obs.put("words", output.size());
        return obs;
    }
}
