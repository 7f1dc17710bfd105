// End-to-end test of stage() into `list` and `stream` queues (run by
// test/e2e/clients_node_list_stream.sh):
//   node list_stream.cjs stage  PG_URL EXPECTED.json   node-postgres and Knex transactions, every
//        10th rolled back, staging into the queues events_list and events_stream
//   node list_stream.cjs verify REDIS_URL EXPECTED.json  an ioredis consumer takes the list
//        (BLPOP) and reads the stream (XREADGROUP + XACK): each committed payload exactly once,
//        with the stream's id field the id stage() returned, no rolled-back one
'use strict';

const fs = require('fs');
const jobbuf = require('..');
const { consumers, check, Rollback, pgTransaction, main } = require('./support.cjs');

async function stagePhase(pgUrl, outFile) {
  const pg = require('pg');
  const pool = new pg.Pool({ connectionString: pgUrl, max: 2 });
  const knex = require('knex')({ client: 'pg', connection: pgUrl, pool: { min: 0, max: 2 } });
  const expected = [];
  const begins = {
    pg: pgTransaction(pool),
    knex: (body) => knex.transaction(body),
  };
  let n = 0;
  for (const via of ['pg', 'knex']) {
    for (let t = 0; t < 30; t++, n++) {
      const rollBack = n % 10 === 3;
      const staged = [];
      try {
        await begins[via](async (tx) => {
          for (const queue of ['events_list', 'events_stream']) {
            // Payloads of every JSON kind, with text that needs escaping.
            const payload = t % 4 === 0 ? [n, `tab\t"quote" é ✓ ${queue}`] : t % 4 === 1 ? `just text ${n} ${queue}`
              : { n, via, queue, nested: { list: [1, 1.5, null, true] } };
            staged.push({ queue, payload, id: await jobbuf.stage(tx, queue, payload) });
          }
          if (rollBack) throw new Rollback();
        });
      } catch (err) {
        if (!(err instanceof Rollback)) throw err;
      }
      for (const s of staged) expected.push({ ...s, committed: !rollBack });
    }
  }
  await Promise.all([pool.end(), knex.destroy()]);
  fs.writeFileSync(outFile, JSON.stringify(expected));
  console.log(`# staged ${expected.length} jobs, ${expected.filter((e) => e.committed).length} committed`);
}

async function verifyPhase(redisUrl, expectedFile) {
  const want = JSON.parse(fs.readFileSync(expectedFile, 'utf8'));
  const Redis = consumers('ioredis');
  const redis = new Redis(redisUrl);
  const canonical = (v) => JSON.stringify(v); // compared as parsed values: jsonb reorders keys
  const same = (a, b) => canonical(sortKeys(a)) === canonical(sortKeys(b));
  function sortKeys(v) {
    if (Array.isArray(v)) return v.map(sortKeys);
    if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
    return v;
  }

  // The list: BLPOP until it is empty (jobbuf delivered everything before this runs).
  const listed = [];
  for (;;) {
    const popped = await redis.blpop('jobbuf:events_list', 1);
    if (!popped) break;
    listed.push(JSON.parse(popped[1]));
  }
  // The stream: a consumer group from the start, XREADGROUP then XACK.
  await redis.xgroup('CREATE', 'jobbuf:events_stream', 'node', '0');
  const streamed = [];
  for (;;) {
    const reply = await redis.xreadgroup('GROUP', 'node', 'c1', 'COUNT', 100, 'STREAMS', 'jobbuf:events_stream', '>');
    if (!reply) break;
    for (const [entryId, fields] of reply[0][1]) {
      const f = {};
      for (let i = 0; i < fields.length; i += 2) f[fields[i]] = fields[i + 1];
      streamed.push({ id: f.id, payload: JSON.parse(f.payload) });
      await redis.xack('jobbuf:events_stream', 'node', entryId);
    }
  }
  const pending = await redis.xpending('jobbuf:events_stream', 'node');
  await redis.quit();

  for (const queue of ['events_list', 'events_stream']) {
    const mine = want.filter((e) => e.queue === queue);
    const committed = mine.filter((e) => e.committed);
    const rolledBack = mine.filter((e) => !e.committed);
    const got = queue === 'events_list' ? listed.map((payload) => ({ payload })) : streamed;
    check(committed.length > 0 && rolledBack.length > 0, `${queue}: committed (${committed.length}) and rolled-back (${rolledBack.length}) jobs staged`);
    check(got.length === committed.length, `${queue}: the consumer read ${got.length} entries, ${committed.length} committed`);
    // Payloads are unique per job (they carry n and the queue).
    const missing = committed.filter((e) => got.filter((g) => same(g.payload, e.payload)).length !== 1);
    check(missing.length === 0, `${queue}: each committed payload read exactly once`, missing.slice(0, 3).map((e) => JSON.stringify(e.payload)).join('; '));
    const leaked = rolledBack.filter((e) => got.some((g) => same(g.payload, e.payload)));
    check(leaked.length === 0, `${queue}: no rolled-back payload read`, leaked.slice(0, 3).map((e) => JSON.stringify(e.payload)).join('; '));
    if (queue === 'events_stream') {
      const wrongIds = committed.filter((e) => !got.some((g) => g.id === e.id && same(g.payload, e.payload)));
      check(wrongIds.length === 0, 'events_stream: each entry\'s id field is the id stage() returned', wrongIds.slice(0, 3).map((e) => e.id).join(', '));
      check(Number(pending[0]) === 0, `events_stream: nothing pending after the acks (${pending[0]})`);
    }
  }
}

main({ stage: stagePhase, verify: verifyPhase });
