// A Kafka Streams 4.4 application (classic group protocol), end to end: a word count whose groupBy
// repartitions through an internal topic and whose count lives in a state store with a changelog, under
// exactly-once (v2) processing; the final counts are read from the output with read_committed and from
// the store through interactive queries.
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
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
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

final class StreamsScenario {
    private StreamsScenario() {}

    static final String[] LINES = {
        "the quick brown fox", "jumps over the lazy dog", "the dog sleeps", "a fox is quick",
        "over and over again", "the end",
    };

    /** The word count: lines split into words, grouped by word (a repartition), counted into the store "counts". */
    static Topology wordCountTopology(String in, String out) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(v -> Arrays.asList(v.toLowerCase().split("\\W+")))
                .groupBy((k, word) -> word)
                .count(Materialized.as("counts"))
                .toStream()
                .to(out, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    // Issue 46's join of two co-partitioned topics: every left record with every right record of its key
    // within an hour (a windowed KStream-KStream join, two window stores with changelogs), as "left+right".
    static Topology joinTopology(String left, String right, String out) {
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> l = builder.stream(left, Consumed.with(Serdes.String(), Serdes.String()));
        KStream<String, String> r = builder.stream(right, Consumed.with(Serdes.String(), Serdes.String()));
        l.join(r, (lv, rv) -> lv + "+" + rv, JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofHours(1)),
                        StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String()))
                .to(out, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    static Map<String, Object> wordCount(Matrix m) throws Exception {
        m.createTopics(2, "wc-in", "wc-out");
        Map<String, Long> expected = new TreeMap<>();
        List<String> lines = new ArrayList<>();
        for (int round = 0; round < 5; round++) lines.addAll(Arrays.asList(LINES));
        for (String line : lines) for (String w : line.split(" ")) expected.merge(w, 1L, Long::sum);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(m.producerProps())) {
            int i = 0;
            for (String line : lines) producer.send(new ProducerRecord<>(m.name("wc-in"), "line" + (i++ % 5), line));
        }

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, m.name("wc"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, m.bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("kbroker-streams").toString());
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        Map<String, Object> obs = new LinkedHashMap<>();
        Map<String, Long> output = new TreeMap<>();
        try (KafkaStreams streams = new KafkaStreams(wordCountTopology(m.name("wc-in"), m.name("wc-out")), p)) {
            streams.start();
            Properties cp = m.consumerProps(null);
            cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class.getName());
            try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(cp)) {
                List<TopicPartition> out = m.partitions("wc-out", 2);
                c.assign(out);
                c.seekToBeginning(out);
                Matrix.waitFor("the final counts on the output", () -> {
                    for (ConsumerRecord<String, Long> r : c.poll(Matrix.POLL)) output.put(r.key(), r.value());
                    return output.equals(expected);
                });
            }
            obs.put("output_is_the_counts", output.equals(expected));
            obs.put("words", output.size());
            obs.put("state", streams.state().toString());
            ReadOnlyKeyValueStore<String, Long> store = streams.store(
                    StoreQueryParameters.fromNameAndType("counts", QueryableStoreTypes.keyValueStore()));
            Map<String, Long> stored = new TreeMap<>();
            store.all().forEachRemaining(kv -> stored.put(kv.key, kv.value));
            obs.put("store_is_the_counts", stored.equals(expected));
            streams.close(Duration.ofSeconds(30));
            obs.put("state_after_close", streams.state().toString());
        }
        Set<String> internal = new TreeSet<>();
        for (String t : m.admin.listTopics().names().get(30, TimeUnit.SECONDS)) {
            boolean ours = t.startsWith(m.name("wc-")) && !t.equals(m.name("wc-in")) && !t.equals(m.name("wc-out"));
            if (ours) internal.add(m.strip(t));
        }
        obs.put("internal_topics", internal);
        obs.put("group_lag_on_input", m.lag(m.name("wc"), m.partitions("wc-in", 2)));
        return obs;
    }
}
