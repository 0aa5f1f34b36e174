// One Kafka Streams 4.4 instance (its own JVM, so that a test can kill -9 it) running StreamsScenario's word
// count on the streams rebalance protocol (KIP-1071, group.protocol=streams) under exactly-once v2, the
// record cache off so that every input word is one count on the output. Standby replicas are the group's
// business with this protocol: the broker's group config streams.num.standby.replicas, not this client's.
// Every 300 ms, and whenever its state changes, one line on stdout:
//
//     S {"state": "RUNNING", "active": ["0_0", "1_1"], "standby": ["1_0"]}
//
// "stop" on stdin closes it cleanly (it leaves the group). IN as LEFT,RIGHT runs StreamsScenario's join of
// two co-partitioned topics instead of the word count.
//
//     java -cp CLASSES:build/kafka/libs/* StreamsInstance BOOTSTRAP APPLICATION_ID IN OUT STATE_DIR
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;

public final class StreamsInstance {
    private StreamsInstance() {}

    static synchronized void report(KafkaStreams streams) {
        TreeSet<String> active = new TreeSet<>();
        TreeSet<String> standby = new TreeSet<>();
        try {
            for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                for (TaskMetadata task : t.activeTasks()) active.add(task.taskId().toString());
                for (TaskMetadata task : t.standbyTasks()) standby.add(task.taskId().toString());
            }
        } catch (RuntimeException e) {
            // not running yet or any more: the state says so
        }
        System.out.println("S {\"state\": \"" + streams.state() + "\", \"active\": " + json(active)
                + ", \"standby\": " + json(standby) + "}");
        System.out.flush();
    }

    static String json(TreeSet<String> items) {
        List<String> quoted = new ArrayList<>();
        for (String s : items) quoted.add("\"" + s + "\"");
        return "[" + String.join(", ", quoted) + "]";
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        String[] inputs = args[2].split(",");
        KafkaStreams streams = new KafkaStreams(inputs.length == 2 ? StreamsScenario.joinTopology(inputs[0], inputs[1], args[3])
                : StreamsScenario.wordCountTopology(args[2], args[3]), p);
        streams.setStateListener((now, before) -> report(streams));
        streams.start();
        Thread reporter = new Thread(() -> {
            while (true) {
                report(streams);
                try {
                    Thread.sleep(300);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        reporter.setDaemon(true);
        reporter.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
            // wait for "stop" (or the end of stdin)
        }
        reporter.interrupt();
        streams.close(Duration.ofSeconds(30));
        report(streams);
    }
}
