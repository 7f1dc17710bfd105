// jobbuf for Node.js (CommonJS entry): stage() and the BullMQ-shaped Queue, both staging inside
// the caller's PostgreSQL transaction with the jobbuf extension.
'use strict';

const { stage, JobbufValueError } = require('./lib/stage.cjs');
const { Queue, JobbufOptionError } = require('./lib/queue.cjs');
const { JobbufConnectionError } = require('./lib/connection.cjs');

module.exports = { stage, Queue, JobbufOptionError, JobbufConnectionError, JobbufValueError };
