// Kafka's own client-side sticky assignors (StickyAssignor, CooperativeStickyAssignor) run on inputs read as
// JSON lines from stdin, one result line written to stdout per input. Used by the project's differential
// tests of its rack-aware sticky strategies (tests/property/test_rack_sticky_kafka.py).
//
// Input line:
//   {"strategy": "sticky" | "cooperative-sticky",
//    "prefer_rack_aware_logic": false,            (Kafka's test-only switch, set by reflection)
//    "topics": {"t": [["a", "b"], [], ...]},      (per partition: the racks of its replicas)
//    "members": {"m": {"topics": ["t"], "rack": "a" or null,
//                      "owned": {"t": [0, 1]}, "generation": 3 or -1,
//                      "user_data": base64 or null}}}
// Output line: {"assignment": {"m": {"t": [0, 1]}}} or {"error": "..."}.
//
// Every input gets a fresh assignor: Kafka's sticky assignors keep the highest generation seen between calls.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractPartitionAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

public class StickyOracle {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank())
                continue;
            ObjectNode result = JSON.createObjectNode();
            try {
                result.set("assignment", run(JSON.readTree(line)));
            } catch (Exception e) {
                result.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            out.println(JSON.writeValueAsString(result));
        }
        out.flush();
    }

    static ObjectNode run(JsonNode input) throws Exception {
        String strategy = input.get("strategy").asText();
        ConsumerPartitionAssignor assignor;
        if (strategy.equals("sticky"))
            assignor = new StickyAssignor();
        else if (strategy.equals("cooperative-sticky"))
            assignor = new CooperativeStickyAssignor();
        else
            throw new IllegalArgumentException("unknown strategy " + strategy);
        if (input.path("prefer_rack_aware_logic").asBoolean(false)) {
            Field prefer = AbstractPartitionAssignor.class.getDeclaredField("preferRackAwareLogic");
            prefer.setAccessible(true);
            prefer.setBoolean(assignor, true);
        }

        // One broker per distinct rack, plus one without a rack for replicas on rack-less brokers.
        Map<String, Node> nodeOfRack = new TreeMap<>();
        Node rackless = new Node(0, "broker-norack", 9092, null);
        List<PartitionInfo> partitions = new ArrayList<>();
        Iterator<Map.Entry<String, JsonNode>> topics = input.get("topics").fields();
        while (topics.hasNext()) {
            Map.Entry<String, JsonNode> topic = topics.next();
            int p = 0;
            for (JsonNode replicaRacks : topic.getValue()) {
                List<Node> replicas = new ArrayList<>();
                for (JsonNode rack : replicaRacks) {
                    if (rack.isNull()) {
                        replicas.add(rackless);
                    } else {
                        String r = rack.asText();
                        replicas.add(nodeOfRack.computeIfAbsent(
                            r, k -> new Node(nodeOfRack.size() + 1, "broker-" + k, 9092, k)));
                    }
                }
                if (replicas.isEmpty())
                    replicas.add(rackless);
                Node[] nodes = replicas.toArray(new Node[0]);
                partitions.add(new PartitionInfo(topic.getKey(), p, nodes[0], nodes, nodes));
                p++;
            }
        }
        List<Node> allNodes = new ArrayList<>(nodeOfRack.values());
        allNodes.add(rackless);
        Cluster cluster = new Cluster("cluster", allNodes, partitions, Collections.emptySet(), Collections.emptySet());

        Map<String, Subscription> subscriptions = new HashMap<>();
        Iterator<Map.Entry<String, JsonNode>> members = input.get("members").fields();
        while (members.hasNext()) {
            Map.Entry<String, JsonNode> member = members.next();
            JsonNode m = member.getValue();
            List<String> subscribed = new ArrayList<>();
            for (JsonNode t : m.get("topics"))
                subscribed.add(t.asText());
            List<TopicPartition> owned = new ArrayList<>();
            Iterator<Map.Entry<String, JsonNode>> ownedTopics = m.path("owned").fields();
            while (ownedTopics.hasNext()) {
                Map.Entry<String, JsonNode> entry = ownedTopics.next();
                for (JsonNode p : entry.getValue())
                    owned.add(new TopicPartition(entry.getKey(), p.asInt()));
            }
            JsonNode userData = m.path("user_data");
            ByteBuffer data = userData.isMissingNode() || userData.isNull()
                ? null : ByteBuffer.wrap(Base64.getDecoder().decode(userData.asText()));
            JsonNode rack = m.path("rack");
            Optional<String> rackId = rack.isMissingNode() || rack.isNull() ? Optional.empty() : Optional.of(rack.asText());
            int generation = m.path("generation").asInt(-1);
            subscriptions.put(member.getKey(), new Subscription(subscribed, data, owned, generation, rackId));
        }

        Map<String, ConsumerPartitionAssignor.Assignment> assigned =
            assignor.assign(cluster, new GroupSubscription(subscriptions)).groupAssignment();
        ObjectNode result = JSON.createObjectNode();
        for (String member : new java.util.TreeSet<>(subscriptions.keySet())) {
            ObjectNode perTopic = result.putObject(member);
            ConsumerPartitionAssignor.Assignment a = assigned.get(member);
            if (a == null)
                continue;
            Map<String, List<Integer>> byTopic = new TreeMap<>();
            for (TopicPartition tp : a.partitions())
                byTopic.computeIfAbsent(tp.topic(), k -> new ArrayList<>()).add(tp.partition());
            for (Map.Entry<String, List<Integer>> e : byTopic.entrySet()) {
                Collections.sort(e.getValue());
                ArrayNode list = perTopic.putArray(e.getKey());
                e.getValue().forEach(list::add);
            }
        }
        return result;
    }
}
