import jakarta.jms.Connection;
import jakarta.jms.Destination;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.QueueBrowser;
import jakarta.jms.Session;
import jakarta.jms.TemporaryQueue;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.qpid.jms.JmsConnectionFactory;
import org.apache.qpid.jms.policy.JmsDefaultMessageIDPolicy;

/**
 * Qpid JMS scenarios for the tests in tests/jms, one JVM for many scenarios.
 *
 * <p>Usage: {@code java JmsScenarios URL RUN SCENARIO...}; selectors for the selector scenarios
 * come on stdin as {@code label<TAB>selector} lines. Every result is one line
 * {@code scenario<TAB>label<TAB>value} on stdout, where value is the sorted bodies received
 * ({@code -} for none) or {@code !ExceptionClass: message}; pytest parses and asserts them.
 * Message ids are {@code ID:RUN-N}, N counting every message this process sends, so that a
 * selector can name an id before the message is sent ({@code ${ID:m3}}); {@code ${START}} is a
 * time before any message was sent.
 */
public final class JmsScenarios {
    private static final long QUIET_MS = 1000;
    /** receiveNoWait looks at what has arrived only (by default it drains the link each time). */
    private static final String LOCAL_ONLY = "?jms.receiveNoWaitLocalOnly=true";
    private static final AtomicLong IDS = new AtomicLong();
    private static String url;
    private static String run;
    private static final long START = System.currentTimeMillis() - 1;

    public static void main(String[] args) throws Exception {
        url = args[0];
        run = args[1];
        Map<String, String> selectors = new LinkedHashMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] parts = line.split("\t", 2);
            if (parts.length == 2) {
                selectors.put(parts[0], parts[1]);
            }
        }
        for (int i = 2; i < args.length; i++) {
            String scenario = args[i];
            try {
                switch (scenario) {
                    case "queue-selectors" -> queueSelectors(selectors);
                    case "topic-selectors" -> topicSelectors(selectors);
                    case "invalid-selector" -> invalidSelector();
                    case "no-local" -> noLocal();
                    case "durable-subscriber" -> durable(false);
                    case "durable-consumer" -> durable(true);
                    case "shared-durable" -> sharedDurable();
                    case "browser" -> browser();
                    case "receive-no-wait" -> receiveNoWait();
                    case "temporary-queue" -> temporaryQueue();
                    case "ttl" -> timeToLive();
                    case "dead-letter-read" -> deadLetterRead();
                    case "delivery-delay" -> deliveryDelay();
                    case "stream-delay" -> streamDelay();
                    case "priority" -> priority();
                    default -> throw new IllegalArgumentException("no scenario " + scenario);
                }
            } catch (Exception e) {
                result(scenario, "FAILED", failure(e));
            }
            System.out.println(scenario + "\tDONE\t-");
            System.out.flush();
        }
    }

    // -- the scenarios -------------------------------------------------------------------------

    /** One queue per selector, the six messages sent to each, then one consumer per queue. */
    static void queueSelectors(Map<String, String> selectors) throws Exception {
        try (Connection conn = connect(null)) {
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            List<MessageConsumer> consumers = new ArrayList<>();
            for (Map.Entry<String, String> entry : selectors.entrySet()) {
                Queue queue = session.createQueue(run + ".q." + entry.getKey());
                long base = sendSix(session, queue, "");
                consumers.add(consumer(session, queue, expand(entry.getValue(), base), false));
            }
            report("queue-selectors", new ArrayList<>(selectors.keySet()), consumers);
        }
    }

    /** Every selector subscribes to one topic before the six messages are published once. */
    static void topicSelectors(Map<String, String> selectors) throws Exception {
        try (Connection conn = connect(null)) {
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic(run + ".t");
            long base = IDS.get();
            List<MessageConsumer> consumers = new ArrayList<>();
            for (String selector : selectors.values()) {
                consumers.add(consumer(session, topic, expand(selector, base), false));
            }
            sendSix(session, topic, "");
            report("topic-selectors", new ArrayList<>(selectors.keySet()), consumers);
        }
    }

    /** Selector checks left to the broker (Qpid JMS parses selectors itself by default). */
    static void invalidSelector() throws Exception {
        try (Connection conn = connect(null, LOCAL_ONLY + "&jms.validateSelector=false")) {
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            String bad = "colour = = 'red'";
            result("invalid-selector", "queue",
                    attempt(() -> session.createConsumer(session.createQueue(run + ".bad"), bad).close()));
            result("invalid-selector", "topic",
                    attempt(() -> session.createConsumer(session.createTopic(run + ".bad"), bad).close()));
            try (Connection checking = connect(null)) {
                Session own = checking.createSession(false, Session.AUTO_ACKNOWLEDGE);
                result("invalid-selector", "client-side",
                        attempt(() -> own.createConsumer(own.createQueue(run + ".bad"), bad).close()));
            }
            // the session goes on: a good consumer still works
            Queue queue = session.createQueue(run + ".after-bad");
            sendSix(session, queue, "");
            report("invalid-selector", List.of("after"),
                    List.of(session.createConsumer(queue, "colour = 'red'")));
        }
    }

    /** A no-local subscriber is not sent what its own connection publishes. */
    static void noLocal() throws Exception {
        try (Connection mine = connect(null); Connection other = connect(null)) {
            Session session = mine.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Session otherSession = other.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic(run + ".nolocal");
            MessageConsumer noLocal = session.createConsumer(topic, null, true);
            MessageConsumer noLocalRed = session.createConsumer(topic, "colour = 'red'", true);
            MessageConsumer everything = session.createConsumer(topic);
            sendSix(session, topic, "mine-");
            sendSix(otherSession, topic, "other-");
            report("no-local", List.of("no-local", "no-local-red", "all"),
                    List.of(noLocal, noLocalRed, everything));
        }
    }

    /**
     * A durable subscription with a selector: online, then what was published while its
     * connection was closed, then unsubscribe, after which a new subscription starts empty.
     */
    static void durable(boolean jms2) throws Exception {
        String scenario = jms2 ? "durable-consumer" : "durable-subscriber";
        String client = run + "-" + scenario;
        String name = "sub";
        String selector = "colour = 'red'";
        Topic topic;
        try (Connection conn = connect(client)) {
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            topic = session.createTopic(run + "." + scenario);
            MessageConsumer sub = subscribe(session, topic, name, selector, jms2);
            sendSix(session, topic, "online-");
            report(scenario, List.of("online"), List.of(sub));
        }
        try (Connection conn = connect(null)) {
            sendSix(conn.createSession(false, Session.AUTO_ACKNOWLEDGE), topic, "away-");
        }
        try (Connection conn = connect(client)) {
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer sub = subscribe(session, topic, name, selector, jms2);
            report(scenario, List.of("resumed"), List.of(sub));
            sub.close();
            result(scenario, "unsubscribe", attempt(() -> session.unsubscribe(name)));
            sendSix(session, topic, "gone-");
            MessageConsumer fresh = subscribe(session, topic, name, selector, jms2);
            report(scenario, List.of("after-unsubscribe"), List.of(fresh));
            fresh.close();
            session.unsubscribe(name);
        }
    }

    /**
     * Two connections share one durable subscription (no client-id: a global one), each message
     * going to one of them; it keeps what was published while nobody was attached. Then a
     * shared non-durable subscription with two consumers on one connection.
     */
    static void sharedDurable() throws Exception {
        String name = run + "-shared";
        String red = "colour = 'red'";
        Topic topic;
        try (Connection a = connect(null); Connection b = connect(null)) {
            Session sa = a.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Session sb = b.createSession(false, Session.AUTO_ACKNOWLEDGE);
            topic = sa.createTopic(run + ".shared");
            MessageConsumer ca = sa.createSharedDurableConsumer(topic, name, red);
            MessageConsumer cb = sb.createSharedDurableConsumer(topic, name, red);
            try (Connection c = connect(null)) {  // another connection: the broker checks
                Session sc = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                result("shared-durable", "other-selector", attempt(
                        () -> sc.createSharedDurableConsumer(topic, name, "colour = 'blue'")));
            }
            sendSix(sa, topic, "online-");
            List<List<String>> got = drain(List.of(ca, cb));
            List<String> both = new ArrayList<>(got.get(0));
            both.addAll(got.get(1));
            result("shared-durable", "online", join(both));
        }
        try (Connection conn = connect(null)) {
            sendSix(conn.createSession(false, Session.AUTO_ACKNOWLEDGE), topic, "away-");
        }
        try (Connection conn = connect(null)) {
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer sub = session.createSharedDurableConsumer(topic, name, red);
            report("shared-durable", List.of("resumed"), List.of(sub));
            sub.close();
            result("shared-durable", "unsubscribe", attempt(() -> session.unsubscribe(name)));
            sendSix(session, topic, "gone-");
            MessageConsumer fresh = session.createSharedDurableConsumer(topic, name, red);
            report("shared-durable", List.of("after-unsubscribe"), List.of(fresh));
            fresh.close();
            session.unsubscribe(name);
        }
        try (Connection conn = connect(run + "-shared-client")) {
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer c1 = session.createSharedConsumer(topic, name, red);
            MessageConsumer c2 = session.createSharedConsumer(topic, name, red);
            sendSix(session, topic, "volatile-");
            List<List<String>> got = drain(List.of(c1, c2));
            List<String> both = new ArrayList<>(got.get(0));
            both.addAll(got.get(1));
            result("shared-durable", "non-durable", join(both));
        }
    }

    /** A browser with a selector sees the matches and takes nothing. */
    static void browser() throws Exception {
        try (Connection conn = connect(null, "")) {  // a browser drains to know it has seen all
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(run + ".browse");
            sendSix(session, queue, "");
            List<String> seen = new ArrayList<>();
            try (QueueBrowser browser = session.createBrowser(queue, "colour = 'red'")) {
                Enumeration<?> messages = browser.getEnumeration();
                while (messages.hasMoreElements()) {
                    seen.add(((TextMessage) messages.nextElement()).getText());
                }
            }
            result("browser", "browsed", join(seen));
            report("browser", List.of("consumed"), List.of(session.createConsumer(queue)));
        }
    }

    /** receiveNoWait as Qpid JMS does it by default: each call drains the link (a pull). */
    static void receiveNoWait() throws Exception {
        try (Connection conn = connect(null, "")) {
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(run + ".nowait");
            sendSix(session, queue, "");
            MessageConsumer consumer = session.createConsumer(queue, "colour = 'red'");
            List<String> got = new ArrayList<>();
            for (Message m = consumer.receiveNoWait(); m != null; m = consumer.receiveNoWait()) {
                got.add(((TextMessage) m).getText());
            }
            result("receive-no-wait", "got", join(got));
        }
    }

    /** Request/reply through a temporary queue named in JMSReplyTo. */
    static void temporaryQueue() throws Exception {
        try (Connection requester = connect(null); Connection responder = connect(null)) {
            Session rs = requester.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Session ss = responder.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue requests = rs.createQueue(run + ".requests");
            TemporaryQueue replies = rs.createTemporaryQueue();
            MessageConsumer replyConsumer = rs.createConsumer(replies);
            TextMessage request = rs.createTextMessage("ping");
            request.setJMSReplyTo(replies);
            rs.createProducer(requests).send(request);
            Message got = ss.createConsumer(requests).receive(30_000);
            Destination replyTo = got.getJMSReplyTo();
            TextMessage reply = ss.createTextMessage("pong to " + ((TextMessage) got).getText());
            reply.setJMSCorrelationID(got.getJMSMessageID());
            ss.createProducer(replyTo).send(reply);
            Message answer = replyConsumer.receive(30_000);
            result("temporary-queue", "reply", answer == null ? "-" : ((TextMessage) answer).getText());
            result("temporary-queue", "correlated",
                    String.valueOf(answer != null
                            && request.getJMSMessageID().equals(answer.getJMSCorrelationID())));
            replyConsumer.close();
            replies.delete();
        }
    }

    // -- message lifetime (tests/jms/test_jms_lifetime.py) ----------------------------------------

    /**
     * setTimeToLive(500): expired on the broker before a consumer comes, and dead-lettered. Qpid
     * JMS's own expiry check is off (jms.localMessageExpiry=false), so the broker's is tested.
     */
    static void timeToLive() throws Exception {
        try (Connection conn = connect(null, "?jms.localMessageExpiry=false")) {
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(run + ".ttl");
            MessageProducer producer = session.createProducer(queue);
            producer.setTimeToLive(500);
            producer.send(tagged(session, "expiring"));
            producer.setTimeToLive(0);
            producer.send(tagged(session, "kept"));
            sleep(1000);
            result("ttl", "received", ordered(takeAll(session.createConsumer(queue))));
            result("ttl", "dead-lettered", ordered(takeAll(
                    session.createConsumer(session.createQueue("DLQ"), "run = '" + run + "'"))));
        }
    }

    /**
     * The dead letter of a message that expired (setTimeToLive(300)), read by a client whose own
     * expiry check is on, as Qpid JMS's is by default: it arrives, and it never expires
     * (JMSExpiration 0), where a dead letter keeping its expiry would be dropped on receipt.
     */
    static void deadLetterRead() throws Exception {
        try (Connection conn = connect(null, "")) {
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = session.createProducer(
                    session.createQueue(run + ".dead-letter-read"));
            producer.setTimeToLive(300);
            TextMessage sent = tagged(session, "expired");
            sent.setStringProperty("scenario", "dead-letter-read");
            producer.send(sent);
            sleep(1000);
            MessageConsumer consumer = session.createConsumer(session.createQueue("DLQ"),
                    "run = '" + run + "' AND scenario = 'dead-letter-read'");
            Message got = consumer.receive(10_000);
            result("dead-letter-read", "received", body(got));
            result("dead-letter-read", "expiration",
                    got == null ? "-" : Long.toString(got.getJMSExpiration()));
            consumer.close();
        }
    }

    /**
     * setDeliveryDelay(1500) (Qpid JMS sends it only to a peer offering DELAYED_DELIVERY): not
     * received within 1 s of the send, received after; a message sent after it without a delay
     * comes first.
     */
    static void deliveryDelay() throws Exception {
        try (Connection conn = connect(null, "")) {
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(run + ".delay");
            MessageConsumer consumer = session.createConsumer(queue);
            MessageProducer producer = session.createProducer(queue);
            long sent = System.currentTimeMillis();
            producer.setDeliveryDelay(1500);
            producer.send(tagged(session, "delayed"));
            producer.setDeliveryDelay(0);
            producer.send(tagged(session, "at-once"));
            result("delivery-delay", "first", body(consumer.receive(30_000)));
            long early = Math.max(1, sent + 1000 - System.currentTimeMillis());
            result("delivery-delay", "early", body(consumer.receive(early)));
            result("delivery-delay", "later", body(consumer.receive(30_000)));
            result("delivery-delay", "after-ms", String.valueOf(System.currentTimeMillis() - sent));
        }
    }

    /**
     * A stream does not schedule: a send with a delivery delay fails with the broker's reason,
     * and nothing of it is read; a send without one goes through.
     */
    static void streamDelay() throws Exception {
        try (Connection conn = connect(null, "")) {
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue stream = session.createQueue(run + ".stream");
            MessageConsumer consumer = session.createConsumer(stream);
            MessageProducer producer = session.createProducer(stream);
            producer.setDeliveryDelay(1500);
            result("stream-delay", "delayed",
                    attempt(() -> producer.send(tagged(session, "delayed"))));
            producer.setDeliveryDelay(0);
            producer.send(tagged(session, "at-once"));
            result("stream-delay", "received", body(consumer.receive(30_000)));
            result("stream-delay", "more", body(consumer.receive(500)));
        }
    }

    /** Priorities 1, 1, 9, 4, 9 queued before any consumer: taken highest first, in order. */
    static void priority() throws Exception {
        try (Connection conn = connect(null, "")) {
            Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(run + ".priority");
            MessageProducer producer = session.createProducer(queue);
            int[] priorities = {1, 1, 9, 4, 9};
            String[] bodies = {"p1-a", "p1-b", "p9-a", "p4", "p9-b"};
            for (int k = 0; k < bodies.length; k++) {
                producer.send(tagged(session, bodies[k]), jakarta.jms.DeliveryMode.PERSISTENT,
                        priorities[k], 0);
            }
            result("priority", "order", ordered(takeAll(session.createConsumer(queue))));
        }
    }

    static TextMessage tagged(Session session, String body) throws JMSException {
        TextMessage m = session.createTextMessage(body);
        m.setStringProperty("run", run);
        return m;
    }

    /** What the consumer gets, in order: the first within 30 s, then until a drain brings none
     * (receiveNoWait drains the link unless jms.receiveNoWaitLocalOnly). */
    static List<String> takeAll(MessageConsumer consumer) throws JMSException {
        List<String> got = new ArrayList<>();
        for (Message m = consumer.receive(30_000); m != null; m = consumer.receiveNoWait()) {
            got.add(((TextMessage) m).getText());
        }
        consumer.close();
        return got;
    }

    static String body(Message m) throws JMSException {
        return m == null ? "-" : ((TextMessage) m).getText();
    }

    static String ordered(List<String> bodies) {
        return bodies.isEmpty() ? "-" : String.join(",", bodies);
    }

    // -- helpers -------------------------------------------------------------------------------

    static Connection connect(String clientId) throws JMSException {
        return connect(clientId, LOCAL_ONLY);
    }

    static Connection connect(String clientId, String options) throws JMSException {
        JmsConnectionFactory factory = new JmsConnectionFactory(url + options);
        JmsDefaultMessageIDPolicy ids = new JmsDefaultMessageIDPolicy();
        ids.setMessageIDBuilder((producer, sequence) -> "ID:" + run + "-" + IDS.incrementAndGet());
        factory.setMessageIDPolicy(ids);
        factory.setCloseTimeout(30_000);
        Connection conn = factory.createConnection();
        if (clientId != null) {
            conn.setClientID(clientId);
        }
        conn.start();
        return conn;
    }

    /**
     * The six messages m0..m5 (bodies PREFIX+m0...), headers and properties of every JMS type;
     * returns the id counter before the first, so m{k} is {@code ID:RUN-(base+k+1)}.
     */
    static long sendSix(Session session, Destination to, String prefix) throws JMSException {
        long base = IDS.get();
        MessageProducer producer = session.createProducer(to);
        for (int k = 0; k < 6; k++) {
            TextMessage m = session.createTextMessage(prefix + "m" + k);
            int priority = new int[] {1, 7, 4, 9, 0, 4}[k];
            String colour = new String[] {"red", "blue", "green", "red", "blue", "green"}[k];
            m.setStringProperty("colour", colour);
            if (k == 0 || k == 1 || k == 3) {
                int sign = k == 1 ? -1 : 1;
                int n = k == 1 ? 2 : k + 1;
                m.setJMSType(k == 1 ? "invoice" : "order");
                m.setJMSCorrelationID("c-" + k);
                m.setBooleanProperty("flag", k != 1);
                m.setByteProperty("b", (byte) (sign * n));
                m.setShortProperty("s", (short) (sign * n * 100));
                m.setIntProperty("i", sign * n * 1000);
                m.setLongProperty("l", sign * n * 10_000_000_000L);
                m.setFloatProperty("f", sign * (n + 0.5f));
                m.setDoubleProperty("d", sign * (n + 1.25));
            }
            if (k == 5) {
                m.setStringProperty("i", "1000");
            }
            producer.setDisableMessageTimestamp(k == 4);
            producer.send(m, jakarta.jms.DeliveryMode.PERSISTENT, priority, 0);
        }
        producer.close();
        return base;
    }

    static String expand(String selector, long base) {
        String out = selector.replace("${START}", Long.toString(START));
        for (int k = 0; k < 6; k++) {
            out = out.replace("${ID:m" + k + "}", "ID:" + run + "-" + (base + k + 1));
        }
        return out;
    }

    static MessageConsumer consumer(Session session, Destination from, String selector,
            boolean noLocal) throws JMSException {
        if (from instanceof Topic topic) {
            return session.createConsumer(topic, selector, noLocal);
        }
        return session.createConsumer(from, selector);
    }

    static MessageConsumer subscribe(Session session, Topic topic, String name, String selector,
            boolean jms2) throws JMSException {
        return jms2 ? session.createDurableConsumer(topic, name, selector, false)
                : session.createDurableSubscriber(topic, name, selector, false);
    }

    /** What each consumer receives until none has received anything for QUIET_MS. */
    static List<List<String>> drain(List<MessageConsumer> consumers) throws JMSException {
        List<List<String>> got = new ArrayList<>();
        for (int i = 0; i < consumers.size(); i++) {
            got.add(new ArrayList<>());
        }
        long quietSince = System.currentTimeMillis();
        while (System.currentTimeMillis() - quietSince < QUIET_MS) {
            boolean any = false;
            for (int i = 0; i < consumers.size(); i++) {
                Message m = consumers.get(i).receiveNoWait();
                if (m != null) {
                    got.get(i).add(((TextMessage) m).getText());
                    any = true;
                }
            }
            if (any) {
                quietSince = System.currentTimeMillis();
            } else {
                sleep(20);
            }
        }
        return got;
    }

    static void report(String scenario, List<String> labels, List<MessageConsumer> consumers)
            throws JMSException {
        List<List<String>> got = drain(consumers);
        for (int i = 0; i < labels.size(); i++) {
            result(scenario, labels.get(i), join(got.get(i)));
        }
    }

    interface Action {
        void run() throws Exception;
    }

    /** "ok", or the exception as !Class: message. */
    static String attempt(Action action) {
        try {
            action.run();
            return "ok";
        } catch (Exception e) {
            return failure(e);
        }
    }

    static String failure(Exception e) {
        String message = String.valueOf(e.getMessage()).replace('\n', ' ').replace('\t', ' ');
        return "!" + e.getClass().getSimpleName() + ": " + message;
    }

    static String join(List<String> bodies) {
        List<String> sorted = new ArrayList<>(bodies);
        Collections.sort(sorted);
        return sorted.isEmpty() ? "-" : String.join(",", sorted);
    }

    static void result(String scenario, String label, String value) {
        System.out.println(scenario + "\t" + label + "\t" + value);
        System.out.flush();
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
