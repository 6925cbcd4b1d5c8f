// Kafka's own Java consumer as a KIP-848 member (group.protocol=consumer) naming a server-side assignor with
// group.remote.assignor: it subscribes to one topic and polls until its standard input closes, printing
// "assigned <partitions>" whenever its assignment changes; fatal errors are printed as "error <message>".
// Arguments: bootstrap topic group assignor client-id.
import java.time.Duration;
import java.util.*;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class RemoteAssignorMember {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], assignor = args[3], clientId = args[4];
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("client.id", clientId);
        props.put("group.protocol", "consumer");
        props.put("group.remote.assignor", assignor);
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        Thread watcher = new Thread(() -> {
            try {
                while (System.in.read() != -1) { }
            } catch (Exception ignored) { }
        });
        watcher.setDaemon(true);
        watcher.start();
        String last = null;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            while (watcher.isAlive()) {
                consumer.poll(Duration.ofMillis(100));
                String now = consumer.assignment().stream().map(TopicPartition::partition).sorted()
                    .map(String::valueOf).collect(Collectors.joining(","));
                if (!now.equals(last)) {
                    System.out.println("assigned " + now);
                    System.out.flush();
                    last = now;
                }
            }
        } catch (Exception e) {
            System.out.println("error " + e);
            System.out.flush();
            System.exit(1);
        }
    }
}
