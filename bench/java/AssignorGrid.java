/*
 * Times Kafka's KIP-848 server-side assignors (UniformAssignor and RangeAssignor of the group coordinator, from
 * kafka-server-assignors.jar) on the grid of Kafka's ConsumerAssignorBenchmark, case by case, for
 * bench/assignor_grid.py, which builds the very same cases for regroup's assignors and puts both in one table.
 *
 * A case is a key such as m5000-t500-p10000-EQUAL-HOMOGENEOUS-NONE-UNIFORM-JOIN_ONE: members, topics,
 * partitions over all topics, distribution (EQUAL, SKEWED), subscription (HOMOGENEOUS, HETEROGENEOUS_DISJOINT,
 * HETEROGENEOUS_NESTED), rack (NONE, PROVIDED), assignor (RANGE, UNIFORM) and event (FULL, STABLE, JOIN_ONE,
 * JOIN_MANY, LEAVE_ONE, LEAVE_MANY, PARTITIONS_ADDED). bench/assignor_grid.py's docstring says what each value
 * builds; the rules here are the same, and the driver checks that both sides report the same input fingerprint.
 *
 * For each case: the cluster (topic ids drawn from a generator seeded with 42, so the clusters before and after
 * partitions are added share them) and the group are built; for every event but FULL the group as it was before
 * the event is built and assigned first by the same assignor, and its output is what the members still in the
 * group hold going in, copied into fresh hash maps and sets and inverted, as the coordinator rebuilds a target
 * from its records. Then, untimed, one checked call and at least --warmup calls lasting at least --warmup-ms
 * (never past --budget-s), then --repeat timed calls, each after System.gc() (fewer when a call is slow: at most
 * --budget-s of them, at least one). A timed call is assign, then every member's assignment read once (a map
 * lookup each), as the Python side does. One JSON line per case: the median and best time in
 * seconds, the input fingerprint (partitions, subscribed partitions over all members, partitions held), whether
 * the result gives every subscribed partition once to a subscriber, the least and most partitions per member,
 * and how many held partitions it took from their holder (revoked).
 *
 * The group spec and the topic describer are this program's own implementations of the assignor API (Kafka's
 * GroupSpecImpl and SubscribedTopicDescriberImpl are not in the jar: they come with the coordinator's records and
 * metadata image): every member has its own set of topic ids, as members do in the coordinator; the describer answers
 * partition counts from a hash map and replica racks from the layout (partition p on racks p mod 3 and
 * (p + 1) mod 3). The assignors of this Kafka version do not read racks, so PROVIDED costs them nothing.
 *
 * Compile and run (from the repository; the classpath is Kafka's client, the assignors and their libraries):
 *
 *     J=../shared/java
 *     CP="$J/kafka-clients.jar:$J/kafka-server-assignors.jar:$(ls $J/lib/*.jar | tr '\n' ':')"
 *     javac -nowarn -cp "$CP" -d /tmp/grid bench/java/AssignorGrid.java
 *     echo m5000-t500-p10000-EQUAL-HOMOGENEOUS-NONE-UNIFORM-JOIN_ONE |
 *         java -Xmx6g -cp "/tmp/grid:$CP" AssignorGrid --stdin \
 *             [--warmup 2] [--warmup-ms 500] [--repeat 5] [--budget-s 6]
 *     .venv/bin/python bench/assignor_grid.py --list | java -Xmx6g -cp "/tmp/grid:$CP" AssignorGrid --stdin
 *
 * With --stdin it first prints {"java": "<version>"}, then reads case keys line by line and answers each with
 * one JSON line, so one JVM serves a whole run; without it, the case keys are the arguments.
 */

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.RangeAssignor;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;

public final class AssignorGrid {

    /** The brokers' racks (one broker each), and the members' when they have one. */
    static final int RACK_COUNT = 3;
    /** The most member buckets of the heterogeneous subscriptions. */
    static final int BUCKET_COUNT = 5;
    /** The "many" events change this fraction of the members, rounded up. */
    static final int MANY_MEMBERS_DIVISOR = 10;
    /** The partitions-added event adds a partition to this fraction of the topics, rounded up. */
    static final int ADDED_PARTITIONS_TOPIC_DIVISOR = 10;
    static final long TOPIC_ID_SEED = 42L;

    // ---------------------------------------------------------------------------------------------------------
    // a case

    record Case(int members, int topics, int partitions, String distribution, String subscription, String rack,
                String assignor, String event) {

        static Case parse(String key) {
            String[] p = key.trim().split("-");
            if (p.length != 8 || !p[0].startsWith("m") || !p[1].startsWith("t") || !p[2].startsWith("p")) {
                throw new IllegalArgumentException("not a case key: " + key);
            }
            Case c = new Case(Integer.parseInt(p[0].substring(1)), Integer.parseInt(p[1].substring(1)),
                Integer.parseInt(p[2].substring(1)), p[3], p[4], p[5], p[6], p[7]);
            c.check();
            return c;
        }

        void check() {
            oneOf(distribution, "EQUAL", "SKEWED");
            oneOf(subscription, "HOMOGENEOUS", "HETEROGENEOUS_DISJOINT", "HETEROGENEOUS_NESTED");
            oneOf(rack, "NONE", "PROVIDED");
            oneOf(assignor, "RANGE", "UNIFORM");
            oneOf(event, "FULL", "STABLE", "JOIN_ONE", "JOIN_MANY", "LEAVE_ONE", "LEAVE_MANY", "PARTITIONS_ADDED");
            if (members < 1 || topics < 1 || partitions < 1) {
                throw new IllegalArgumentException("members, topics and partitions must be positive: " + key());
            }
        }

        String key() {
            return "m" + members + "-t" + topics + "-p" + partitions + "-" + distribution + "-" + subscription
                + "-" + rack + "-" + assignor + "-" + event;
        }

        int bucketCount() {
            return Math.min(BUCKET_COUNT, Math.min(members, topics));
        }

        int previousMemberCount() {
            int many = divideRoundingUp(members, MANY_MEMBERS_DIVISOR);
            switch (event) {
                case "JOIN_ONE": return members - 1;
                case "JOIN_MANY": return members - many;
                case "LEAVE_ONE": return members + 1;
                case "LEAVE_MANY": return members + many;
                default: return members;
            }
        }

        /** Indices of the topics that gained a partition before the event. */
        int[] topicsWithAddedPartition() {
            if (!event.equals("PARTITIONS_ADDED")) return new int[0];
            int k = divideRoundingUp(topics, ADDED_PARTITIONS_TOPIC_DIVISOR);
            int[] out = new int[k];
            for (int i = 0; i < k; i++) out[i] = (int) ((long) i * topics / k);
            return out;
        }
    }

    static void oneOf(String value, String... allowed) {
        if (!Arrays.asList(allowed).contains(value)) {
            throw new IllegalArgumentException(value + " is not one of " + String.join(", ", allowed));
        }
    }

    static int divideRoundingUp(int count, int divisor) {
        return (count + divisor - 1) / divisor;
    }

    // ---------------------------------------------------------------------------------------------------------
    // partition counts

    /** SKEWED's tiers: two thirds of the topics, then a third of the tier before (at least one), ... */
    static List<Integer> skewedTiers(int topics) {
        List<Integer> sizes = new ArrayList<>();
        double fraction = 2.0 / 3.0;
        int remaining = topics;
        while (remaining > 0) {
            int size = Math.min(remaining, Math.max(1, (int) Math.round(topics * fraction)));
            sizes.add(size);
            remaining -= size;
            fraction /= 3.0;
        }
        return sizes;
    }

    /** Writes total over count slots from start, within one of each other, the first slots taking the rest. */
    static void split(int[] counts, int start, long total, int count) {
        long quota = total / count, extra = total % count;
        for (int i = 0; i < count; i++) counts[start + i] = (int) (quota + (i < extra ? 1 : 0));
    }

    /** Partitions per topic, largest first, at least one each. */
    static int[] partitionCounts(String distribution, int topics, int partitions) {
        int[] counts = new int[topics];
        if (distribution.equals("SKEWED") && topics > 1) {
            List<Integer> tiers = skewedTiers(topics);
            int singles = tiers.get(0);
            int others = topics - singles;
            long otherPartitions = Math.max(others, (long) partitions - singles);
            Arrays.fill(counts, others, topics, 1);
            long weight = 0;
            for (int tier = 1; tier < tiers.size(); tier++) weight += (long) tiers.get(tier) << (tier - 1);
            if (weight > otherPartitions) {
                split(counts, 0, otherPartitions, others);
                return counts;
            }
            long givenWeight = 0, given = 0;
            int at = 0;
            for (int tier = tiers.size() - 1; tier >= 1; tier--) {
                int size = tiers.get(tier);
                givenWeight += (long) size << (tier - 1);
                long share = otherPartitions * givenWeight / weight - given;
                given += share;
                split(counts, at, share, size);
                at += size;
            }
            return counts;
        }
        Arrays.fill(counts, Math.max(1, partitions / topics));
        long remainder = partitions - Arrays.stream(counts).asLongStream().sum();
        for (long i = 0; i < remainder; i++) counts[(int) (i % topics)]++;
        return counts;
    }

    // ---------------------------------------------------------------------------------------------------------
    // the assignor API, implemented for the grid

    static String rackId(int index) {
        return "rack" + (index % RACK_COUNT);
    }

    /** The topics of the cluster: ids, partition counts, and the replica racks of each partition. */
    static final class Cluster implements SubscribedTopicDescriber {
        final Uuid[] ids;
        final int[] counts;
        final Map<Uuid, Integer> countById = new HashMap<>();
        final Map<Uuid, Integer> indexById = new HashMap<>();
        final List<Set<String>> racksByShape = new ArrayList<>();

        Cluster(int[] counts) {
            this.counts = counts;
            this.ids = new Uuid[counts.length];
            Random random = new Random(TOPIC_ID_SEED);
            for (int t = 0; t < counts.length; t++) {
                Uuid id = new Uuid(random.nextLong(), random.nextLong());
                while (Uuid.RESERVED.contains(id) || id.toString().startsWith("-")) {
                    id = new Uuid(random.nextLong(), random.nextLong());
                }
                ids[t] = id;
                countById.put(id, counts[t]);
                indexById.put(id, t);
            }
            for (int p = 0; p < RACK_COUNT; p++) {
                racksByShape.add(Collections.unmodifiableSet(new HashSet<>(List.of(rackId(p), rackId(p + 1)))));
            }
        }

        @Override
        public int numPartitions(Uuid topicId) {
            Integer n = countById.get(topicId);
            return n == null ? -1 : n;
        }

        @Override
        public Set<String> racksForPartition(Uuid topicId, int partition) {
            return countById.containsKey(topicId) ? racksByShape.get(partition % RACK_COUNT) : Collections.emptySet();
        }

        long total() {
            return Arrays.stream(counts).asLongStream().sum();
        }
    }

    /** A member: its rack, its own set of subscribed topic ids, and the partitions it holds. */
    static final class Member implements MemberSubscription, MemberAssignment {
        final Optional<String> rack;
        final Set<Uuid> topics;
        final Map<Uuid, Set<Integer>> held;

        Member(Optional<String> rack, Set<Uuid> topics, Map<Uuid, Set<Integer>> held) {
            this.rack = rack;
            this.topics = topics;
            this.held = held;
        }

        @Override
        public Optional<String> rackId() {
            return rack;
        }

        @Override
        public Optional<String> instanceId() {
            return Optional.empty();
        }

        @Override
        public Set<Uuid> subscribedTopicIds() {
            return topics;
        }

        @Override
        public Map<Uuid, Set<Integer>> partitions() {
            return held;
        }
    }

    /** The group: members by id, the subscription type, and who holds each partition. */
    static final class Spec implements GroupSpec {
        final Map<String, Member> members;
        final SubscriptionType type;
        final Map<Uuid, Map<Integer, String>> holders;

        Spec(Map<String, Member> members, SubscriptionType type, Map<Uuid, Map<Integer, String>> holders) {
            this.members = members;
            this.type = type;
            this.holders = holders;
        }

        @Override
        public Collection<String> memberIds() {
            return members.keySet();
        }

        @Override
        public SubscriptionType subscriptionType() {
            return type;
        }

        @Override
        public boolean isPartitionAssigned(Uuid topicId, int partitionId) {
            Map<Integer, String> byPartition = holders.get(topicId);
            return byPartition != null && byPartition.containsKey(partitionId);
        }

        @Override
        public MemberSubscription memberSubscription(String memberId) {
            Member member = members.get(memberId);
            if (member == null) throw new IllegalArgumentException("Member Id " + memberId + " not found.");
            return member;
        }

        @Override
        public MemberAssignment memberAssignment(String memberId) {
            Member member = members.get(memberId);
            return member != null ? member : Collections::emptyMap;
        }

        long held() {
            long n = 0;
            for (Member m : members.values()) for (Set<Integer> ps : m.held.values()) n += ps.size();
            return n;
        }
    }

    /** The topic indices bucket b subscribes to. */
    static List<Integer> bucketTopics(String subscription, int bucket, int buckets, int topics) {
        int from = 0, to = topics;
        if (subscription.equals("HETEROGENEOUS_DISJOINT")) {
            from = (int) ((long) topics * bucket / buckets);
            to = (int) ((long) topics * (bucket + 1) / buckets);
        } else if (subscription.equals("HETEROGENEOUS_NESTED")) {
            to = (int) ((long) topics * (bucket + 1) / buckets);
        }
        List<Integer> out = new ArrayList<>(to - from);
        for (int t = from; t < to; t++) out.add(t);
        return out;
    }

    /** The group with memberCount members (buckets as the case says), each holding what held gives it. */
    static Spec build(Case c, Cluster cluster, int memberCount, GroupAssignment held) {
        int buckets = c.bucketCount();
        List<List<Uuid>> subscriptions = new ArrayList<>();
        for (int b = 0; b < buckets; b++) {
            List<Uuid> ids = new ArrayList<>();
            for (int t : bucketTopics(c.subscription(), b, buckets, c.topics())) ids.add(cluster.ids[t]);
            subscriptions.add(ids);
        }
        Map<String, Member> members = new HashMap<>();
        Map<Uuid, Map<Integer, String>> holders = new HashMap<>();
        for (int i = 0; i < memberCount; i++) {
            String memberId = "member" + i;
            Map<Uuid, Set<Integer>> partitions = Collections.emptyMap();
            MemberAssignment previous = held == null ? null : held.members().get(memberId);
            if (previous != null) {
                // fresh maps and sets, as the coordinator rebuilds a target from its records
                Map<Uuid, Set<Integer>> copy = new HashMap<>();
                previous.partitions().forEach((topicId, ps) -> {
                    if (ps.isEmpty()) return;
                    copy.put(topicId, new HashSet<>(ps));
                    Map<Integer, String> byPartition = holders.computeIfAbsent(topicId, k -> new HashMap<>());
                    for (int p : ps) byPartition.put(p, memberId);
                });
                partitions = Collections.unmodifiableMap(copy); // the assignors insist on an immutable map
            }
            members.put(memberId, new Member(
                c.rack().equals("PROVIDED") ? Optional.of(rackId(i)) : Optional.empty(),
                new HashSet<>(subscriptions.get(i % buckets)),
                partitions
            ));
        }
        SubscriptionType type = c.subscription().equals("HOMOGENEOUS")
            ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
        return new Spec(members, type, holders);
    }

    static ConsumerGroupPartitionAssignor assignor(String name) {
        return name.equals("UNIFORM") ? new UniformAssignor() : new RangeAssignor();
    }

    // ---------------------------------------------------------------------------------------------------------
    // checking a result

    /** valid (every subscribed partition once, to a subscriber), min, max, revoked. */
    static long[] check(Spec spec, Cluster cluster, GroupAssignment result) {
        boolean[][] given = new boolean[cluster.counts.length][];
        for (int t = 0; t < given.length; t++) given[t] = new boolean[cluster.counts[t]];
        long bad = 0, assigned = 0, min = Long.MAX_VALUE, max = 0, revoked = 0;
        for (Map.Entry<String, Member> e : spec.members.entrySet()) {
            MemberAssignment got = result.members().get(e.getKey());
            Map<Uuid, Set<Integer>> partitions = got == null ? Collections.emptyMap() : got.partitions();
            long load = 0;
            for (Map.Entry<Uuid, Set<Integer>> te : partitions.entrySet()) {
                Integer t = cluster.indexById.get(te.getKey());
                boolean subscribed = e.getValue().topics.contains(te.getKey());
                for (int p : te.getValue()) {
                    load++;
                    if (t == null || !subscribed || p < 0 || p >= given[t].length || given[t][p]) {
                        bad++;
                    } else {
                        given[t][p] = true;
                        assigned++;
                    }
                }
            }
            min = Math.min(min, load);
            max = Math.max(max, load);
            for (Map.Entry<Uuid, Set<Integer>> he : e.getValue().held.entrySet()) {
                Set<Integer> now = partitions.get(he.getKey());
                for (int p : he.getValue()) if (now == null || !now.contains(p)) revoked++;
            }
        }
        if (result.members().size() != spec.members.size()) bad++;
        Set<Uuid> subscribed = new HashSet<>();
        for (Member m : spec.members.values()) subscribed.addAll(m.topics);
        long expected = 0;
        for (Uuid id : subscribed) expected += cluster.countById.get(id);
        return new long[] {bad == 0 && assigned == expected ? 1 : 0, spec.members.isEmpty() ? 0 : min, max, revoked};
    }

    static long subscribedPartitions(Spec spec, Cluster cluster) {
        long n = 0;
        for (Member m : spec.members.values()) for (Uuid id : m.topics) n += cluster.countById.get(id);
        return n;
    }

    // ---------------------------------------------------------------------------------------------------------
    // timing

    int warmup = 2;
    long warmupMs = 500;
    int repeat = 5;
    double budgetS = 6.0;
    /** Keeps the results alive, so no call can be optimised away. */
    int sink;

    /** The timed call: assign, then every member's assignment read once, as the coordinator reads them next. */
    static int assignAndRead(ConsumerGroupPartitionAssignor a, Spec spec, Cluster cluster) {
        GroupAssignment result = a.assign(spec, cluster);
        int n = 0;
        for (String memberId : spec.members.keySet()) {
            MemberAssignment assignment = result.members().get(memberId);
            if (assignment != null) n += assignment.partitions().size();
        }
        return n;
    }

    String run(Case c) {
        ConsumerGroupPartitionAssignor a = assignor(c.assignor());
        long start = System.nanoTime();
        GroupAssignment held = null;
        if (!c.event().equals("FULL")) {
            Cluster before = new Cluster(partitionCounts(c.distribution(), c.topics(), c.partitions()));
            held = a.assign(build(c, before, c.previousMemberCount(), null), before);
        }
        int[] counts = partitionCounts(c.distribution(), c.topics(), c.partitions());
        for (int t : c.topicsWithAddedPartition()) counts[t]++;
        Cluster cluster = new Cluster(counts);
        Spec spec = build(c, cluster, c.members(), held);
        held = null;
        double setupS = (System.nanoTime() - start) / 1e9;

        start = System.nanoTime();
        GroupAssignment first = a.assign(spec, cluster);
        double firstS = (System.nanoTime() - start) / 1e9;
        long[] checked = check(spec, cluster, first);
        sink += first.members().size();
        first = null;

        long warmStart = System.nanoTime();
        int calls = 1;
        while (true) {
            double spent = (System.nanoTime() - warmStart) / 1e9;
            boolean wantMore = calls < warmup || spent * 1000 < warmupMs;
            if (!wantMore || spent + firstS > budgetS) break;
            sink += assignAndRead(a, spec, cluster);
            calls++;
        }

        int n = (int) Math.max(1, Math.min(repeat, Math.floor(budgetS / Math.max(firstS, 1e-9))));
        double[] times = new double[n];
        for (int i = 0; i < n; i++) {
            System.gc();
            long t0 = System.nanoTime();
            sink += assignAndRead(a, spec, cluster);
            times[i] = (System.nanoTime() - t0) / 1e9;
        }
        Arrays.sort(times);
        double median = n % 2 == 1 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;

        return String.format(Locale.ROOT,
            "{\"case\": \"%s\", \"side\": \"java\", \"setup_s\": %.6f, \"first_s\": %.6f, \"warmup_calls\": %d, "
                + "\"median_s\": %.9f, \"best_s\": %.9f, \"n\": %d, \"partitions\": %d, \"subscribed\": %d, "
                + "\"held\": %d, \"valid\": %s, \"min\": %d, \"max\": %d, \"revoked\": %d}",
            c.key(), setupS, firstS, calls, median, times[0], n, cluster.total(), subscribedPartitions(spec, cluster),
            spec.held(), checked[0] == 1, checked[1], checked[2], checked[3]);
    }

    public static void main(String[] args) throws Exception {
        AssignorGrid grid = new AssignorGrid();
        boolean stdin = false;
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--stdin": stdin = true; break;
                case "--warmup": grid.warmup = Integer.parseInt(args[++i]); break;
                case "--warmup-ms": grid.warmupMs = Long.parseLong(args[++i]); break;
                case "--repeat": grid.repeat = Integer.parseInt(args[++i]); break;
                case "--budget-s": grid.budgetS = Double.parseDouble(args[++i]); break;
                default:
                    if (args[i].startsWith("--")) throw new IllegalArgumentException("unknown option " + args[i]);
                    keys.add(args[i]);
            }
        }
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        for (String key : keys) out.println(grid.run(Case.parse(key)));
        if (stdin) {
            out.println("{\"java\": \"" + System.getProperty("java.version") + "\"}");
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                if (line.isBlank()) continue;
                out.println(grid.run(Case.parse(line)));
            }
        }
        if (grid.sink == 42) out.println();
    }
}
