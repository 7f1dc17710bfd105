// Helpers of the Node client's end-to-end test scripts (transactions.cjs, list_stream.cjs):
// TAP-like checks, the rollback marker, a node-postgres transaction on a pool, and the
// real-consumer test package's modules (ioredis, bullmq at their pinned versions).
'use strict';

const path = require('path');
const { createRequire } = require('module');

const consumers = createRequire(path.join(__dirname, '../../../test/consumers/node/package.json'));

let failures = 0;
function check(ok, what, detail) {
  if (ok) console.log(`ok - ${what}`);
  else { failures++; console.log(`not ok - ${what}${detail ? `: ${detail}` : ''}`); }
}

async function expectThrow(what, fn, pattern) {
  try {
    await fn();
    check(false, what, 'no error');
  } catch (err) {
    check(pattern.test(err.message), what, err.message);
  }
}

class Rollback extends Error {}

// pgTransaction(pool): a function running body(client) between BEGIN and COMMIT (ROLLBACK when
// it throws) on one PoolClient.
function pgTransaction(pool) {
  return async (body) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await body(client);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK');
      throw err;
    } finally {
      client.release();
    }
  };
}

// main({ stage, verify }): runs the phase named by the first argument, exits 1 on any failure.
function main(phases) {
  const [mode, ...args] = process.argv.slice(2);
  (async () => {
    if (!phases[mode]) throw new Error(`usage: ${path.basename(process.argv[1])} ${Object.keys(phases).join('|')} ...`);
    await phases[mode](...args);
    process.exit(failures ? 1 : 0);
  })().catch((err) => { console.error(err.stack || err); process.exit(2); });
}

module.exports = { consumers, check, expectThrow, Rollback, pgTransaction, main };
