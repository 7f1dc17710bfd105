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

function optionalText(name, value) {
  if (value == null) return null;
  if (typeof value !== 'string') throw new TypeError(`jobbuf: ${name} must be a string, not ${typeof value}`);
  return value;
}

class JobbufValueError extends TypeError {}

// A \u0000 escape that JSON.stringify wrote for a NUL character (an odd run of backslashes).
const NUL_ESCAPE = /(?<!\\)(?:\\\\)*\\u0000/;

// The payload's JSON text. A NUL character, which jsonb cannot store (PostgreSQL would refuse the
// statement and abort the caller's transaction), is refused before any statement.
function payloadText(payload) {
  if (payload === undefined) throw new TypeError('jobbuf: the payload is undefined (nothing JSON can carry)');
  const text = JSON.stringify(payload);
  if (NUL_ESCAPE.test(text)) {
    throw new JobbufValueError('jobbuf: the payload contains a NUL character (\\u0000), which PostgreSQL\'s jsonb ' +
      'cannot store; nothing was staged and your transaction is untouched. Remove it or encode the value (e.g. Base64).');
  }
  return text;
}

async function stage(client, queue, payload, options = {}) {
  for (const key of Object.keys(options || {})) {
    if (!STAGE_OPTIONS.has(key)) {
      throw new TypeError(`jobbuf: stage() has no option "${key}" (it takes runAt, uniqueKey, partitionKey)`);
    }
  }
  if (typeof queue !== 'string') throw new TypeError('jobbuf: the queue name must be a string');
  const { runAt, uniqueKey, partitionKey } = options || {};
  const params = [queue, payloadText(payload), runAtText(runAt),
    optionalText('uniqueKey', uniqueKey), optionalText('partitionKey', partitionKey)];
  const rows = await runnerFor(client)(STAGE_SQL, params);
  return rows[0].id;
}

module.exports = { stage, payloadText, JobbufValueError };
