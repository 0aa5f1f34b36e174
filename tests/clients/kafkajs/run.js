// kafkajs for kbroker's integration tests; prints one JSON document on stdout.
//
//   node run.js produce   BOOTSTRAP TOPIC COUNT
//   node run.js consume   BOOTSTRAP TOPIC GROUP COUNT      -> [{partition, offset, value}, ...]
//   node run.js admin     BOOTSTRAP TOPIC GROUP DELETE_BEFORE_OFFSET
//        -> {offsets: fetchOffsets, deleted: true, groups: describeGroups, earliest: fetchTopicOffsets}
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const [command, bootstrap, topic, ...rest] = process.argv.slice(2);
const kafka = new Kafka({ clientId: process.env.KBROKER_TEST_CLIENT_ID || 'kafkajs-test', brokers: [bootstrap], logLevel: logLevel.WARN,
                          retry: { retries: 5 } });

async function produce(count) {
  const producer = kafka.producer({ allowAutoTopicCreation: true });
  await producer.connect();
  for (let i = 0; i < count; i++) {
    await producer.send({ topic, acks: -1, messages: [{ key: `k${i}`, value: `v-${i}` }] });
  }
  await producer.disconnect();
  return { produced: count };
}

async function consume(group, count) {
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 1000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${seen.length} of ${count}`)), 60000);
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        if (seen.length >= count) return;
        seen.push({ partition, offset: Number(message.offset), value: message.value.toString() });
        await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }]);
        if (seen.length === count) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  return seen;
}

async function admin(group, deleteBefore) {
  const client = kafka.admin();
  await client.connect();
  const offsets = await client.fetchOffsets({ groupId: group, topics: [topic] });
  await client.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: String(deleteBefore) }] });
  const groups = await client.describeGroups([group]);
  const earliest = await client.fetchTopicOffsets(topic);
  await client.disconnect();
  return { offsets, deleted: true, groups, earliest };
}

(async () => {
  let result;
  if (command === 'produce') result = await produce(Number(rest[0]));
  else if (command === 'consume') result = await consume(rest[0], Number(rest[1]));
  else if (command === 'admin') result = await admin(rest[0], Number(rest[1]));
  else throw new Error(`unknown command ${command}`);
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(0);
})().catch((err) => { process.stderr.write(`error: ${err.stack || err}\n`); process.exit(1); });
