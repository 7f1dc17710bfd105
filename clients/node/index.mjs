// jobbuf for Node.js (ES module entry): the same objects as the CommonJS entry (index.cjs).
import jobbuf from './index.cjs';

export const { stage, Queue, JobbufOptionError, JobbufConnectionError, JobbufValueError } = jobbuf;
export default jobbuf;
