#!/usr/bin/env node
// Checks jobbuf's BullMQ wire format (docs/formats/bullmq.md, src/redis/targets/bullmq_add_script.h)
// against the BullMQ version installed next to this file, and adds jobs the way jobbuf's
// `bullmq` target does, so tests can feed a real Worker without the extension.
//
//   node bullmq_format_check.js compare --url redis://127.0.0.1:PORT/0
//       Runs the same cases twice with a frozen clock: once through BullMQ's own Queue.add /
//       addBulk (prefix "bullA"), once through jobbuf's reference script (prefix "bullB"), then
//       compares every key both wrote (types, hash fields, opts JSON parsed, list and sorted-set
//       members and scores, stream entries without their ids). Prints "same" and exits 0, or
//       prints each difference and exits 1. Run it after upgrading BullMQ to verify the format.
//
//   node bullmq_format_check.js add --url URL --queue Q --jobs FILE.json [--prefix bull]
//       FILE.json: [{"id", "name", "data", "opts"?, "run_at_ms"?}, ...]; adds them in one
//       MULTI/EVAL/EXEC unit as jobbuf's worker would; prints the script's {added, duplicated}.
'use strict';

const fs = require('fs');
const path = require('path');
const Redis = require('ioredis');
const { Queue } = require('bullmq');

const SCRIPT = scriptOfHeader(path.join(__dirname, '../../../src/redis/targets/bullmq_add_script.h'));
const KEY_NAMES = ['wait', 'paused', 'meta', 'active', 'prioritized', 'delayed', 'events', 'marker', 'pc', 'id'];

// The Lua text of kBullmqAddScript's raw string in the header the extension is built with: the
// script compared here is the one the worker sends, byte for byte.
function scriptOfHeader(headerPath) {
  const match = /kBullmqAddScript = R"lua\(([\s\S]*?)\)lua";/.exec(fs.readFileSync(headerPath, 'utf8'));
  if (!match) throw new Error(`no kBullmqAddScript raw string in ${headerPath}`);
  return match[1];
}

function parseArgs(argv) {
  const opts = { mode: argv[2], url: null, queue: 'fmt', jobs: null, prefix: 'bull' };
  for (let i = 3; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in opts) || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    opts[key] = argv[i + 1];
  }
  if (!opts.url) throw new Error('--url is required');
  return opts;
}

// What jobbuf's encoder puts in the `opts` field for a payload's opts: Queue.add's own defaults
// (attempts 0, a numeric backoff normalized to a fixed one), the custom jobId, and the delay.
function storedOpts(id, payloadOpts, delay) {
  const opts = Object.assign({ attempts: 0 }, payloadOpts || {});
  if (Number.isFinite(opts.backoff)) opts.backoff = { type: 'fixed', delay: opts.backoff };
  opts.jobId = id;
  if (delay > 0) opts.delay = delay;
  return opts;
}

// One unit as jobbuf's worker sends it: MULTI, EVAL <script> over the batch, the batch marker, EXEC.
async function referenceAdd(redis, prefix, queue, jobs, nowMs) {
  const base = `${prefix}:${queue}:`;
  const args = [base];
  for (const job of jobs) {
    const delay = job.run_at_ms && job.run_at_ms > nowMs ? job.run_at_ms - nowMs : 0;
    const opts = storedOpts(job.id, job.opts, delay);
    args.push(job.id, job.name, JSON.stringify(job.data === undefined ? {} : job.data),
      JSON.stringify(opts), String(nowMs), String(delay), String(opts.priority || 0));
  }
  const keys = KEY_NAMES.map((k) => base + k);
  const replies = await redis.multi()
    .eval(SCRIPT, keys.length, ...keys, ...args)
    .set(`jobbuf:check:marker:${prefix}:${queue}`, '1')
    .exec();
  for (const [err] of replies) if (err) throw err;
  return replies[0][1];
}

const CLOCK = 1800000000000;

function connectionFromUrl(url) {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379), db: Number(u.pathname.slice(1) || 0) };
}

// The cases of docs/formats/bullmq.md, as BullMQ's producer API expresses them and as jobbuf's
// payloads do (run_at = frozen clock + delay).
const CASES = [
  { id: 'jb-1', name: 'welcome', data: { user: 1 } },
  { id: 'jb-2', name: 'remind', data: { user: 2 }, delay: 60000 },
  { id: 'jb-3', name: 'vip', data: { user: 3 }, opts: { priority: 5 } },
  { id: 'jb-4', name: 'retry', data: { user: 4 },
    opts: { attempts: 5, backoff: { type: 'exponential', delay: 1000 }, removeOnComplete: true, removeOnFail: 100 } },
  { id: 'jb-5', name: 'fixed', data: [1, 'two'], opts: { attempts: 3, backoff: 2500 } },
  { id: 'jb-6', name: 'later-vip', data: { user: 6 }, opts: { priority: 2 }, delay: 5000 },
  { id: 'jb-7', name: 'same-ms', data: { user: 7 }, delay: 5000 },
  { id: 'jb-1', name: 'welcome', data: { user: 1 } }, // pushed twice: one job, a "duplicated" event
];

async function runCompare(opts) {
  const redis = new Redis(opts.url);
  const realNow = Date.now;
  Date.now = () => CLOCK;
  try {
    const queue = new Queue(opts.queue, { connection: connectionFromUrl(opts.url), prefix: 'bullA' });
    for (const c of CASES.slice(0, 4)) {
      await queue.add(c.name, c.data, Object.assign({}, c.opts, { jobId: c.id }, c.delay ? { delay: c.delay } : {}));
    }
    await queue.addBulk(CASES.slice(4).map((c) => ({
      name: c.name, data: c.data, opts: Object.assign({}, c.opts, { jobId: c.id }, c.delay ? { delay: c.delay } : {}),
    })));
    await queue.close();
  } finally {
    Date.now = realNow;
  }
  await referenceAdd(redis, 'bullB', opts.queue, CASES.slice(0, 4).map(asPayload), CLOCK);
  await referenceAdd(redis, 'bullB', opts.queue, CASES.slice(4).map(asPayload), CLOCK);

  const a = await dump(redis, `bullA:${opts.queue}:`);
  const b = await dump(redis, `bullB:${opts.queue}:`);
  await redis.quit();
  const diffs = [];
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const va = JSON.stringify(a[key]);
    const vb = JSON.stringify(b[key]);
    if (va !== vb) diffs.push(`${key}\n  Queue.add: ${va}\n  jobbuf:    ${vb}`);
  }
  if (diffs.length) {
    console.log(diffs.join('\n'));
    process.exit(1);
  }
  console.log(`same (${Object.keys(a).length} keys)`);
}

function asPayload(c) {
  return { id: c.id, name: c.name, data: c.data, opts: c.opts, run_at_ms: c.delay ? CLOCK + c.delay : undefined };
}

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sortKeys(value[k])]));
  }
  return value;
}

// Every key under `base`, by its suffix, with a comparable value. The meta hash's `version`
// field is what the Queue object writes when it connects (jobbuf never does), so it is left out.
async function dump(redis, base) {
  const out = {};
  const keys = (await redis.keys(`${base}*`)).sort();
  for (const key of keys) {
    const suffix = key.slice(base.length);
    const type = await redis.type(key);
    let value;
    if (type === 'hash') {
      value = await redis.hgetall(key);
      delete value.version;
      if (value.opts) value.opts = sortKeys(JSON.parse(value.opts));
      value = sortKeys(value);
    } else if (type === 'list') value = await redis.lrange(key, 0, -1);
    else if (type === 'zset') value = await redis.zrange(key, 0, -1, 'WITHSCORES');
    else if (type === 'stream') value = (await redis.xrange(key, '-', '+')).map(([, fields]) => fields);
    else value = await redis.get(key);
    out[`${suffix} (${type})`] = value;
  }
  return out;
}

async function runAdd(opts) {
  if (!opts.jobs) throw new Error('--jobs is required');
  const jobs = JSON.parse(fs.readFileSync(opts.jobs, 'utf8'));
  const redis = new Redis(opts.url);
  const result = await referenceAdd(redis, opts.prefix, opts.queue, jobs, Date.now());
  await redis.quit();
  console.log(JSON.stringify({ added: result[0], duplicated: result[1] }));
}

const opts = parseArgs(process.argv);
(opts.mode === 'compare' ? runCompare(opts) : opts.mode === 'add' ? runAdd(opts) : Promise.reject(new Error('mode: compare or add')))
  .catch((err) => { console.error(`bullmq_format_check: ${err.stack || err}`); process.exit(2); });
