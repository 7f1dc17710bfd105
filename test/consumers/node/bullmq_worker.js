#!/usr/bin/env node
// A real, unmodified BullMQ Worker (npm `bullmq`, the exact version package-lock.json pins) used
// by jobbuf's end-to-end tests of the `bullmq` target. Only configuration is set here: the
// processor records the job BullMQ handed it and returns; BullMQ's own code moves the job to
// `completed` (or retries it, per its opts).
//
// Every processed job is appended as one JSON line to --out:
//   {"id", "name", "data", "opts", "timestamp", "delay", "priority", "processedOn",
//    "attemptsMade", "ran_at"}       (ran_at: epoch milliseconds when the processor ran)
// A job whose name is in --fail-names throws (so its attempts/backoff options are exercised).
//
// It prints "ready" once the Worker is connected and waiting for jobs, and closes the Worker
// (letting running jobs finish) and exits 0 on SIGTERM or SIGINT.
//
// A redis+cluster://host:port,host:port URL connects through ioredis's Cluster client (the queue's
// prefix or name must then carry a {hash tag}, as BullMQ requires on a cluster).
//
//   node bullmq_worker.js --url redis://127.0.0.1:PORT/0 --queue mail --out ran.jsonl
//        [--prefix bull] [--concurrency 4] [--fail-names a,b] [--lock-ms 30000] [--stalled-ms 30000]
// --lock-ms / --stalled-ms: BullMQ's lockDuration and stalledInterval (its defaults: 30 s), shorter
// in fault tests so that jobs a killed Worker held are recovered (stalled) within the test.
// --work-ms: the processor waits this long after recording a job (a fault test's way to kill the
// Worker while jobs are in flight).
'use strict';

const fs = require('fs');
const { Worker } = require('bullmq');
const IORedis = require('ioredis');

function parseArgs(argv) {
  const opts = {
    url: null, queue: null, out: null, prefix: 'bull', concurrency: 4, failNames: '', lockMs: 30000, stalledMs: 30000, workMs: 0,
  };
  const names = {
    '--url': 'url', '--queue': 'queue', '--out': 'out', '--prefix': 'prefix',
    '--concurrency': 'concurrency', '--fail-names': 'failNames', '--lock-ms': 'lockMs', '--stalled-ms': 'stalledMs',
    '--work-ms': 'workMs',
  };
  for (let i = 2; i < argv.length; i += 2) {
    const key = names[argv[i]];
    if (!key || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    const value = argv[i + 1];
    opts[key] = typeof opts[key] === 'number' ? Number(value) : value;
  }
  if (!opts.url || !opts.queue || !opts.out) throw new Error('--url, --queue and --out are required');
  return opts;
}

function connectionFromUrl(url) {
  if (url.startsWith('redis+cluster://')) {
    const nodes = url.slice('redis+cluster://'.length).split('/')[0].split(',').map((hp) => {
      const [host, port] = hp.split(':');
      return { host, port: Number(port || 6379) };
    });
    return new IORedis.Cluster(nodes, { redisOptions: { maxRetriesPerRequest: null } });
  }
  const u = new URL(url);
  return {
    host: u.hostname,
    port: Number(u.port || 6379),
    db: Number((u.pathname || '/0').slice(1) || 0),
    password: u.password ? decodeURIComponent(u.password) : undefined,
    username: u.username ? decodeURIComponent(u.username) : undefined,
    maxRetriesPerRequest: null, // what BullMQ requires of a Worker's connection
  };
}

async function main() {
  const opts = parseArgs(process.argv);
  const failNames = new Set(opts.failNames.split(',').filter(Boolean));
  const out = fs.openSync(opts.out, 'a');

  const worker = new Worker(opts.queue, async (job) => {
    const line = {
      id: job.id, name: job.name, data: job.data, opts: job.opts, timestamp: job.timestamp,
      delay: job.delay, priority: job.priority, processedOn: job.processedOn,
      attemptsMade: job.attemptsMade, ran_at: Date.now(),
    };
    fs.writeSync(out, JSON.stringify(line) + '\n');
    if (opts.workMs > 0) await new Promise((resolve) => setTimeout(resolve, opts.workMs));
    if (failNames.has(job.name)) throw new Error(`failing ${job.name} on purpose`);
    return 'done';
  }, { connection: connectionFromUrl(opts.url), prefix: opts.prefix, concurrency: opts.concurrency,
    lockDuration: opts.lockMs, stalledInterval: opts.stalledMs });

  worker.on('error', (err) => process.stderr.write(`worker error: ${err.message}\n`));

  let closing = false;
  const stop = async () => {
    if (closing) return;
    closing = true;
    await worker.close();
    fs.closeSync(out);
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  await worker.waitUntilReady();
  process.stdout.write('ready\n');
}

main().catch((err) => {
  process.stderr.write(`bullmq_worker: ${err.stack || err}\n`);
  process.exit(1);
});
