// Kafka's own Java client against regroup serve: a transactional producer (commit, abort, fencing by a second
// instance), a read_committed consumer, and the Admin views of KIP-664 (listTransactions,
// describeTransactions, describeProducers). Prints one line per check; the test reads them.
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.*;

public class TxnCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], tid = args[2];
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        Properties pp = new Properties();
        pp.putAll(common);
        pp.put("transactional.id", tid);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(pp);
        producer.initTransactions();
        producer.beginTransaction();
        for (int i = 0; i < 3; i++) producer.send(new ProducerRecord<>(topic, 0, null, "c" + i));
        producer.commitTransaction();
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(topic, 0, null, "a0")).get();
        producer.abortTransaction();
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(topic, 0, null, "open")).get();
        try (Admin admin = Admin.create(common)) {
            for (TransactionListing l : admin.listTransactions().all().get())
                if (l.transactionalId().equals(tid)) System.out.println("listed " + l.state());
            TransactionDescription d = admin.describeTransactions(List.of(tid)).description(tid).get();
            System.out.println("described " + d.state() + " " + d.topicPartitions());
            DescribeProducersResult.PartitionProducerState ps =
                admin.describeProducers(List.of(new TopicPartition(topic, 0))).partitionResult(new TopicPartition(topic, 0)).get();
            for (ProducerState s : ps.activeProducers())
                System.out.println("producer txnStart=" + s.currentTransactionStartOffset().orElse(-1L));
        }
        KafkaProducer<String, String> second = new KafkaProducer<>(pp);
        second.initTransactions();  // fences the first and aborts its open transaction
        try {
            producer.send(new ProducerRecord<>(topic, 0, null, "zombie")).get();
            System.out.println("zombie sent");
        } catch (ExecutionException e) {
            System.out.println("zombie send " + e.getCause().getClass().getSimpleName());  // abortable, as with Kafka
        }
        try {
            producer.abortTransaction();
            System.out.println("zombie aborted");
        } catch (KafkaException e) {
            System.out.println("zombie abort " + e.getClass().getSimpleName());  // fenced: fatal
        }
        producer.close(Duration.ofSeconds(1));
        second.beginTransaction();
        second.send(new ProducerRecord<>(topic, 0, null, "c3"));
        second.commitTransaction();
        second.close();
        Properties cp = new Properties();
        cp.putAll(common);
        cp.put("isolation.level", "read_committed");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.assign(List.of(new TopicPartition(topic, 0)));
            consumer.seekToBeginning(List.of(new TopicPartition(topic, 0)));
            List<String> seen = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 10_000;
            while (seen.size() < 4 && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) seen.add(r.value());
            System.out.println("read_committed " + seen);
        }
    }
}
