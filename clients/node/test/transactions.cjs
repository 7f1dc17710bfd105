// End-to-end test of the jobbuf Node client (run by test/e2e/clients_node.sh, which starts the
// servers, a stock BullMQ Worker and this script):
//   node transactions.cjs stage  PG_URL EXPECTED.json   stages BullMQ jobs with Queue.add /
//        addBulk / stage() inside node-postgres, Knex, Drizzle, Sequelize and TypeORM transactions,
//        every 10th one rolled back, and checks the refusals; writes what must run
//   node transactions.cjs verify REDIS_URL EXPECTED.json RAN.jsonl
//        checks what the Worker ran: committed jobs once, rolled-back ones never, delayed ones
//        not before their delay, opts (priority, attempts, backoff, removeOnComplete) honoured
// Prints TAP-like "ok"/"not ok" lines; exits 1 on any failure.
'use strict';

const fs = require('fs');
const jobbuf = require('..');
const { consumers, check, expectThrow, Rollback, pgTransaction, main } = require('./support.cjs');

const expected = [];
let txCount = 0;

// job(name, key, opts): one planned job; the key identifies it in what the Worker ran.
function plan(via, name, key, opts = {}) {
  return { via, name, data: { key, via }, opts, key };
}

// Options varied by job number: delays (some), priorities, a job failing once (attempts 2 with a
// fixed backoff), removeOnComplete.
function optsFor(n) {
  const o = {};
  if (n % 4 === 1) o.delay = 1000 + (n % 3) * 500;
  if (n % 5 === 2) o.priority = 1 + (n % 7);
  if (n % 6 === 3) o.removeOnComplete = true;
  return o;
}

async function runTransaction(via, begin, jobsOf) {
  const n = txCount++;
  const rollBack = n % 10 === 7;
  const planned = [];
  try {
    await begin(async (tx) => {
      for (const [i, j] of jobsOf(n).entries()) {
        const p = plan(via, j.name || (n % 9 === 4 && i === 0 ? 'flaky' : 'send'), `${via}-${n}-${i}`, j.opts || optsFor(n + i));
        if (p.name === 'flaky') Object.assign(p.opts, { attempts: 2, backoff: { type: 'fixed', delay: 200 } });
        p.stagedBefore = Date.now();
        p.id = await j.add(tx, p);
        planned.push(p);
      }
      if (rollBack) throw new Rollback();
    });
  } catch (err) {
    if (!(err instanceof Rollback)) throw err;
  }
  for (const p of planned) expected.push({ ...p, committed: !rollBack });
}

// The three ways to stage a BullMQ job.
const viaAdd = { add: async (tx, p) => (await new jobbuf.Queue('mail', { client: tx }).add(p.name, p.data, p.opts)).jobbufId };
const viaStage = {
  add: async (tx, p) => {
    const opts = { ...p.opts };
    const delay = opts.delay; delete opts.delay;
    const payload = { name: p.name, data: p.data };
    if (Object.keys(opts).length) payload.opts = opts;
    return jobbuf.stage(tx, 'mail_jobs', payload, delay ? { runAt: new Date(Date.now() + delay) } : {});
  },
};
function bulk(count) {
  const jobs = [];
  const ids = [];
  // addBulk: the plans are collected, then staged in one call by the last one.
  for (let i = 0; i < count; i++) {
    jobs.push({
      add: async (tx, p) => {
        ids.push(p);
        if (ids.length < count) return null;
        const staged = await new jobbuf.Queue('mail', { client: tx })
          .addBulk(ids.map((q) => ({ name: q.name, data: q.data, opts: q.opts })));
        staged.forEach((s, k) => { ids[k].id = s.jobbufId; });
        return staged[count - 1].jobbufId;
      },
    });
  }
  return jobs;
}
const mix = (n) => (n % 3 === 0 ? [viaAdd, viaStage] : n % 3 === 1 ? bulk(3) : [viaStage]);

async function stagePhase(pgUrl, outFile) {
  const pg = require('pg');
  const pool = new pg.Pool({ connectionString: pgUrl, max: 4 });

  // node-postgres: BEGIN / COMMIT or ROLLBACK on one PoolClient.
  const pgBegin = pgTransaction(pool);
  for (let i = 0; i < 40; i++) await runTransaction('pg', pgBegin, mix);

  const knex = require('knex')({ client: 'pg', connection: pgUrl, pool: { min: 0, max: 2 } });
  for (let i = 0; i < 40; i++) await runTransaction('knex', (body) => knex.transaction(body), mix);

  const { drizzle } = require('drizzle-orm/node-postgres');
  const db = drizzle(pool);
  for (let i = 0; i < 10; i++) await runTransaction('drizzle', (body) => db.transaction(body), mix);

  const { Sequelize } = require('sequelize');
  const sequelize = new Sequelize(pgUrl, { logging: false, pool: { max: 2 } });
  for (let i = 0; i < 10; i++) await runTransaction('sequelize', (body) => sequelize.transaction(body), mix);

  const { DataSource } = require('typeorm');
  const dataSource = new DataSource({ type: 'postgres', url: pgUrl, entities: [], poolSize: 2 });
  await dataSource.initialize();
  for (let i = 0; i < 10; i++) await runTransaction('typeorm', (body) => dataSource.transaction(body), mix);

  // Refusals: options jobbuf cannot carry fail before any statement, so the transaction goes on
  // and commits the job staged before them.
  await pgBegin(async (client) => {
    const queue = new jobbuf.Queue('mail', { client });
    const p = plan('refusals', 'send', 'refusals-kept');
    p.stagedBefore = Date.now();
    p.id = (await queue.add(p.name, p.data)).jobbufId;
    for (const [option, value] of [['jobId', 'x'], ['lifo', true], ['repeat', { every: 1000 }],
      ['parent', { id: '1', queue: 'bull:q' }], ['deduplication', { id: 'd' }], ['sizeLimit', 10]]) {
      await expectThrow(`add refuses the option ${option}, naming it`,
        () => queue.add('send', { key: `refused-${option}` }, { [option]: value }),
        new RegExp(`BullMQ option "${option}".*cannot be carried`));
    }
    await expectThrow('addBulk refuses a job with an option it cannot carry (and stages none of them)',
      () => queue.addBulk([{ name: 'send', data: { key: 'refused-bulk-0' } },
        { name: 'send', data: { key: 'refused-bulk-1' }, opts: { lifo: true } }]),
      /option "lifo" \(job 1\)/);
    await expectThrow('delay must be a non-negative integer', () => queue.add('send', { key: 'refused-delay' }, { delay: -5 }), /"delay"/);
    await expectThrow('new Queue refuses a Redis connection option', () => new jobbuf.Queue('mail', { client, connection: {} }), /"connection"/);
    await expectThrow('new Queue refuses a defaultJobOptions it cannot carry', () => new jobbuf.Queue('mail', { client, defaultJobOptions: { lifo: true } }), /"lifo" \(in defaultJobOptions\)/);
    await expectThrow('a NUL character is refused before any statement (add)',
      () => queue.add('send', { key: 'refused-nul', text: 'a\u0000b' }), /NUL character/);
    await expectThrow('a NUL character is refused before any statement (stage)',
      () => jobbuf.stage(client, 'mail_jobs', { name: 'send', data: { ['k\u0000']: 1 } }), /NUL character/);
    await expectThrow('a lone surrogate in the payload is refused before any statement (stage)',
      () => jobbuf.stage(client, 'mail_jobs', { name: 'send', data: { text: 'cut \uD83D' } }), /lone UTF-16 surrogate/);
    await expectThrow('a lone surrogate in the payload is refused before any statement (add)',
      () => queue.add('send', { key: 'refused-surrogate', text: '\uDE00 alone' }), /lone UTF-16 surrogate/);
    await expectThrow('a NUL character in uniqueKey is refused before any statement',
      () => jobbuf.stage(client, 'mail_jobs', { name: 'a', data: {} }, { uniqueKey: 'k\u0000' }), /uniqueKey contains a NUL/);
    await expectThrow('a NUL character in partitionKey is refused before any statement',
      () => jobbuf.stage(client, 'mail_jobs', { name: 'a', data: {} }, { partitionKey: 'p\u0000' }), /partitionKey contains a NUL/);
    await expectThrow('a NUL character in the queue name is refused before any statement',
      () => jobbuf.stage(client, 'mail\u0000jobs', { name: 'a', data: {} }), /queue name contains a NUL/);
    await expectThrow('a lone surrogate in uniqueKey is refused before any statement',
      () => jobbuf.stage(client, 'mail_jobs', { name: 'a', data: {} }, { uniqueKey: 'k\uD800' }), /uniqueKey contains a lone/);
    await expectThrow('stage() refuses an unknown option', () => jobbuf.stage(client, 'mail_jobs', { name: 'a', data: {} }, { delay: 5 }), /no option "delay"/);
    expected.push({ ...p, committed: true });
  });

  await expectThrow('stage() refuses a pg.Pool (it would stage outside the transaction)',
    () => jobbuf.stage(pool, 'mail_jobs', { name: 'a', data: {} }), /pg\.Pool/);
  await expectThrow('stage() refuses the Knex instance (only a trx pins the transaction)',
    () => jobbuf.stage(knex, 'mail_jobs', { name: 'a', data: {} }), /Knex instance/);
  await expectThrow('stage() refuses the Drizzle db object', () => jobbuf.stage(db, 'mail_jobs', { name: 'a', data: {} }), /Drizzle database/);
  await expectThrow("stage() refuses TypeORM's dataSource.manager", () => jobbuf.stage(dataSource.manager, 'mail_jobs', { name: 'a', data: {} }), /dataSource\.manager/);

  // A BullMQ queue no jobbuf queue delivers into: the error names the call to make, and aborts
  // (only) the caller's transaction.
  await expectThrow('a BullMQ queue without a jobbuf queue names the jobbuf_create_queue call',
    () => pgBegin((client) => new jobbuf.Queue('no-such', { client }).add('send', {})),
    /jobbuf_create_queue\('no-such', 'bullmq'\)/);

  // unique_key: a second job with the same key while the first is staged returns null.
  await pgBegin(async (client) => {
    const first = await jobbuf.stage(client, 'mail_jobs', { name: 'send', data: { key: 'unique-1', via: 'unique' } }, { uniqueKey: 'u1' });
    const second = await jobbuf.stage(client, 'mail_jobs', { name: 'send', data: { key: 'unique-2', via: 'unique' } }, { uniqueKey: 'u1' });
    check(typeof first === 'string' && /^\d+$/.test(first), 'stage() returns the job id as a string', String(first));
    check(second === null, 'stage() returns null for a uniqueKey already staged', String(second));
    expected.push({ ...plan('unique', 'send', 'unique-1'), id: first, stagedBefore: 0, committed: true });
    expected.push({ ...plan('unique', 'send', 'unique-2'), id: null, stagedBefore: 0, committed: false });
  });

  await Promise.all([pool.end(), knex.destroy(), sequelize.close(), dataSource.destroy()]);
  fs.writeFileSync(outFile, JSON.stringify(expected));
  const committed = expected.filter((e) => e.committed);
  const runs = committed.reduce((sum, e) => sum + (e.name === 'flaky' ? 2 : 1), 0);
  console.log(`# staged ${expected.length} jobs in ${txCount + 3} transactions: ${committed.length} committed, ` +
    `${expected.length - committed.length} rolled back or deduplicated; ${runs} runs expected`);
  console.log(`runs ${runs}`);
}

async function verifyPhase(redisUrl, expectedFile, ranFile) {
  const want = JSON.parse(fs.readFileSync(expectedFile, 'utf8'));
  const ran = fs.readFileSync(ranFile, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const byKey = new Map();
  for (const r of ran) {
    const k = r.data && r.data.key;
    if (!byKey.has(k)) byKey.set(k, []);
    byKey.get(k).push(r);
  }
  const problems = { twice: [], lost: [], rolledBackRan: [], early: [], opts: [], unexpected: [] };
  const Redis = consumers('ioredis');
  const redis = new Redis(redisUrl);
  const vias = new Set();
  let delayed = 0;
  for (const e of want) {
    const runs = byKey.get(e.key) || [];
    byKey.delete(e.key);
    if (!e.committed) {
      if (runs.length) problems.rolledBackRan.push(e.key);
      continue;
    }
    vias.add(e.via);
    const ids = new Set(runs.map((r) => r.id));
    const wantRuns = e.name === 'flaky' ? 2 : 1;
    if (runs.length === 0) { problems.lost.push(e.key); continue; }
    if (ids.size !== 1 || runs.length !== wantRuns) problems.twice.push(`${e.key}: ${runs.length} runs of ${ids.size} BullMQ jobs`);
    const first = runs[0];
    const delay = e.opts.delay || 0;
    if (delay) {
      delayed++;
      if (first.ran_at < e.stagedBefore + delay) problems.early.push(`${e.key} ran ${e.stagedBefore + delay - first.ran_at} ms early`);
    }
    const o = first.opts || {};
    if ((e.opts.priority || 0) !== (first.priority || 0)) problems.opts.push(`${e.key}: priority ${first.priority}, wanted ${e.opts.priority}`);
    if (e.name === 'flaky' && (o.attempts !== 2 || !o.backoff || o.backoff.type !== 'fixed' || o.backoff.delay !== 200)) {
      problems.opts.push(`${e.key}: opts ${JSON.stringify(o)}`);
    }
    if (e.name === 'flaky' && runs[1] && runs[1].attemptsMade !== 1) problems.opts.push(`${e.key}: second run attemptsMade ${runs[1].attemptsMade}`);
    const kept = await redis.exists(`bull:mail:${first.id}`);
    if (e.opts.removeOnComplete && kept) problems.opts.push(`${e.key}: removeOnComplete, but bull:mail:${first.id} is kept`);
    if (!e.opts.removeOnComplete && e.name !== 'flaky' && !kept) problems.opts.push(`${e.key}: bull:mail:${first.id} removed without removeOnComplete`);
  }
  for (const k of byKey.keys()) problems.unexpected.push(k);
  await redis.quit();

  const committed = want.filter((e) => e.committed).length;
  check(want.length > 100 && committed < want.length, `the plan has committed and rolled-back jobs (${committed} of ${want.length})`);
  check(['pg', 'knex', 'drizzle', 'sequelize', 'typeorm', 'refusals', 'unique'].every((v) => vias.has(v)),
    `committed jobs came through every library (${[...vias].join(', ')})`);
  check(delayed > 10, `some committed jobs were delayed (${delayed})`);
  check(want.some((e) => e.committed && e.name === 'flaky'), 'some committed jobs fail once (attempts 2)');
  check(problems.lost.length === 0, 'every committed job ran', problems.lost.slice(0, 5).join(', '));
  check(problems.twice.length === 0, 'every committed job is one BullMQ job that ran once (twice with attempts 2 and a failure)', problems.twice.slice(0, 5).join('; '));
  check(problems.rolledBackRan.length === 0, 'no rolled-back job ran', problems.rolledBackRan.slice(0, 5).join(', '));
  check(problems.early.length === 0, 'no delayed job ran before its delay', problems.early.slice(0, 5).join('; '));
  check(problems.opts.length === 0, 'priority, attempts, backoff and removeOnComplete honoured by the Worker', problems.opts.slice(0, 5).join('; '));
  check(problems.unexpected.length === 0, 'the Worker ran nothing else', problems.unexpected.slice(0, 5).join(', '));
}

main({ stage: stagePhase, verify: verifyPhase });
