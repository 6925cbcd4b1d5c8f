// Kafka's own Java clients (KafkaProducer, KafkaConsumer, Admin) against a secured `regroup serve`: SASL PLAIN,
// SCRAM-SHA-512 and OAUTHBEARER (unsecured tokens) over TLS or plaintext, KIP-368 re-authentication, SCRAM users
// managed with the Admin client (KIP-554) and ACLs (CreateAcls, DescribeAcls, DeleteAcls) with what they let a
// second principal do. Each check prints one line "name: result" (or "name: ERROR <exception class>: <message>"),
// which tests/clients/test_java_security.py reads; a refusal prints "refused <exception class>".
//
// Usage: SecurityChecks <scenario> key=value... with the scenario one of plain, scram, oauth, acls and the keys
// bootstrap, protocol (SASL_SSL or SASL_PLAINTEXT), mechanism, truststore (a PEM file of the trusted CA, for
// SASL_SSL) and the scenario's own (users' passwords, topic, group, reauth.ms).
//
// OAUTHBEARER is covered with Kafka's unsecured tokens only: the client's JWT login (signed tokens from an
// OAuth server) needs jose4j, which the Java client used here is built without.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class SecurityChecks {
    interface Check {
        String run() throws Exception;
    }

    static final Map<String, String> OPTS = new HashMap<>();

    static void check(String name, Check check) {
        System.err.println(java.time.Instant.now() + " check " + name);  // to line the clients' logs up with it
        String result;
        try {
            result = check.run();
        } catch (ExecutionException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            result = "ERROR " + cause.getClass().getSimpleName() + ": " + cause.getMessage();
        } catch (Exception e) {
            result = "ERROR " + e.getClass().getSimpleName() + ": " + e.getMessage();
        }
        System.out.println(name + ": " + String.valueOf(result).replace('\n', ' '));
        System.out.flush();
    }

    /** "refused X" for the first authentication or authorization failure among t and its causes, else t as an error. */
    static String refusal(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof AuthenticationException || c instanceof AuthorizationException)
                return "refused " + c.getClass().getSimpleName();
        }
        return "ERROR " + t.getClass().getSimpleName() + ": " + t.getMessage();
    }

    static String opt(String key) {
        String value = OPTS.get(key);
        if (value == null)
            throw new IllegalArgumentException("missing option " + key);
        return value;
    }

    // ------------------------------------------------------------------------------------ client settings

    static String quoted(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    /** The JAAS configuration logging in as user with secret (OAUTHBEARER: the unsecured token's extra options). */
    static String jaas(String user, String secret) {
        String mechanism = opt("mechanism");
        switch (mechanism) {
            case "PLAIN":
                return "org.apache.kafka.common.security.plain.PlainLoginModule required username=" + quoted(user)
                    + " password=" + quoted(secret) + ";";
            case "SCRAM-SHA-256":
            case "SCRAM-SHA-512":
                return "org.apache.kafka.common.security.scram.ScramLoginModule required username=" + quoted(user)
                    + " password=" + quoted(secret) + ";";
            case "OAUTHBEARER":
                // the client's default login callback handler makes an unsecured JWT from these options
                return "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
                    + " unsecuredLoginStringClaim_sub=" + quoted(user) + " " + secret + ";";
            default:
                throw new IllegalArgumentException("mechanism " + mechanism);
        }
    }

    static Properties client(String user, String secret) {
        Properties props = new Properties();
        props.put("bootstrap.servers", opt("bootstrap"));
        props.put("security.protocol", opt("protocol"));
        props.put("sasl.mechanism", opt("mechanism"));
        props.put("sasl.jaas.config", jaas(user, secret));
        if (OPTS.containsKey("truststore")) {
            props.put("ssl.truststore.type", "PEM");
            props.put("ssl.truststore.location", OPTS.get("truststore"));
        }
        props.put("request.timeout.ms", "10000");
        props.put("default.api.timeout.ms", "20000");
        props.put("reconnect.backoff.max.ms", "500");
        return props;
    }

    static KafkaProducer<String, String> producer(Properties base) {
        Properties props = new Properties();
        props.putAll(base);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("max.block.ms", "15000");
        props.put("delivery.timeout.ms", "20000");
        props.put("linger.ms", "0");
        return new KafkaProducer<>(props);
    }

    static KafkaConsumer<String, String> consumer(Properties base, String group) {
        Properties props = new Properties();
        props.putAll(base);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("group.id", group);
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("metadata.max.age.ms", "1000");  // refused topics are asked about again soon
        props.put("fetch.max.wait.ms", "200");
        return new KafkaConsumer<>(props);
    }

    // ------------------------------------------------------------------------------------ building blocks

    static void createTopic(Properties props, String topic) throws Exception {
        try (Admin admin = Admin.create(props)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(20, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException))
                throw e;
        }
    }

    static void produce(Properties props, String topic, List<String> values) throws Exception {
        try (KafkaProducer<String, String> producer = producer(props)) {
            for (String value : values)
                producer.send(new ProducerRecord<>(topic, value, value)).get(20, TimeUnit.SECONDS);
        }
    }

    /** Polls until n more values arrive (or the time is up); the exceptions a poll throws are not retried. */
    static List<String> pollValues(KafkaConsumer<String, String> consumer, int n, long timeoutMs) {
        List<String> values = new ArrayList<>();
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (values.size() < n && System.currentTimeMillis() < deadline)
            for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200)))
                values.add(record.value());
        return values;
    }

    /** A topic created, n records produced and read back by a consumer in a group that commits them. */
    static String roundTrip(Properties props, String topic, String group, int n) throws Exception {
        createTopic(props, topic);
        List<String> sent = new ArrayList<>();
        for (int i = 0; i < n; i++)
            sent.add(topic + "-" + i);
        produce(props, topic, sent);
        try (KafkaConsumer<String, String> consumer = consumer(props, group)) {
            consumer.subscribe(List.of(topic));
            List<String> got = pollValues(consumer, n, 30000);
            consumer.commitSync(Duration.ofSeconds(15));
            return "produced " + sent.size() + " consumed " + got.size() + (got.equals(sent) ? " in order" : " " + got);
        }
    }

    /** Whether an Admin call of user gets through. */
    static String adminConnects(String user, String secret) {
        try (Admin admin = Admin.create(client(user, secret))) {
            return "ok " + admin.describeCluster().nodes().get(20, TimeUnit.SECONDS).size() + " node";
        } catch (Exception e) {
            return refusal(e);
        }
    }

    static String producerConnects(String user, String secret, String topic) {
        try (KafkaProducer<String, String> producer = producer(client(user, secret))) {
            producer.send(new ProducerRecord<>(topic, "x", "from " + user)).get(20, TimeUnit.SECONDS);
            return "ok";
        } catch (Exception e) {
            return refusal(e);
        }
    }

    static String consumerConnects(String user, String secret, String topic, String group) {
        try (KafkaConsumer<String, String> consumer = consumer(client(user, secret), group)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 15000;
            while (System.currentTimeMillis() < deadline)
                if (!consumer.poll(Duration.ofMillis(200)).isEmpty())
                    return "ok";
            return "no records";
        } catch (Exception e) {
            return refusal(e);
        }
    }

    static double metricTotal(Map<MetricName, ? extends Metric> metrics, String name) {
        double total = 0;
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            MetricName m = e.getKey();
            if (m.name().equals(name) && (m.group().equals("producer-metrics") || m.group().equals("consumer-metrics")))
                total += ((Number) e.getValue().metricValue()).doubleValue();
        }
        return total;
    }

    /**
     * A producer and a group consumer kept busy for millis, across the sessions' lifetimes: every send and every
     * record must get through, and the clients' own metrics count their re-authentications (KIP-368).
     */
    static String keepsWorking(Properties props, String topic, String group, long millis) throws Exception {
        createTopic(props, topic);
        try (KafkaProducer<String, String> producer = producer(props);
             KafkaConsumer<String, String> consumer = consumer(props, group)) {
            consumer.subscribe(List.of(topic));
            List<String> got = new ArrayList<>();
            int sent = 0;
            long deadline = System.currentTimeMillis() + millis;
            while (System.currentTimeMillis() < deadline) {
                producer.send(new ProducerRecord<>(topic, "k", "r" + sent)).get(20, TimeUnit.SECONDS);
                sent++;
                Thread.sleep(100);
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(250)))
                    got.add(record.value());
            }
            got.addAll(pollValues(consumer, sent - got.size(), 15000));
            consumer.commitSync(Duration.ofSeconds(15));
            return String.format("sent %d received %d producer-reauth %d consumer-reauth %d failed %d",
                sent, got.size(),
                (long) metricTotal(producer.metrics(), "successful-reauthentication-total"),
                (long) metricTotal(consumer.metrics(), "successful-reauthentication-total"),
                (long) (metricTotal(producer.metrics(), "failed-reauthentication-total")
                    + metricTotal(consumer.metrics(), "failed-reauthentication-total")));
        }
    }

    // ------------------------------------------------------------------------------------ scenarios

    static void plain() {
        String topic = opt("topic"), group = opt("group");
        check("round-trip", () -> roundTrip(client("alice", opt("alice")), topic, group, 5));
        check("wrong-password-producer", () -> producerConnects("alice", "not-" + opt("alice"), topic));
        check("wrong-password-consumer", () -> consumerConnects("alice", "not-" + opt("alice"), topic, group + "-x"));
        check("wrong-password-admin", () -> adminConnects("alice", "not-" + opt("alice")));
        check("unknown-user", () -> adminConnects("mallory", opt("alice")));
        check("reauthentication", () ->
            keepsWorking(client("admin", opt("admin")), topic + "-reauth", group + "-reauth",
                Long.parseLong(opt("run.ms"))));
    }

    static String scramUsers(Admin admin) throws Exception {
        Map<String, UserScramCredentialsDescription> users =
            admin.describeUserScramCredentials().all().get(20, TimeUnit.SECONDS);
        return new TreeSet<>(users.keySet()).stream()
            .map(u -> u + "=" + users.get(u).credentialInfos().stream()
                .map(c -> c.mechanism() + ":" + c.iterations()).sorted().collect(Collectors.joining(",")))
            .collect(Collectors.joining(" "));
    }

    static void scram() throws Exception {
        String topic = opt("topic"), group = opt("group"), carol = opt("carol"), dave = opt("dave");
        ScramMechanism mechanism = ScramMechanism.fromMechanismName(opt("mechanism"));
        check("round-trip", () -> roundTrip(client("carol", carol), topic, group, 5));
        check("wrong-password", () -> adminConnects("carol", "not-" + carol));
        check("dave-before", () -> adminConnects("dave", dave));
        try (Admin admin = Admin.create(client("carol", carol))) {
            check("upsert-dave", () -> {
                admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                    "dave", new ScramCredentialInfo(mechanism, 8192), dave))).all().get(20, TimeUnit.SECONDS);
                return "ok";
            });
            check("described", () -> scramUsers(admin));
            check("describe-dave", () -> {
                UserScramCredentialsDescription d =
                    admin.describeUserScramCredentials(List.of("dave")).description("dave").get(20, TimeUnit.SECONDS);
                return d.name() + " " + d.credentialInfos().size();
            });
            check("dave-connects", () -> adminConnects("dave", dave));
            check("dave-produces", () -> producerConnects("dave", dave, topic));
            check("dave-wrong-password", () -> adminConnects("dave", "not-" + dave));
            check("delete-dave", () -> {
                admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion("dave", mechanism)))
                    .all().get(20, TimeUnit.SECONDS);
                return "ok";
            });
            check("described-after-delete", () -> scramUsers(admin));
            check("describe-dave-after-delete", () -> {
                try {
                    admin.describeUserScramCredentials(List.of("dave")).description("dave").get(20, TimeUnit.SECONDS);
                    return "found";
                } catch (ExecutionException e) {
                    return e.getCause().getClass().getSimpleName();
                }
            });
        }
        check("dave-after-delete", () -> adminConnects("dave", dave));
        check("carol-still", () -> adminConnects("carol", carol));
    }

    static void oauth() {
        String topic = opt("topic"), group = opt("group"), scope = opt("scope");
        String scoped = "unsecuredLoginListClaim_scope=" + quoted("," + scope);
        check("round-trip", () -> roundTrip(client("alice", scoped), topic, group, 5));
        check("without-scope", () -> adminConnects("bob", ""));
        check("other-scope", () -> adminConnects("bob", "unsecuredLoginListClaim_scope=" + quoted(",other")));
        check("expired", () -> adminConnects("carol", scoped + " unsecuredLoginLifetimeSeconds=" + quoted("-60")));
        check("reauthentication", () ->
            keepsWorking(client("alice", scoped), topic + "-reauth", group + "-reauth", Long.parseLong(opt("run.ms"))));
    }

    // ------------------------------------------------------------------------------------ ACLs

    static String describe(AccessControlEntry e) {
        return e.principal() + ":" + e.host() + ":" + e.operation() + ":" + e.permissionType();
    }

    static String describe(AclBinding b) {
        ResourcePattern p = b.pattern();
        return p.resourceType() + ":" + p.patternType() + ":" + p.name() + ":" + describe(b.entry());
    }

    static String bindings(Collection<AclBinding> bindings) {
        return bindings.stream().map(SecurityChecks::describe).sorted().collect(Collectors.joining(" "));
    }

    static AclBinding binding(ResourceType type, PatternType pattern, String name, String principal, String host,
                              AclOperation operation, AclPermissionType permission) {
        return new AclBinding(new ResourcePattern(type, name, pattern),
            new AccessControlEntry(principal, host, operation, permission));
    }

    static String create(Admin admin, AclBinding... bindings) throws Exception {
        admin.createAcls(List.of(bindings)).all().get(20, TimeUnit.SECONDS);
        return "ok";
    }

    static String described(Admin admin, AclBindingFilter filter) throws Exception {
        return bindings(admin.describeAcls(filter).values().get(20, TimeUnit.SECONDS));
    }

    /**
     * The same consumer polls for up to timeoutMs, until it has wanted records (ACLs apply from the connection's
     * next request, so it goes on past refusals) or, with wanted 0, until it is refused with stopOn (null: any
     * refusal). The distinct refusals are listed in order (a refusal answered to an earlier poll's request may
     * come first).
     */
    static String attempt(KafkaConsumer<String, String> consumer, int wanted, long timeoutMs, String stopOn) {
        Set<String> refusals = new LinkedHashSet<>();
        int got = 0;
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline && (wanted == 0 || got < wanted)) {
            try {
                got += consumer.poll(Duration.ofMillis(200)).count();
            } catch (AuthorizationException e) {
                String name = e.getClass().getSimpleName();
                refusals.add(name);
                if (wanted == 0 && (stopOn == null || stopOn.equals(name)))
                    break;
            }
        }
        String refused = refusals.isEmpty() ? "" : "refused " + String.join(",", refusals);
        return wanted == 0 ? (refused.isEmpty() ? "no refusal, " + got + " records" : refused)
            : "records " + got + (refused.isEmpty() ? "" : " after " + refused);
    }

    static void acls() throws Exception {
        String topic = opt("topic"), group = opt("group");
        Properties admins = client("admin", opt("admin")), alices = client("alice", opt("alice"));
        String alice = "User:alice", bob = "User:bob";
        AclBinding bobWrites = binding(ResourceType.TOPIC, PatternType.LITERAL, topic, bob, "*",
            AclOperation.WRITE, AclPermissionType.ALLOW);
        AclBinding bobDescribes = binding(ResourceType.TOPIC, PatternType.LITERAL, "*", bob, "*",
            AclOperation.DESCRIBE, AclPermissionType.ALLOW);
        AclBinding bobDenied = binding(ResourceType.TOPIC, PatternType.PREFIXED, "acl-", bob, "10.0.0.1",
            AclOperation.READ, AclPermissionType.DENY);
        AclBinding aliceGroup = binding(ResourceType.GROUP, PatternType.LITERAL, group, alice, "*",
            AclOperation.READ, AclPermissionType.ALLOW);
        AclBinding aliceReads = binding(ResourceType.TOPIC, PatternType.PREFIXED, "acl-", alice, "*",
            AclOperation.READ, AclPermissionType.ALLOW);
        AclBinding aliceDenied = binding(ResourceType.TOPIC, PatternType.LITERAL, topic, alice, "*",
            AclOperation.READ, AclPermissionType.DENY);

        check("admin-round-trip", () -> roundTrip(admins, topic, group + "-admin", 3));
        try (Admin admin = Admin.create(admins);
             Admin aliceAdmin = Admin.create(alices);
             KafkaConsumer<String, String> consumer = consumer(alices, group)) {
            check("alice-describe-acls", () -> {
                try {
                    return "allowed " + described(aliceAdmin, AclBindingFilter.ANY);
                } catch (Exception e) {
                    return refusal(e);
                }
            });
            check("alice-create-acls", () -> {
                try {
                    return create(aliceAdmin, aliceReads);
                } catch (Exception e) {
                    return refusal(e);
                }
            });
            check("alice-produce", () -> producerConnects("alice", opt("alice"), topic));
            consumer.subscribe(List.of(topic));
            check("alice-no-acl", () -> attempt(consumer, 0, 8000, null));
            check("create-bob-acls", () -> create(admin, bobWrites, bobDescribes, bobDenied));
            check("create-group-acl", () -> create(admin, aliceGroup));
            check("alice-group-only", () -> attempt(consumer, 0, 8000, "TopicAuthorizationException"));
            check("create-topic-acl", () -> create(admin, aliceReads));
            check("alice-allowed", () -> attempt(consumer, 3, 20000, null));
            check("create-deny", () -> create(admin, aliceDenied));
            check("alice-denied", () -> {
                produce(admins, topic, List.of("after-deny"));
                return attempt(consumer, 0, 8000, null);
            });
            check("describe-any", () -> described(admin, AclBindingFilter.ANY));
            check("describe-match", () -> described(admin, new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.MATCH), AccessControlEntryFilter.ANY)));
            check("describe-literal", () -> described(admin, new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.LITERAL), AccessControlEntryFilter.ANY)));
            check("describe-prefixed", () -> described(admin, new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.ANY, null, PatternType.PREFIXED), AccessControlEntryFilter.ANY)));
            check("describe-alice", () -> described(admin, new AclBindingFilter(ResourcePatternFilter.ANY,
                new AccessControlEntryFilter(alice, null, AclOperation.ANY, AclPermissionType.ANY))));
            check("describe-deny", () -> described(admin, new AclBindingFilter(ResourcePatternFilter.ANY,
                new AccessControlEntryFilter(null, null, AclOperation.ANY, AclPermissionType.DENY))));
            check("describe-match-other", () -> described(admin, new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, "other", PatternType.MATCH), AccessControlEntryFilter.ANY)));
            check("delete-deny", () -> bindings(admin.deleteAcls(List.of(new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.LITERAL),
                new AccessControlEntryFilter(alice, null, AclOperation.ANY, AclPermissionType.DENY))))
                .all().get(20, TimeUnit.SECONDS)));
            check("alice-allowed-again", () -> {
                produce(admins, topic, List.of("after-delete-deny"));
                return attempt(consumer, 1, 20000, null);
            });
            check("delete-prefixed", () -> bindings(admin.deleteAcls(List.of(new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.ANY, null, PatternType.PREFIXED), AccessControlEntryFilter.ANY)))
                .all().get(20, TimeUnit.SECONDS)));
            check("describe-any-after-delete", () -> described(admin, AclBindingFilter.ANY));
            check("alice-refused-after-delete", () -> {
                produce(admins, topic, List.of("after-delete"));
                return attempt(consumer, 0, 8000, null);
            });
        }
    }

    public static void main(String[] args) throws Exception {
        for (int i = 1; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            OPTS.put(kv[0], kv[1]);
        }
        switch (args[0]) {
            case "plain": plain(); break;
            case "scram": scram(); break;
            case "oauth": oauth(); break;
            case "acls": acls(); break;
            default: throw new IllegalArgumentException("scenario " + args[0]);
        }
    }
}
