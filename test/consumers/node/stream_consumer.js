#!/usr/bin/env node
// A real Redis Streams consumer (ioredis) used by jobbuf's end-to-end tests
// (test/e2e/node_stream.sh). It does what an application consuming a jobbuf `stream` queue does:
//
//   XGROUP CREATE <stream> <group> 0 MKSTREAM      (an existing group is fine)
//   loop: XREADGROUP GROUP <group> <consumer> COUNT <n> BLOCK <ms> STREAMS <stream> >
//         record each entry, then XACK it
//
// Every entry is written as one JSON line to --out: {"stream_id", "fields": {...}, "id", "payload"}
// where id and payload are the entry's `id` and `payload` fields as jobbuf wrote them.
// It prints "ready" once the group exists, stops --settle-ms after --expect entries were seen
// (a late duplicate would still be recorded) and exits 0; or exits 2 at --timeout-ms.
//
//   node stream_consumer.js --url redis://127.0.0.1:PORT/0 --stream jobbuf:events \
//        --group g --consumer c1 --expect 40 --out seen.jsonl [--timeout-ms 20000]
//        [--settle-ms 1000] [--count 7] [--block-ms 200]
'use strict';

const fs = require('fs');
const Redis = require('ioredis');

function parseArgs(argv) {
  const opts = {
    url: 'redis://127.0.0.1:6379/0', stream: null, group: 'jobbuf-e2e', consumer: 'c1',
    expect: 0, out: null, timeoutMs: 20000, settleMs: 1000, count: 7, blockMs: 200,
  };
  const names = {
    '--url': 'url', '--stream': 'stream', '--group': 'group', '--consumer': 'consumer',
    '--expect': 'expect', '--out': 'out', '--timeout-ms': 'timeoutMs', '--settle-ms': 'settleMs',
    '--count': 'count', '--block-ms': 'blockMs',
  };
  for (let i = 2; i < argv.length; i += 2) {
    const key = names[argv[i]];
    if (!key || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    const value = argv[i + 1];
    opts[key] = typeof opts[key] === 'number' ? Number(value) : value;
  }
  if (!opts.stream || !opts.out) throw new Error('--stream and --out are required');
  return opts;
}

async function main() {
  const opts = parseArgs(process.argv);
  const redis = new Redis(opts.url, { maxRetriesPerRequest: 3, enableOfflineQueue: true });
  const out = fs.openSync(opts.out, 'a');
  let stopping = false;
  process.on('SIGTERM', () => { stopping = true; });
  process.on('SIGINT', () => { stopping = true; });

  try {
    await redis.xgroup('CREATE', opts.stream, opts.group, '0', 'MKSTREAM');
  } catch (err) {
    if (!String(err.message).startsWith('BUSYGROUP')) throw err;
  }
  process.stdout.write('ready\n');

  const deadline = Date.now() + opts.timeoutMs;
  let seen = 0;
  let settleUntil = null;
  let status = 2;
  while (!stopping) {
    const now = Date.now();
    if (settleUntil !== null && now >= settleUntil) { status = 0; break; }
    if (now >= deadline) break;
    const reply = await redis.xreadgroup(
      'GROUP', opts.group, opts.consumer, 'COUNT', opts.count, 'BLOCK', opts.blockMs,
      'STREAMS', opts.stream, '>');
    if (!reply) continue;
    for (const [, entries] of reply) {
      const ids = [];
      for (const [streamId, flat] of entries) {
        const fields = {};
        for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]] = flat[i + 1];
        const line = { stream_id: streamId, fields, id: fields.id, payload: fields.payload };
        fs.writeSync(out, JSON.stringify(line) + '\n');
        ids.push(streamId);
      }
      if (ids.length > 0) await redis.xack(opts.stream, opts.group, ...ids);
      seen += ids.length;
    }
    if (settleUntil === null && opts.expect > 0 && seen >= opts.expect) settleUntil = Date.now() + opts.settleMs;
  }
  fs.closeSync(out);
  process.stdout.write(`seen ${seen}\n`);
  redis.disconnect();
  return status;
}

main().then((code) => process.exit(code), (err) => {
  process.stderr.write(`stream_consumer: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
