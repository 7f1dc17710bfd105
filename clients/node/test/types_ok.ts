// Compiled (not run) by test/e2e/clients_node.sh: the jobbuf types accept this program.
import { stage, Queue, JobbufOptionError } from 'jobbuf';
type PoolClient = { query(text: string, values?: unknown[]): Promise<unknown> };

export async function signup(client: PoolClient): Promise<string | null> {
  const queue = new Queue<{ to: string }>('mail', { client, defaultJobOptions: { attempts: 3 } });
  const job = await queue.add('welcome', { to: 'a@example.com' }, { delay: 60_000, priority: 2, backoff: { type: 'exponential', delay: 1000 } });
  await queue.addBulk([{ name: 'welcome', data: { to: 'b@example.com' }, opts: { removeOnComplete: 100 } }]);
  if (job.jobbufId.length === 0) throw new JobbufOptionError('impossible');
  return stage(client, 'events', { kind: 'signup' }, { runAt: new Date(), uniqueKey: 'signup:a', partitionKey: 'a' });
}
