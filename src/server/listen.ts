// Binding a port with uWebSockets.js, alone or shared by the threads of one process.
//
// uWS binds with SO_REUSEPORT unless told otherwise, so a second server on a taken port
// would share it silently, each getting some of the connections (and, in memory, its own
// data). A one-thread server binds exclusively. Several threads of one server must share
// the port, so a second process could bind beside them: the first thread binds under a
// per-port lock after an exclusive check (bindSharedPort).

import { createServer, type Server } from 'node:net';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { uws } from './uws.js';
import { monotonicMs } from '../clock.js';

/** Exclusive: the listen fails if anything holds the port. */
const LISTEN_EXCLUSIVE_PORT = ((uws as unknown as Record<string, unknown>)['LIBUS_LISTEN_EXCLUSIVE_PORT'] as number | undefined) ?? 1;
/**
 * SO_REUSEPORT (uSockets sets it for every non-zero port without the exclusive flag): the
 * threads of one process each listen on the same port and Linux spreads the incoming
 * connections over them.
 */
const LISTEN_SHARED_PORT = 0;

/** The 4-argument listen the native addon has but the bundled types lack. */
interface ListenWithOptions {
  listen(host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void): unknown;
}

/** `App.close()` (closes every socket) exists in the native 20.30 addon, not in its types. */
interface ClosableApp {
  close?: () => void;
}

/** Bind `app`: exclusively, or `shared` on a port this process bound shared first (bindSharedPort). */
export function listenOn(app: TemplatedApp, host: string, port: number, shared: boolean): Promise<us_listen_socket> {
  if (shared && port === 0) throw new Error('a shared port must be chosen first (bindSharedPort)');
  return new Promise((resolve, reject) => {
    (app as unknown as ListenWithOptions).listen(host, port, shared ? LISTEN_SHARED_PORT : LISTEN_EXCLUSIVE_PORT, (socket) => {
      if (socket === false) reject(new Error(`cannot listen on ${host}:${port} (address in use or not available)`));
      else resolve(socket);
    });
  });
}

/** The port a listen socket is bound to (the real one after a listen on 0). */
export function listenPort(socket: us_listen_socket): number {
  return uws.us_socket_local_port(socket as unknown as Parameters<typeof uws.us_socket_local_port>[0]);
}

/** Stop accepting on a listen socket (connections already accepted stay open); null for the caller's field. */
export function stopListening(socket: us_listen_socket | null): null {
  if (socket !== null) uws.us_listen_socket_close(socket as unknown as Parameters<typeof uws.us_listen_socket_close>[0]);
  return null;
}

/** Close every socket of `app`, listening and connected. */
export function closeApp(app: TemplatedApp): void {
  const closable = app as unknown as ClosableApp;
  if (typeof closable.close === 'function') closable.close();
}

/** How long a claim waits for another process that is binding the same port. */
const PORT_LOCK_WAIT_MS = 1000;

/**
 * Bind a port shared by this process's threads: `bind(port)` binds the first thread's
 * socket with SO_REUSEPORT (and may do more; it returns what the caller needs). Two
 * processes must not both get there, so it runs under the port's lock: a Linux abstract
 * socket named after the port number, which one process holds at a time and the kernel
 * frees when the process ends. Under the lock the port is checked free by an exclusive bind
 * (let go at once); once `bind` has bound the port shared, that check fails for everyone
 * else, so the lock is released then (held longer, it refused a server on another address
 * with the same port number: a review). The process's other threads bind later, beside a
 * socket that already holds the port. Port 0 is chosen by an exclusive bind first, then
 * claimed like any other. Elsewhere than Linux there is no lock (the check alone).
 */
export async function bindSharedPort<T>(host: string, port: number, bind: (port: number) => Promise<T>): Promise<T> {
  const chosen = port !== 0 ? port : await probeExclusive(host, 0);
  const lock = process.platform === 'linux' ? await portLock(host, chosen) : null;
  try {
    await probeExclusive(host, chosen);
    return await bind(chosen);
  } finally {
    lock?.close();
  }
}

/** The port an exclusive bind of `port` gets now (the kernel's choice for 0), let go at once. */
async function probeExclusive(host: string, port: number): Promise<number> {
  const probe = uws.App();
  try {
    return listenPort(await listenOn(probe, host, port, false));
  } finally {
    closeApp(probe);
  }
}

/** The port's lock, waiting up to PORT_LOCK_WAIT_MS for a process that holds it. */
async function portLock(host: string, port: number): Promise<Server> {
  const until = monotonicMs() + PORT_LOCK_WAIT_MS;
  for (;;) {
    const lock = await tryPortLock(port);
    if (lock !== null) return lock;
    if (monotonicMs() >= until) throw new Error(`cannot listen on ${host}:${port} (another svcdb process is binding it)`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The port's lock, or null when another process holds it. */
function tryPortLock(port: number): Promise<Server | null> {
  return new Promise((resolve, reject) => {
    const lock = createServer();
    lock.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') resolve(null);
      else reject(err);
    });
    // A lock must not keep the process alive by itself.
    lock.listen(`\0svcdb-port-${port}`, () => resolve(lock.unref()));
  });
}
