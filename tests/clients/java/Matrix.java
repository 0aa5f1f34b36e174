// The Java client 4.4 side of the client matrix (tests/reference/test_client_matrix.py): one JVM runs the
// scenarios it is given against one broker and prints one JSON line per scenario on stdout,
//
//     {"scenario": NAME, "observed": {...}}      or      {"scenario": NAME, "error": "..."}
//
// where "observed" holds only what a client can see and what must be equal on Apache Kafka and kbroker:
// topic and group names relative to the run's prefix, no member ids, no timings.
//
//     java -cp CLASSES:build/kafka/libs/* Matrix BOOTSTRAP RUN_PREFIX SCENARIO...
//
// Scenarios: producer-idempotent, producer-transactional, classic-{range,roundrobin,sticky,cooperative-sticky},
// consumer-{uniform,range}, regex-classic, regex-consumer, admin, streams-wordcount.
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
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
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class Matrix {
    static final Duration POLL = Duration.ofMillis(100);
    static final long WAIT_MS = 60_000;

    final String bootstrap;
    final String run;
    final Admin admin;

    Matrix(String bootstrap, String run) {
        this.bootstrap = bootstrap;
        this.run = run;
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, run + "-admin");
        this.admin = Admin.create(p);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: Matrix BOOTSTRAP RUN_PREFIX SCENARIO...");
            System.exit(2);
        }
        Matrix m = new Matrix(args[0], args[1]);
        for (int i = 2; i < args.length; i++) {
            String name = args[i];
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("scenario", name);
            try {
                line.put("observed", m.scenario(name));
            } catch (Throwable e) {
                StringWriter trace = new StringWriter();
                e.printStackTrace(new PrintWriter(trace));
                line.put("error", trace.toString());
            }
            System.out.println(Json.write(line));
            System.out.flush();
        }
        m.admin.close(Duration.ofSeconds(5));
        System.exit(0); // Streams and client threads must not keep the JVM up
    }

    Map<String, Object> scenario(String name) throws Exception {
        switch (name) {
            case "producer-idempotent": return ProducerScenarios.idempotent(this);
            case "producer-transactional": return ProducerScenarios.transactional(this);
            case "regex-classic": return ConsumerScenarios.regexClassic(this);
            case "regex-consumer": return ConsumerScenarios.regexConsumer(this);
            case "admin": return AdminScenario.run(this);
            case "streams-wordcount": return StreamsScenario.wordCount(this);
            case "streams-protocol": return StreamsProtocolScenario.run(this);
            default:
                if (name.startsWith("classic-")) return ConsumerScenarios.group(this, "classic", name.substring(8));
                if (name.startsWith("consumer-")) return ConsumerScenarios.group(this, "consumer", name.substring(9));
                throw new IllegalArgumentException("unknown scenario " + name);
        }
    }

    // --- names: everything a run creates starts with its prefix; observations carry the rest -------------

    String name(String shortName) { return run + "-" + shortName; }

    String strip(String fullName) { return fullName.startsWith(run + "-") ? fullName.substring(run.length() + 1) : fullName; }

    String tp(TopicPartition tp) { return strip(tp.topic()) + "-" + tp.partition(); }

    List<String> tps(Collection<TopicPartition> parts) {
        List<String> out = new ArrayList<>();
        for (TopicPartition p : parts) out.add(tp(p));
        out.sort(null);
        return out;
    }

    // --- helpers shared by the scenarios --------------------------------------------------------------

    void createTopics(int partitions, String... shortNames) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        for (String s : shortNames) topics.add(new NewTopic(name(s), partitions, (short) 1));
        admin.createTopics(topics).all().get(30, TimeUnit.SECONDS);
    }

    List<TopicPartition> partitions(String shortName, int n) {
        List<TopicPartition> out = new ArrayList<>();
        for (int i = 0; i < n; i++) out.add(new TopicPartition(name(shortName), i));
        return out;
    }

    Properties producerProps() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        return p;
    }

    Properties consumerProps(String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        return p;
    }

    /** Sends `count` records keyed k{i % 17} with values PREFIX-i, plainly (acks=all, idempotent by default). */
    void produce(String shortName, int count, String prefix) throws Exception {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps())) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(name(shortName), "k" + (i % 17), prefix + "-" + i));
            }
            producer.flush();
        }
    }

    /** Every record of the given partitions, from the beginning to the end offsets as they are now. */
    List<ConsumerRecord<String, String>> readAll(List<TopicPartition> parts, String isolation) throws Exception {
        Properties p = consumerProps(null);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            Map<TopicPartition, Long> end = consumer.endOffsets(parts);
            waitFor("reading " + tps(parts) + " to " + end, () -> {
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) out.add(r);
                for (TopicPartition tp : parts) {
                    if (consumer.position(tp) < end.get(tp)) return false;
                }
                return true;
            });
        }
        return out;
    }

    Map<String, Long> endOffsets(List<TopicPartition> parts) throws Exception {
        Map<TopicPartition, OffsetSpec> spec = new HashMap<>();
        for (TopicPartition tp : parts) spec.put(tp, OffsetSpec.latest());
        Map<String, Long> out = new TreeMap<>();
        admin.listOffsets(spec).all().get(30, TimeUnit.SECONDS).forEach((tp, info) -> out.put(tp(tp), info.offset()));
        return out;
    }

    Map<String, Long> committed(String group) throws Exception {
        Map<String, Long> out = new TreeMap<>();
        Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
        offsets.forEach((tp, om) -> out.put(tp(tp), om == null ? null : om.offset()));
        return out;
    }

    /** The group's lag as Admin tools compute it: end offset minus committed offset, summed. */
    long lag(String group, List<TopicPartition> parts) throws Exception {
        Map<String, Long> end = endOffsets(parts);
        Map<String, Long> committed = committed(group);
        long lag = 0;
        for (Map.Entry<String, Long> e : end.entrySet()) {
            Long c = committed.get(e.getKey());
            lag += e.getValue() - (c == null ? 0 : c);
        }
        return lag;
    }

    static void waitFor(String what, BooleanSupplier done) {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (!done.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("timed out: " + what);
        }
    }

    static Set<String> values(Collection<ConsumerRecord<String, String>> records) {
        Set<String> out = new TreeSet<>();
        for (ConsumerRecord<String, String> r : records) out.add(r.value());
        return out;
    }
}
