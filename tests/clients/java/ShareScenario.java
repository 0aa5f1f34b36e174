// Several KafkaShareConsumer members (Kafka 4.4, explicit acknowledgement) on one topic, and one member
// that takes records and walks away without acknowledging them (as a killed process would): prints one
// line per acknowledged record, "ACK <partition> <offset> <deliveryCount> <member>", until `expected`
// records are acknowledged or `timeoutMs` passes; a record whose value starts with "poison" is rejected.
//   java ShareScenario <bootstrap> <topic> <group> <members> <expected> <timeoutMs>
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareScenario {
    static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, String id) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", id);
        p.put("share.acknowledgement.mode", "explicit");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaShareConsumer<>(p);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int members = Integer.parseInt(args[3]), expected = Integer.parseInt(args[4]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[5]);
        AtomicInteger acked = new AtomicInteger();
        // the member that walks away: it takes one poll's records and never acknowledges nor closes
        KafkaShareConsumer<String, String> quitter = consumer(bootstrap, group, "quitter");
        quitter.subscribe(List.of(topic));
        while (System.currentTimeMillis() < deadline) {
            ConsumerRecords<String, String> taken = quitter.poll(Duration.ofMillis(500));
            if (!taken.isEmpty()) {
                for (ConsumerRecord<String, String> r : taken) {
                    System.out.println("QUIT " + r.partition() + " " + r.offset());
                }
                break;
            }
        }
        System.out.flush();
        Thread[] threads = new Thread[members];
        for (int i = 0; i < members; i++) {
            String id = "member-" + i;
            threads[i] = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, id)) {
                    c.subscribe(List.of(topic));
                    while (acked.get() < expected && System.currentTimeMillis() < deadline) {
                        ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(500));
                        for (ConsumerRecord<String, String> r : records) {
                            boolean poison = r.value() != null && r.value().startsWith("poison");
                            c.acknowledge(r, poison ? AcknowledgeType.REJECT : AcknowledgeType.ACCEPT);
                            synchronized (System.out) {
                                System.out.println((poison ? "REJECT " : "ACK ") + r.partition() + " " + r.offset() + " "
                                    + r.deliveryCount().orElse((short) -1) + " " + id);
                            }
                            if (!poison) acked.incrementAndGet();
                        }
                        if (!records.isEmpty()) c.commitSync();
                    }
                }
            });
            threads[i].start();
        }
        for (Thread t : threads) t.join();
        System.out.println("DONE " + acked.get());
        System.out.flush();
        System.exit(0);  // the quitter is never closed: its process ends here
    }
}
