// Compiled (not run) by test/e2e/clients_node.sh: the jobbuf types must reject this program
// (jobId is a BullMQ option jobbuf refuses).
import { Queue } from 'jobbuf';

export async function wrong(client: unknown): Promise<void> {
  await new Queue('mail', { client }).add('welcome', {}, { jobId: 'x' });
}
