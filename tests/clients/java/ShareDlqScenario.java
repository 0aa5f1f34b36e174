// One KafkaShareConsumer (Kafka 4.4, explicit acknowledgement) for share groups' dead letter queues
// (KIP-1191): a record whose value is "reject" is rejected, one whose value is "poison" is released at
// each delivery (until the delivery count limit archives it), every other one accepted. Prints
// "<ACK|REJECT|RELEASE> <partition> <offset> <deliveryCount>" per record, and "DONE" once `accepted`
// records are accepted, the reject rejected and the poison released `limit` times; exits at `timeoutMs`.
//   java ShareDlqScenario <bootstrap> <topic> <group> <accepted> <limit> <timeoutMs>
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareDlqScenario {
    public static void main(String[] args) {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int accepted = Integer.parseInt(args[3]), limit = Integer.parseInt(args[4]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[5]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", "dlq-scenario");
        p.put("share.acknowledgement.mode", "explicit");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        int acks = 0, rejects = 0, releases = 0;
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(topic));
            while (System.currentTimeMillis() < deadline && (acks < accepted || rejects < 1 || releases < limit)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    String kind;
                    if ("reject".equals(r.value())) {
                        c.acknowledge(r, AcknowledgeType.REJECT);
                        kind = "REJECT";
                        rejects++;
                    } else if ("poison".equals(r.value())) {
                        c.acknowledge(r, AcknowledgeType.RELEASE);
                        kind = "RELEASE";
                        releases++;
                    } else {
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                        kind = "ACK";
                        acks++;
                    }
                    System.out.println(kind + " " + r.partition() + " " + r.offset() + " "
                        + r.deliveryCount().orElse((short) -1));
                }
                c.commitSync();
            }
            System.out.println(acks >= accepted && rejects >= 1 && releases >= limit ? "DONE" : "TIMEOUT");
        }
        System.out.flush();
    }
}
