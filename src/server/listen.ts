// Binding a port with uWebSockets.js, alone or shared by the threads of one process.
//
// uWS binds with SO_REUSEPORT unless told otherwise, so a second server on a taken port
// would share it silently, each getting some of the connections (and, in memory, its own
// data). A one-thread server binds exclusively. Several threads of one server must share
// the port, so a second process could bind beside them: the port is claimed first, by an
// exclusive probe and then a lock that only one process at a time holds (claimPort).

import { createServer, type Server } from 'node:net';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { uws } from './uws.js';

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

/** Bind `app`: exclusively, or `shared` on a port this process claimed (claimPort). */
export function listenOn(app: TemplatedApp, host: string, port: number, shared: boolean): Promise<us_listen_socket> {
  if (shared && port === 0) throw new Error('a shared port must be claimed first (claimPort)');
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

/** Close every socket of `app`, listening and connected. */
export function closeApp(app: TemplatedApp): void {
  const closable = app as unknown as ClosableApp;
  if (typeof closable.close === 'function') closable.close();
}

/** A port this process may bind shared, until release(). */
export interface PortClaim {
  readonly port: number;
  release(): void;
}

/**
 * Check that `port` is free by binding it exclusively and letting it go, then take the
 * port's lock: a Linux abstract socket named after the port, which one process holds at a
 * time and the kernel frees when the process ends. Two servers that both found the port
 * free therefore cannot both go on to bind it shared. Elsewhere than Linux there is no lock
 * (the check alone, with its window between the check and the bind).
 */
export async function claimPort(host: string, port: number): Promise<PortClaim> {
  const probe = uws.App();
  let chosen: number;
  try {
    chosen = listenPort(await listenOn(probe, host, port, false));
  } finally {
    closeApp(probe);
  }
  if (process.platform !== 'linux') return { port: chosen, release: () => {} };
  const lock = await portLock(chosen);
  if (lock === null) throw new Error(`cannot listen on ${host}:${chosen} (another svcdb process is binding it)`);
  return { port: chosen, release: () => lock.close() };
}

/** The port's lock, or null when another process holds it. */
function portLock(port: number): Promise<Server | null> {
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
