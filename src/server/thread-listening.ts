// A worker thread that runs a uWebSockets.js app (a server's front-end thread, a gateway
// thread) reports `{ kind: 'listening' }` once it listens or `{ kind: 'failed', message }`.
import type { Worker } from 'node:worker_threads';

/** What such a thread posts while it starts (other kinds are ignored here). */
export interface StartMessage {
  readonly kind: string;
  readonly message?: string;
}

/**
 * Resolves when the thread `name`d listens; rejects when it reports a failure, fails,
 * exits or times out first.
 */
export function threadListening(worker: Worker, name: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`${name} did not listen within ${timeoutMs} ms`)), timeoutMs);
    const onMessage = (message: StartMessage): void => {
      if (message.kind === 'listening') done(null);
      else if (message.kind === 'failed') done(new Error(`${name}: ${message.message ?? 'failed'}`));
    };
    const onError = (err: Error): void => done(new Error(`${name} failed to start: ${err.message}`));
    const onExit = (code: number): void => done(new Error(`${name} exited during start-up with code ${code}`));
    const done = (err: Error | null): void => {
      clearTimeout(timer);
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
      if (err === null) resolve();
      else reject(err);
    };
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
  });
}
