#!/usr/bin/env node
// Baseline for the `bullmq` target: how fast BullMQ's own producer enqueues, through
// Queue.addBulk in chunks (one pipeline of addStandardJob scripts per chunk). Prints one line:
//   bullmq_addbulk jobs=100000 chunk=1000 seconds=S jobs_per_s=R
// Uses test/consumers/node's pinned bullmq; needs an empty Redis (the queue is obliterated first).
//
//   node bench/frameworks/bullmq_addbulk.js redis://127.0.0.1:PORT/0 [jobs=100000] [chunk=1000]
'use strict';

const path = require('path');
const { Queue } = require(path.join(__dirname, '../../test/consumers/node/node_modules/bullmq'));

async function main() {
  const u = new URL(process.argv[2] || 'redis://127.0.0.1:6379/0');
  const total = Number(process.argv[3] || 100000);
  const chunk = Number(process.argv[4] || 1000);
  const queue = new Queue('bench', { connection: { host: u.hostname, port: Number(u.port || 6379) } });
  await queue.obliterate({ force: true });
  const started = process.hrtime.bigint();
  for (let done = 0; done < total; done += chunk) {
    const n = Math.min(chunk, total - done);
    await queue.addBulk(Array.from({ length: n }, (_, i) => ({
      name: 'bench', data: { id: done + i, user: 'user-' + (done + i), amount: 42 },
    })));
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const waiting = await queue.getWaitingCount();
  await queue.close();
  if (waiting !== total) throw new Error(`expected ${total} waiting jobs, found ${waiting}`);
  console.log(`bullmq_addbulk jobs=${total} chunk=${chunk} seconds=${seconds.toFixed(2)} jobs_per_s=${Math.round(total / seconds)}`);
}

main().catch((err) => { console.error(err); process.exit(1); });
