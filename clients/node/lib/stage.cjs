// stage(): one job staged with jobbuf_stage through the caller's transaction (lib/connection.cjs
// finds the connection). Returns the jobbuf job id as a string (a bigint), or null when a job
// with the same uniqueKey is still staged (jobbuf stages nothing then).
'use strict';

const { runnerFor } = require('./connection.cjs');

const STAGE_SQL = 'SELECT jobbuf_stage($1::text, $2::jsonb, $3::timestamptz, $4::text, $5::text)::text AS id';
const STAGE_OPTIONS = new Set(['runAt', 'uniqueKey', 'partitionKey']);

function runAtText(runAt) {
  if (runAt == null) return null;
  if (runAt instanceof Date) {
    if (Number.isNaN(runAt.getTime())) throw new TypeError('jobbuf: runAt is an invalid Date');
    return runAt.toISOString();
  }
  if (typeof runAt === 'string') return runAt; // Postgres parses it, or refuses it
  throw new TypeError(`jobbuf: runAt must be a Date or a timestamptz string, not ${typeof runAt}`);
}

class JobbufValueError extends TypeError {}

const UNTOUCHED = 'nothing was staged and your transaction is untouched';
// A UTF-16 surrogate without its pair: UTF-8 cannot carry it (node-postgres would send U+FFFD).
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

// A text parameter (queue, uniqueKey, partitionKey): a NUL character, which PostgreSQL's text
// cannot hold (it would refuse the statement and abort the caller's transaction), and a lone
// surrogate are refused before any statement.
function checkedText(name, value) {
  if (typeof value !== 'string') throw new TypeError(`jobbuf: ${name} must be a string, not ${typeof value}`);
  if (value.includes('\u0000')) {
    throw new JobbufValueError(`jobbuf: ${name} contains a NUL character (\\u0000), which PostgreSQL's text cannot store; ${UNTOUCHED}.`);
  }
  if (LONE_SURROGATE.test(value)) {
    throw new JobbufValueError(`jobbuf: ${name} contains a lone UTF-16 surrogate, which UTF-8 cannot carry; ${UNTOUCHED}.`);
  }
  return value;
}

function optionalText(name, value) {
  return value == null ? null : checkedText(name, value);
}

// A \u0000 escape that JSON.stringify wrote for a NUL character (an odd run of backslashes).
const NUL_ESCAPE = /(?<!\\)(?:\\\\)*\\u0000/;
// A surrogate escape: JSON.stringify writes a surrogate as \uD800-\uDFFF only when it is alone
// (a pair stays as its characters); PostgreSQL's jsonb refuses such an escape.
const SURROGATE_ESCAPE = /(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F][0-9a-fA-F]{2}/;

// The payload's JSON text. A NUL character and a lone surrogate, which jsonb cannot store
// (PostgreSQL would refuse the statement and abort the caller's transaction), are refused before
// any statement.
function payloadText(payload) {
  if (payload === undefined) throw new TypeError('jobbuf: the payload is undefined (nothing JSON can carry)');
  const text = JSON.stringify(payload);
  if (NUL_ESCAPE.test(text)) {
    throw new JobbufValueError('jobbuf: the payload contains a NUL character (\\u0000), which PostgreSQL\'s jsonb ' +
      'cannot store; nothing was staged and your transaction is untouched. Remove it or encode the value (e.g. Base64).');
  }
  if (SURROGATE_ESCAPE.test(text)) {
    throw new JobbufValueError('jobbuf: the payload contains a lone UTF-16 surrogate (a string cut inside a ' +
      `character pair), which PostgreSQL's jsonb cannot store; ${UNTOUCHED}.`);
  }
  return text;
}

async function stage(client, queue, payload, options = {}) {
  for (const key of Object.keys(options || {})) {
    if (!STAGE_OPTIONS.has(key)) {
      throw new TypeError(`jobbuf: stage() has no option "${key}" (it takes runAt, uniqueKey, partitionKey)`);
    }
  }
  const { runAt, uniqueKey, partitionKey } = options || {};
  const params = [checkedText('the queue name', queue), payloadText(payload), runAtText(runAt),
    optionalText('uniqueKey', uniqueKey), optionalText('partitionKey', partitionKey)];
  const rows = await runnerFor(client)(STAGE_SQL, params);
  return rows[0].id;
}

module.exports = { stage, payloadText, checkedText, JobbufValueError };
