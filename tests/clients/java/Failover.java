// The Java client 4.4 in the cluster failover scenarios (tests/integration/test_cluster_clients.py): an
// idempotent producer (acks=all) and a committing consumer group on one topic, until a "stop" line on stdin;
// then the producer flushes and the consumer reads on until it has every acknowledged record. One line per
// event on stdout, as every failover workload prints them (tests/clients/failover/README.md):
//
//     A <value>   acknowledged        C <value>   consumed (committed after its poll)
//     E <text>    an error the client reported to the application        P   the producer is done
//
//     java -cp CLASSES:build/kafka/libs/* Failover BOOTSTRAP TOPIC GROUP
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class Failover {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        AtomicBoolean stop = new AtomicBoolean(), produced = new AtomicBoolean();
        Set<String> acked = ConcurrentHashMap.newKeySet();
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) { }
            } catch (Exception ignored) { }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        Thread producing = new Thread(() -> {
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
                for (int i = 0; !stop.get(); i++) {
                    String value = String.format("r%06d", i);
                    producer.send(new ProducerRecord<>(topic, Integer.toString(i % 16), value), (md, e) -> {
                        if (e == null) {
                            acked.add(value);
                            say("A " + value);
                        } else {
                            say("E produce: " + e.getClass().getSimpleName() + ": " + e.getMessage());
                        }
                    });
                    Thread.sleep(2);
                }
                producer.flush();
            } catch (Exception e) {
                say("E producer: " + e);
            }
            produced.set(true);
            say("P");
        });
        producing.start();

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Set<String> consumed = ConcurrentHashMap.newKeySet();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(List.of(topic));
            long idleSince = System.currentTimeMillis();
            while (!(produced.get() && consumed.containsAll(acked))) {
                ConsumerRecords<String, String> records;
                try {
                    records = consumer.poll(Duration.ofMillis(200));
                } catch (Exception e) {
                    say("E consume: " + e.getClass().getSimpleName() + ": " + e.getMessage());
                    continue;
                }
                if (records.isEmpty()) {
                    if (produced.get() && System.currentTimeMillis() - idleSince > 20_000) break;
                    continue;
                }
                idleSince = System.currentTimeMillis();
                for (ConsumerRecord<String, String> r : records) {
                    consumed.add(r.value());
                    say("C " + r.value());
                }
                try {
                    consumer.commitSync();
                } catch (Exception e) {
                    say("E commit: " + e.getClass().getSimpleName() + ": " + e.getMessage());
                }
            }
        }
        producing.join();
        say("DONE");
    }
}
