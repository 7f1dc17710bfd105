// Queue: BullMQ's Queue producer API (new Queue(name, opts), add, addBulk) staging into the
// jobbuf queue that delivers into the BullMQ queue `name` (SQL jobbuf_queue_for), inside the
// caller's transaction. Job options jobbuf carries are carried; every other option is refused
// with an error naming it, never ignored.
'use strict';

const { runnerFor } = require('./connection.cjs');
const { payloadText, checkedText } = require('./stage.cjs');

// The options jobbuf's bullmq target writes into the job (SPEC "Job frameworks"); delay becomes
// the staged job's run_at (now + delay, on the database's clock).
const CARRIED = ['priority', 'attempts', 'backoff', 'removeOnComplete', 'removeOnFail'];
const REASONS = {
  jobId: 'jobbuf derives the BullMQ job id from the jobbuf job id; to stage a job at most once while an equal one waits, use stage(client, queue, payload, { uniqueKey })',
  deduplication: 'jobbuf derives the BullMQ job id from the jobbuf job id; use stage(client, queue, payload, { uniqueKey })',
  debounce: 'jobbuf derives the BullMQ job id from the jobbuf job id; use stage(client, queue, payload, { uniqueKey })',
  repeat: 'repeatable jobs need BullMQ\'s own job scheduler (Queue.upsertJobScheduler on a BullMQ Queue)',
  parent: 'flows (parent/child jobs) need BullMQ\'s FlowProducer',
  lifo: 'jobbuf adds every job to the end of the wait list, as BullMQ does without lifo',
  timestamp: 'jobbuf sets the job\'s timestamp when it stages the job',
};

class JobbufOptionError extends TypeError {}

function refuse(option, where) {
  const why = REASONS[option] || `jobbuf carries only delay, ${CARRIED.join(', ')}`;
  throw new JobbufOptionError(`jobbuf: the BullMQ option "${option}"${where} cannot be carried: ${why}`);
}

function checkJobOptions(opts, where) {
  const carried = {};
  let delay = null;
  for (const [key, value] of Object.entries(opts || {})) {
    if (value === undefined) continue;
    if (key === 'delay') {
      if (!Number.isInteger(value) || value < 0) {
        throw new JobbufOptionError(`jobbuf: the BullMQ option "delay"${where} must be a non-negative integer of milliseconds, not ${JSON.stringify(value)}`);
      }
      if (value > 0) delay = value;
    } else if (CARRIED.includes(key)) {
      carried[key] = value;
    } else {
      refuse(key, where);
    }
  }
  return { carried, delay };
}

const QUEUE_OPTIONS = new Set(['client', 'defaultJobOptions']);
const QUEUE_REASONS = {
  connection: 'jobbuf\'s worker writes to Redis; this Queue writes to PostgreSQL through `client`',
  prefix: 'set the jobbuf queue\'s "prefix" option (jobbuf_alter_queue) instead',
};

// One statement for any number of jobs: the queue lookup, then jobbuf_stage for each, ids in the
// order given. $2 is a JSON array of {"payload", "delay"}.
const ADD_SQL =
  'SELECT jobbuf_stage(q.name, j.job->\'payload\', ' +
  'pg_catalog.clock_timestamp() + (j.job->>\'delay\')::float8 * interval \'1 millisecond\')::text AS id ' +
  'FROM (SELECT jobbuf_queue_for(\'bullmq\', $1::text) AS name) q, ' +
  'pg_catalog.jsonb_array_elements($2::jsonb) WITH ORDINALITY AS j(job, n) ORDER BY j.n';

class Queue {
  constructor(name, opts = {}) {
    if (typeof name !== 'string' || name === '') throw new TypeError('jobbuf: a Queue needs the BullMQ queue name');
    checkedText('the BullMQ queue name', name);
    for (const key of Object.keys(opts || {})) {
      if (QUEUE_OPTIONS.has(key)) continue;
      throw new JobbufOptionError(`jobbuf: the Queue option "${key}" cannot be carried: ` +
        (QUEUE_REASONS[key] || 'a jobbuf Queue takes { client, defaultJobOptions }'));
    }
    if (!opts || opts.client == null) {
      throw new TypeError('jobbuf: new Queue(name, { client }) needs the connection or transaction object to stage through');
    }
    this.name = name;
    this.client = opts.client;
    this.defaultJobOptions = opts.defaultJobOptions || {};
    checkJobOptions(this.defaultJobOptions, ' (in defaultJobOptions)');
    this._run = runnerFor(opts.client);
  }

  // add(name, data, opts): resolves to { jobbufId, name, data, opts, queueName }. The BullMQ job
  // id is assigned when jobbuf's worker delivers the job (derived from jobbufId).
  async add(name, data, opts) {
    return (await this.addBulk([{ name, data, opts }]))[0];
  }

  async addBulk(jobs) {
    if (!Array.isArray(jobs)) throw new TypeError('jobbuf: addBulk takes an array of { name, data, opts }');
    if (jobs.length === 0) return [];
    const prepared = jobs.map((job, i) => {
      if (typeof job.name !== 'string') throw new TypeError(`jobbuf: job ${i}: name must be a string`);
      const opts = { ...this.defaultJobOptions, ...(job.opts || {}) };
      const { carried, delay } = checkJobOptions(opts, jobs.length > 1 ? ` (job ${i})` : '');
      const payload = { name: job.name, data: job.data === undefined ? {} : job.data };
      if (Object.keys(carried).length > 0) payload.opts = carried;
      return { payload, delay, opts };
    });
    const batch = '[' + prepared.map((p) => `{"payload":${payloadText(p.payload)},"delay":${p.delay === null ? 'null' : p.delay}}`).join(',') + ']';
    const rows = await this._run(ADD_SQL, [this.name, batch]);
    return rows.map((row, i) => ({
      jobbufId: row.id, name: jobs[i].name, data: prepared[i].payload.data, opts: prepared[i].opts, queueName: this.name,
    }));
  }

  // BullMQ's Queue has close(); here there is nothing to close (the client is the caller's).
  async close() {}
}

module.exports = { Queue, JobbufOptionError };
