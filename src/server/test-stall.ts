// Test hook, never set in production (test/read-deadline.test.ts, test/write-deadline.test.ts):
// SVCDB_TEST_READER_STALL / SVCDB_TEST_WRITER_STALL = MS:MARKER makes a request whose body
// contains MARKER (at least 16 characters, so it cannot match by accident) hold its thread
// for MS milliseconds before it runs, running nothing and checking no deadline, the way a
// long garbage collection does. A client cannot turn it on: only whoever starts the server
// can, and the marker is theirs.
import { Buffer } from 'node:buffer';

/** The hook named by environment variable `name`, or null when it is not set. */
export function testStall(name: string): ((body: Uint8Array) => void) | null {
  const value = process.env[name];
  if (value === undefined || value === '') return null;
  const colon = value.indexOf(':');
  const ms = Number(value.slice(0, colon));
  if (colon < 0 || !Number.isInteger(ms) || ms < 0 || value.length - colon - 1 < 16) {
    throw new Error(`${name} must be MS:MARKER with a marker of at least 16 characters`);
  }
  const marker = Buffer.from(value.slice(colon + 1), 'utf8');
  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  return (body) => {
    if (Buffer.from(body.buffer, body.byteOffset, body.byteLength).includes(marker)) Atomics.wait(sleeper, 0, 0, ms);
  };
}
