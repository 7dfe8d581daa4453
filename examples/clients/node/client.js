// Produces one InboundMessage to agentstream's `inbound` topic and follows the answer on `events`
// through a consumer group of its own, with kafkajs (docs/clients.md, docs/producing.md).
//
// Settings come from the environment: BOOTSTRAP_SERVERS (default localhost:9092), TOPIC_PREFIX
// (agentstream.), GROUP_ID (agentstream-example-node), PLATFORM (console), CHAT_ID (local),
// USER_ID (alice), TEXT (calculate 6*7), TIMEOUT_S (120).
// stdout: the final answer. stderr: each followed event. Exit 0 when the run completed, 1 when it
// ended otherwise, 2 on timeout or a Kafka error.
"use strict";
const crypto = require("node:crypto");
const { Kafka, Partitioners, logLevel } = require("kafkajs");

const env = (name, fallback) => process.env[name] || fallback;

async function main() {
  const prefix = env("TOPIC_PREFIX", "agentstream.");
  const timeoutS = Number(env("TIMEOUT_S", "120"));
  // The fields docs/producing.md requires; `type` is optional and says what the record is.
  const message = {
    type: "inbound.message",
    id: crypto.randomUUID(),
    platform: env("PLATFORM", "console"),
    chat_id: env("CHAT_ID", "local"),
    user: { id: env("USER_ID", "alice") },
    text: env("TEXT", "calculate 6*7"),
  };
  const key = `${message.platform}:${message.chat_id}`; // the conversation key (docs/producing.md § The key)

  const kafka = new Kafka({
    clientId: "agentstream-example-node",
    brokers: env("BOOTSTRAP_SERVERS", "localhost:9092").split(","),
    logLevel: logLevel.ERROR,
  });
  // A group of its own; a new group starts at the beginning, so nothing of the answer is missed
  // however long the join takes; an existing group resumes where it committed. The embedded broker
  // answers a fetch only when its wait expires (docs/clients.md): wait 10 ms, not 5 s.
  const consumer = kafka.consumer({ groupId: env("GROUP_ID", "agentstream-example-node"), maxWaitTimeInMs: 10 });
  // kafkajs' default partitioner hashes keys with murmur2, as Kafka's Java client does.
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });

  let root = null;
  let settle;
  const finished = new Promise((resolve, reject) => {
    settle = { resolve, reject };
  });
  const timer = setTimeout(
    () => settle.reject(new Error(`timed out after ${timeoutS}s waiting for the answer to ${message.id} (root run ${root})`)),
    timeoutS * 1000,
  );

  finished.catch(() => {}); // awaited below; a timeout before then is not an unhandled rejection
  const consuming = (async () => {
    await consumer.connect();
    await consumer.subscribe({ topic: `${prefix}events`, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message: record }) => {
        let event;
        try {
          event = JSON.parse(record.value.toString("utf8"));
        } catch {
          return; // not ours to judge: agentstream's own consumers send bad records to dlq
        }
        if (root === null && event.type === "run.queued" && event.inbound_id === message.id) {
          root = event.root_run_id;
        }
        if (root === null || event.root_run_id !== root) return;
        process.stderr.write(`event seq=${event.seq} type=${event.type}\n`);
        if (event.type === "run.finished" && event.run_id === root) {
          await consumer.commitOffsets([{ topic, partition, offset: (BigInt(record.offset) + 1n).toString() }]);
          settle.resolve(event);
        }
      },
    });
  })();
  // Sent while the group is still joining: a new group starts at the beginning.
  const producing = (async () => {
    await producer.connect();
    const [produced] = await producer.send({
      topic: `${prefix}inbound`,
      messages: [{ key, value: JSON.stringify(message) }],
    });
    process.stderr.write(
      `produced ${produced.topicName} partition=${produced.partition} offset=${produced.baseOffset} key=${key} id=${message.id}\n`,
    );
  })();

  try {
    await Promise.race([Promise.all([consuming, producing]), finished]);
    const event = await finished;
    if (event.status !== "completed") {
      process.stderr.write(`node client: the run ended ${event.status}: ${event.error}\n`);
      return 1;
    }
    process.stdout.write(`${event.text}\n`);
    return 0;
  } finally {
    clearTimeout(timer);
    // Leaving the group waits for a join still in progress: not for long when giving up.
    const closed = Promise.all([producer.disconnect(), consumer.disconnect()]);
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 3000).unref())]);
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`node client: ${err.message}\n`);
    process.exit(2);
  },
);
