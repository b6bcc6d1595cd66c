// Faults in what vector and text indexes add to a snapshot (the `vectors` and `texts`
// sections): a flipped byte in either section of the newest snapshot fails its checksum and
// is never loaded; the database goes around it (the previous generation plus the WAL after
// it, or the WAL from the start) and answers every search as before.
import { copyFileSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../src/index.js';
import { tempDirs } from './helpers/temp-dirs.js';
import { q, read, str, write } from './helpers/requests.js';
import { buildIndex, ok } from './helpers/search-indexes.js';

const newDir = tempDirs('search-durability');
const files = (dir: string) => readdirSync(dir).filter((f) => /^(wal|snapshot)-/.test(f)).sort();
const snapshots = (dir: string) => files(dir).filter((f) => f.startsWith('snapshot-'));

function copyOf(dir: string): string {
  const copy = newDir();
  for (const f of files(dir)) copyFileSync(join(dir, f), join(copy, f));
  return copy;
}

/** Flip one byte in the middle of section `name` of a snapshot file (its table: 32-byte header, 64-byte entries). */
function flipInSection(file: string, name: string): void {
  const bytes = readFileSync(file);
  const count = bytes.readUInt32LE(16);
  for (let i = 0; i < count; i++) {
    const base = 32 + i * 64;
    if (bytes.toString('utf8', base, base + 40).replace(/\0+$/, '') !== name) continue;
    const offset = Number(bytes.readBigUInt64LE(base + 40)), length = Number(bytes.readBigUInt64LE(base + 48));
    bytes[offset + Math.floor(length / 2)] ^= 0x5a;
    writeFileSync(file, bytes);
    return;
  }
  throw new Error(`${file} has no section ${name}`);
}


const doc = (i: number) => q(null, { add_n: { label: 'Doc', properties: [['body', str(`doc ${i} words w${i % 5}`)], ['v', { value: { f32_array: [i, i % 7, 1] } }]] } });
const answers = async (db: Database) => ({
  vector: (await ok(db, read([q('r', { vector_search_nodes: { label: 'Doc', property: 'v', query_vector: { value: { f32_array: [10, 3, 1] } }, k: { literal: 5 } } })], ['r'])))['r'],
  text: (await ok(db, read([q('r', { text_search_nodes: { label: 'Doc', property: 'body', query_text: str('w3 doc'), k: { literal: 5 } } })], ['r'])))['r'],
});

describe('vector and text sections of snapshots under damage', () => {
  it('a flipped byte in either section of the newest snapshot falls back to the previous generation and the WAL', async () => {
    const dir = newDir();
    let db = await openDatabase({ storage: 'disk', path: dir });
    await ok(db, write(Array.from({ length: 60 }, (_, i) => doc(i)), []));
    await buildIndex(db, { node_vector: { label: 'Doc', property: 'v', dimension: 3, metric: 'euclidean' } });
    await buildIndex(db, { node_text: { label: 'Doc', property: 'body' } });
    await db.close(); // snapshot 1
    db = await openDatabase({ storage: 'disk', path: dir });
    await ok(db, write(Array.from({ length: 20 }, (_, i) => doc(100 + i)), []));
    await ok(db, write([q(null, { drop: { input: { nodes: { reference: { ids: [10, 13] } } } } })], []));
    const before = await answers(db);
    await db.close(); // snapshot 2; snapshot 1 and the WAL after it stay
    expect(snapshots(dir).length).toBe(2);
    for (const section of ['vectors', 'texts']) {
      const copy = copyOf(dir);
      flipInSection(join(copy, snapshots(copy).at(-1)!), section);
      const reopened = await openDatabase({ storage: 'disk', path: copy });
      expect(await answers(reopened), `after a flip in \`${section}\``).toEqual(before);
      await reopened.close();
    }
  });

  it('with no older generation, a damaged section is gone around through the WAL from the start, and the indexes are rebuilt from the data', async () => {
    const dir = newDir();
    const db = await openDatabase({ storage: 'disk', path: dir });
    await ok(db, write(Array.from({ length: 30 }, (_, i) => doc(i)), []));
    await buildIndex(db, { node_vector: { label: 'Doc', property: 'v', dimension: 3, metric: 'euclidean' } });
    await buildIndex(db, { node_text: { label: 'Doc', property: 'body' } });
    const before = await answers(db);
    await db.close();
    expect(snapshots(dir).length).toBe(1);
    for (const section of ['vectors', 'texts']) {
      const copy = copyOf(dir);
      flipInSection(join(copy, snapshots(copy)[0]!), section);
      const reopened = await openDatabase({ storage: 'disk', path: copy });
      expect(await answers(reopened), `after a flip in \`${section}\``).toEqual(before);
      await reopened.close();
    }
  });
});
