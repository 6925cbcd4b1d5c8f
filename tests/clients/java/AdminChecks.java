// Kafka's own Java Admin client against `regroup serve`: each check prints one line "name: result" (or
// "name: ERROR <exception class>: <message>"), which tests/clients/test_java_admin.py reads. Arguments:
// bootstrap address, a topic (created by the caller with 2 partitions), a group that committed offsets of
// that topic and has no members.

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

public class AdminChecks {
    interface Check {
        String run() throws Exception;
    }

    static void check(String name, Check check) {
        String result;
        try {
            result = check.run();
        } catch (ExecutionException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            result = "ERROR " + cause.getClass().getSimpleName() + ": " + cause.getMessage();
        } catch (Exception e) {
            result = "ERROR " + e.getClass().getSimpleName() + ": " + e.getMessage();
        }
        System.out.println(name + ": " + result.replace('\n', ' '));
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(props)) {
            ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "0");
            check("alter-topic-config", () -> {
                AlterConfigOp op = new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET);
                admin.incrementalAlterConfigs(Map.of(topicResource, List.of(op))).all().get();
                return "ok";
            });
            check("describe-topic-config", () -> {
                Config config = admin.describeConfigs(List.of(topicResource)).all().get().get(topicResource);
                ConfigEntry entry = config.get("retention.ms");
                return entry.value() + " " + entry.source();
            });
            check("describe-broker-config", () -> {
                Config config = admin.describeConfigs(List.of(broker)).all().get().get(broker);
                ConfigEntry entry = config.get("num.partitions");
                return entry == null ? "missing" : entry.value() + " " + entry.isReadOnly();
            });
            check("create-partitions", () -> {
                admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
                return String.valueOf(admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size());
            });
            check("delete-records", () -> {
                TopicPartition tp = new TopicPartition(topic, 0);
                return String.valueOf(
                    admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(1))).lowWatermarks().get(tp).get().lowWatermark());
            });
            check("delete-group-offsets", () -> {
                TopicPartition tp = new TopicPartition(topic, 1);
                admin.deleteConsumerGroupOffsets(group, Set.of(tp)).all().get();
                Map<TopicPartition, OffsetAndMetadata> left =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                return left.keySet().stream().map(TopicPartition::toString).sorted().reduce((a, b) -> a + "," + b).orElse("-");
            });
            check("group-config", () -> {
                ConfigResource groupResource = new ConfigResource(ConfigResource.Type.GROUP, group);
                AlterConfigOp op = new AlterConfigOp(
                    new ConfigEntry("consumer.heartbeat.interval.ms", "6000"), AlterConfigOp.OpType.SET);
                admin.incrementalAlterConfigs(Map.of(groupResource, List.of(op))).all().get();
                Config config = admin.describeConfigs(List.of(groupResource)).all().get().get(groupResource);
                ConfigEntry entry = config.get("consumer.heartbeat.interval.ms");
                return entry.value() + " " + entry.source();
            });
            check("describe-cluster", () -> {
                Collection<?> nodes = admin.describeCluster().nodes().get();
                return admin.describeCluster().clusterId().get() + " " + nodes.size();
            });
        }
    }
}
