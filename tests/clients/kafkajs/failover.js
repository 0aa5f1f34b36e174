// kafkajs in the cluster failover scenarios (tests/integration/test_cluster_clients.py): an idempotent producer
// (acks=all, one batch of ten at a time) and a committing consumer group on one topic until a "stop" line on
// stdin; then the consumer reads on until it has every acknowledged record. One line per event on stdout
// (A acked, C consumed, E error, P producer done, DONE), as every failover workload prints them:
//
//   node failover.js BOOTSTRAP TOPIC GROUP
'use strict';
const readline = require('readline');
const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, topic, group] = process.argv.slice(2);
const say = (line) => process.stdout.write(line + '\n');
const kafka = new Kafka({
  clientId: 'kafkajs-failover', brokers: bootstrap.split(','), retry: { retries: 20, initialRetryTime: 50 },
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, level, log }) => process.stderr.write(`${level} ${namespace} ${log.message} ${log.error || ''}\n`),
});

async function main() {
  let stop = false;
  let produced = false;
  const acked = new Set();
  const consumed = new Set();
  readline.createInterface({ input: process.stdin }).on('line', (line) => { if (line.trim() === 'stop') stop = true; })
    .on('close', () => { stop = true; });

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const producing = (async () => {
    for (let i = 0; !stop; i += 10) {
      const values = Array.from({ length: 10 }, (_, j) => `r${String(i + j).padStart(6, '0')}`);
      try {
        await producer.send({ topic, acks: -1, messages: values.map((value, j) => ({ key: `${(i + j) % 16}`, value })) });
        for (const value of values) { acked.add(value); say(`A ${value}`); }
      } catch (e) {
        say(`E produce: ${e.name}: ${e.message}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    await producer.disconnect();
    produced = true;
    say('P');
  })();

  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let last = Date.now();
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      const value = message.value.toString();
      consumed.add(value);
      last = Date.now();
      say(`C ${value}`);
      try {
        await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
      } catch (e) {
        say(`E commit: ${e.name}: ${e.message}`);
      }
    },
  });
  await producing;
  while (!([...acked].every((v) => consumed.has(v))) && Date.now() - last < 20000) {
    await new Promise((r) => setTimeout(r, 100));
  }
  await consumer.disconnect();
  say('DONE');
}

main().catch((e) => { say(`E fatal: ${e.name}: ${e.message}`); say('DONE'); process.exit(1); });
