// Benchmark of the Node client (`make bench` phase `clients`): jobs/s from ONE Node process of a
// transaction that inserts a row and enqueues a BullMQ job, through jobbuf's Queue (staged in the
// transaction; jobbuf's worker, running, delivers after the commit) versus BullMQ's own Queue
// (pushed to Redis from inside the transaction); then the same with addBulk of 100 jobs per
// transaction. Rounds alternate the two; prints each figure and key=value lines of the best.
//   PGHOST=... PGPORT=... PGUSER=... PGDATABASE=... node node_bullmq.cjs REDIS_URL [seconds=5] [rounds=2]
// Needs the jobbuf queue bench_clients_bq (bullmq_queue "bench_clients") and the table
// bench_clients_users (bench/run.sh creates them).
'use strict';

const path = require('path');
const pg = require(path.join(__dirname, '../../clients/node/node_modules/pg'));
const jobbuf = require('../../clients/node');
const { Queue: BullQueue } = require(path.join(__dirname, '../../test/consumers/node/node_modules/bullmq'));

async function main() {
  const u = new URL(process.argv[2]);
  const seconds = Number(process.argv[3] || 5);
  const rounds = Number(process.argv[4] || 2);
  const client = new pg.Client();
  await client.connect();
  const bull = new BullQueue('bench_clients_own', { connection: { host: u.hostname, port: Number(u.port) } });
  let n = 0;
  const data = () => ({ id: ++n, user: `customer-${n}@example.com`, plan: 'pro' });

  async function transaction(enqueue) {
    await client.query('BEGIN');
    await client.query('INSERT INTO bench_clients_users (email) VALUES ($1)', [`customer-${n}@example.com`]);
    await enqueue();
    await client.query('COMMIT');
  }
  const variants = {
    add_jobbuf: () => transaction(() => new jobbuf.Queue('bench_clients', { client }).add('welcome', data())),
    add_bullmq: () => transaction(() => bull.add('welcome', data())),
    addbulk_jobbuf: () => transaction(() => new jobbuf.Queue('bench_clients', { client })
      .addBulk(Array.from({ length: 100 }, () => ({ name: 'welcome', data: data() })))),
    addbulk_bullmq: () => transaction(() => bull.addBulk(Array.from({ length: 100 }, () => ({ name: 'welcome', data: data() })))),
  };
  const perTransaction = { add_jobbuf: 1, add_bullmq: 1, addbulk_jobbuf: 100, addbulk_bullmq: 100 };

  async function measure(name) {
    await bull.obliterate({ force: true });
    await client.query('TRUNCATE bench_clients_users');
    for (let i = 0; i < 50; i++) await variants[name]();
    let done = 0;
    const started = process.hrtime.bigint();
    const deadline = started + BigInt(Math.round(seconds * 1e9));
    let now = started;
    while (now < deadline) {
      for (let i = 0; i < 20; i++) await variants[name]();
      done += 20 * perTransaction[name];
      now = process.hrtime.bigint();
    }
    return done / (Number(now - started) / 1e9);
  }

  const best = {};
  for (let round = 0; round < rounds; round++) {
    for (const pair of [['add_jobbuf', 'add_bullmq'], ['addbulk_jobbuf', 'addbulk_bullmq']]) {
      for (const name of round % 2 ? pair.slice().reverse() : pair) {
        const rate = await measure(name);
        console.log(`node round ${round + 1}, ${name}: ${Math.round(rate)} jobs/s`);
        best[name] = Math.max(best[name] || 0, rate);
      }
    }
  }
  await bull.obliterate({ force: true });
  await bull.close();
  await client.end();
  for (const [name, rate] of Object.entries(best)) console.log(`clients_node_${name}=${rate.toFixed(1)}`);
}
main().catch((err) => { console.error(err.stack || err); process.exit(1); });
