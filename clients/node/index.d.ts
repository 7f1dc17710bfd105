// Types of the jobbuf Node.js client (both the CommonJS and the ES module entry).

/** A node-postgres Client/PoolClient, or the transaction object of Knex, Drizzle, Sequelize or TypeORM. */
export type TransactionClient = unknown;

export interface StageOptions {
  /** Hold the job until then (a Date, or a timestamptz string Postgres parses). */
  runAt?: Date | string | null;
  /** While a job with the same (queue, uniqueKey) is staged and not delivered, stage nothing and return null. */
  uniqueKey?: string | null;
  partitionKey?: string | null;
}

/** Stages one job in the caller's transaction; resolves to the jobbuf job id (a bigint as a string), or null (uniqueKey). */
export function stage(client: TransactionClient, queue: string, payload: unknown, options?: StageOptions): Promise<string | null>;

export type BackoffOptions = number | { type: 'fixed' | 'exponential'; delay?: number };
export type KeepJobs = boolean | number | { age?: number; count?: number; limit?: number };

/** The BullMQ job options jobbuf carries; any other option is refused with a JobbufOptionError. */
export interface JobsOptions {
  delay?: number;
  priority?: number;
  attempts?: number;
  backoff?: BackoffOptions;
  removeOnComplete?: KeepJobs;
  removeOnFail?: KeepJobs;
}

export interface QueueOptions {
  client: TransactionClient;
  defaultJobOptions?: JobsOptions;
}

export interface StagedJob<DataType = any> {
  /** The jobbuf job id; the BullMQ job id is derived from it when the job is delivered. */
  jobbufId: string;
  name: string;
  data: DataType;
  opts: JobsOptions;
  queueName: string;
}

export class Queue<DataType = any> {
  constructor(name: string, opts: QueueOptions);
  readonly name: string;
  add(name: string, data: DataType, opts?: JobsOptions): Promise<StagedJob<DataType>>;
  addBulk(jobs: { name: string; data: DataType; opts?: JobsOptions }[]): Promise<StagedJob<DataType>[]>;
  close(): Promise<void>;
}

export class JobbufOptionError extends TypeError {}
export class JobbufConnectionError extends TypeError {}
/** A payload, queue name, uniqueKey or partitionKey holds a NUL character or a lone UTF-16 surrogate, which PostgreSQL cannot store (refused before any statement). */
export class JobbufValueError extends TypeError {}
