package example;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Produces one InboundMessage to agentstream's {@code inbound} topic and follows the answer on
 * {@code events} through a consumer group of its own (docs/clients.md, docs/producing.md).
 *
 * <p>Settings come from the environment: BOOTSTRAP_SERVERS (default localhost:9092), TOPIC_PREFIX
 * (agentstream.), GROUP_ID (agentstream-example-java), PLATFORM (console), CHAT_ID (local), USER_ID
 * (alice), TEXT (calculate 6*7), TIMEOUT_S (120). stdout: the final answer. stderr: each followed
 * event. Exit 0 when the run completed, 1 when it ended otherwise, 2 on timeout or a Kafka error.
 */
public final class Client {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isEmpty() ? fallback : value;
  }

  public static void main(String[] args) {
    // kafka-clients logs its whole configuration at INFO: warnings and errors only.
    System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
    try {
      System.exit(run());
    } catch (Exception err) {
      System.err.println("java client: " + err);
      System.exit(2);
    }
  }

  private static int run() throws Exception {
    String bootstrap = env("BOOTSTRAP_SERVERS", "localhost:9092");
    String prefix = env("TOPIC_PREFIX", "agentstream.");
    double timeoutS = Double.parseDouble(env("TIMEOUT_S", "120"));
    // The fields docs/producing.md requires; `type` is optional and says what the record is.
    ObjectNode message = JSON.createObjectNode();
    message.put("type", "inbound.message");
    message.put("id", UUID.randomUUID().toString());
    message.put("platform", env("PLATFORM", "console"));
    message.put("chat_id", env("CHAT_ID", "local"));
    message.putObject("user").put("id", env("USER_ID", "alice"));
    message.put("text", env("TEXT", "calculate 6*7"));
    String id = message.get("id").asText();
    // The conversation key (docs/producing.md § The key).
    String key = message.get("platform").asText() + ":" + message.get("chat_id").asText();

    Properties consumerProps = new Properties();
    consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    // A group of its own; a new group starts at the beginning, so nothing of the answer is missed
    // however long the join takes; an existing group resumes where it committed.
    consumerProps.put(ConsumerConfig.GROUP_ID_CONFIG, env("GROUP_ID", "agentstream-example-java"));
    consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    // The embedded broker answers a fetch only when its wait expires (docs/clients.md).
    consumerProps.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "10");
    Properties producerProps = new Properties();
    producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
    // The embedded broker refuses idempotent producers (docs/clients.md); a repeated record is
    // harmless anyway: ingress drops a second record with the same id.
    producerProps.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
    // The default partitioner hashes keys with murmur2, the partitioning docs/topics.md asks for.

    // kafka-clients 4.4 names the cluster it expects in its ApiVersions request (KIP-1242), which
    // the embedded broker answers by closing the connection (docs/clients.md): not sent.
    for (Properties props : List.of(consumerProps, producerProps)) {
      props.put(CommonClientConfigs.METADATA_CLUSTER_CHECK_ENABLE_CONFIG, "false");
    }

    long deadline = System.nanoTime() + (long) (timeoutS * 1e9);
    KafkaConsumer<String, String> consumer =
        new KafkaConsumer<>(consumerProps, new StringDeserializer(), new StringDeserializer());
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(producerProps, new StringSerializer(), new StringSerializer())) {
      consumer.subscribe(List.of(prefix + "events"));
      RecordMetadata produced =
          producer
              .send(new ProducerRecord<>(prefix + "inbound", key, JSON.writeValueAsString(message)))
              .get();
      System.err.printf(
          "produced %s partition=%d offset=%d key=%s id=%s%n",
          produced.topic(), produced.partition(), produced.offset(), key, id);

      String root = null;
      while (System.nanoTime() < deadline) {
        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
          JsonNode event;
          try {
            event = JSON.readTree(record.value().getBytes(StandardCharsets.UTF_8));
          } catch (Exception notJson) {
            continue; // not ours to judge: agentstream's own consumers send bad records to dlq
          }
          String type = event.path("type").asText();
          if (root == null && type.equals("run.queued") && id.equals(event.path("inbound_id").asText())) {
            root = event.path("root_run_id").asText();
          }
          if (root == null || !root.equals(event.path("root_run_id").asText())) {
            continue;
          }
          System.err.printf("event seq=%d type=%s%n", event.path("seq").asLong(), type);
          if (type.equals("run.finished") && root.equals(event.path("run_id").asText())) {
            consumer.commitSync();
            String status = event.path("status").asText();
            if (!status.equals("completed")) {
              System.err.println("java client: the run ended " + status + ": " + event.path("error").asText());
              return 1;
            }
            System.out.println(event.path("text").asText());
            return 0;
          }
        }
      }
      System.err.printf(
          "java client: timed out after %ss waiting for the answer to %s (root run %s)%n", timeoutS, id, root);
      return 2;
    } finally {
      // Leaving the group waits for a join still in progress: not for long when giving up.
      consumer.close(CloseOptions.timeout(Duration.ofSeconds(3)));
    }
  }
}
