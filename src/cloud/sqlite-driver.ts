// The embedded store's driver: one better-sqlite3 connection to a file, in WAL mode so a
// gateway and `svc cloud serve` on one laptop can share the file (readers never block the
// writer; concurrent writers wait up to busyTimeoutMs).
//
// better-sqlite3 is synchronous. A transaction's work is asynchronous, though, so other
// callers could run statements between its awaits and land inside it: while a transaction
// is open, every other statement waits for it to end.
//
// One connection per file per process (openSqliteDriver shares it, counting references):
// a second connection in the same process that wanted the write lock while the first held
// it across an await would wait synchronously, stalling the very event loop that must let
// the first one finish.
import { closeSync, openSync, readFileSync, realpathSync, rmSync, writeSync } from 'node:fs';
import Database from 'better-sqlite3';
import { processAlive } from '../durability/process-alive.js';
import type { ProvisionerLock, SqlDriver, SqlExecutor, SqlRow, SqlValue } from './sql-driver.js';

const busyTimeoutMs = 5_000;
/** Prepared statements kept per connection; our queries are a fixed, small set. */
const statementCacheMax = 256;

const openDrivers = new Map<string, { driver: SqliteDriver; references: number }>();

/** The process's driver for the file at `path` (opened on first use). */
export function openSqliteDriver(path: string): SqlDriver {
  const shared = path === ':memory:' ? null : openDrivers.get(realpathOrSelf(path));
  if (shared != null) {
    shared.references++;
    return referenceTo(shared);
  }
  const driver = new SqliteDriver(path);
  if (path === ':memory:') return driver;
  const entry = { driver, references: 1 };
  // Now that the file exists, its real path: the key other spellings of it resolve to.
  const key = realpathOrSelf(path);
  openDrivers.set(key, entry);
  driver.onClosed = () => openDrivers.delete(key);
  return referenceTo(entry);
}

function realpathOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** A handle on a shared driver whose close() only drops this reference (the last one closes). */
function referenceTo(entry: { driver: SqliteDriver; references: number }): SqlDriver {
  let closed = false;
  const { driver } = entry;
  return {
    dialect: 'sqlite',
    query: (sql, params) => driver.query(sql, params),
    transaction: (work) => driver.transaction(work),
    lockForMigrations: () => driver.lockForMigrations(),
    tryProvisionerLock: () => driver.tryProvisionerLock(),
    provisionerLockHolder: () => driver.provisionerLockHolder(),
    isUniqueViolation: (err) => driver.isUniqueViolation(err),
    async close() {
      if (closed) return;
      closed = true;
      if (--entry.references === 0) await driver.close();
    },
  };
}

/** The PID a provisioner lock file names, if that process runs; null for no file or a dead owner. */
function liveLockOwner(lockPath: string): number | null {
  let owner: number;
  try {
    owner = Number(readFileSync(lockPath, 'utf8').trim());
  } catch {
    return null;
  }
  return Number.isInteger(owner) && owner > 0 && processAlive(owner) ? owner : null;
}

export class SqliteDriver implements SqlDriver {
  readonly dialect = 'sqlite' as const;
  /** Called once the connection is closed (the shared-driver registry forgets it). */
  onClosed: (() => void) | null = null;
  private readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();
  private transactionOpen = false;
  private transactionEnded: Promise<void> = Promise.resolve();

  constructor(private readonly path: string) {
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    this.db.pragma('foreign_keys = ON');
    // FULL: a commit is on disk before it is answered. An API key shown once and then
    // lost to a power cut would leave a client with a secret that grants nothing; the
    // writes are admin actions and the gateways' batched usage counters, so few.
    this.db.pragma('synchronous = FULL');
  }

  private run<Row extends SqlRow>(sql: string, params: readonly SqlValue[]): Row[] {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = this.db.prepare(sql);
      if (this.statements.size >= statementCacheMax) this.statements.clear();
      this.statements.set(sql, statement);
    }
    if (statement.reader) return statement.all(...params) as Row[];
    statement.run(...params);
    return [];
  }

  // The checks of transactionOpen below are inline loops, never a helper awaited: the
  // statement (or taking the lock) must follow the check with no await between, or two
  // waiters woken by one transaction's end would both go ahead.

  async query<Row extends SqlRow = SqlRow>(sql: string, params: readonly SqlValue[] = []): Promise<Row[]> {
    while (this.transactionOpen) await this.transactionEnded;
    return this.run<Row>(sql, params);
  }

  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    while (this.transactionOpen) await this.transactionEnded;
    this.transactionOpen = true;
    let end!: () => void;
    this.transactionEnded = new Promise<void>((resolve) => { end = resolve; });
    try {
      // IMMEDIATE takes the write lock now, so two processes never both read then write.
      this.run('BEGIN IMMEDIATE', []);
      try {
        const result = await work({ query: async <Row extends SqlRow>(sql: string, params: readonly SqlValue[] = []) => this.run<Row>(sql, params) });
        this.run('COMMIT', []);
        return result;
      } catch (err) {
        this.run('ROLLBACK', []);
        throw err;
      }
    } finally {
      this.transactionOpen = false;
      end();
    }
  }

  async lockForMigrations(): Promise<void> {
    // BEGIN IMMEDIATE already holds the database's one write lock.
  }

  async tryProvisionerLock(): Promise<ProvisionerLock | null> {
    // A lock file is not lost while held (only a person deleting it could).
    const held = (release: () => Promise<void>): ProvisionerLock => ({ release, lost: new Promise<string>(() => undefined) });
    if (this.path === ':memory:') return held(async () => undefined);
    // A lock file beside the database holding the owner's PID; a file left by a process
    // that no longer runs (kill -9) is taken over.
    const lockPath = `${this.path}.provisioner.lock`;
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const fd = openSync(lockPath, 'wx');
        writeSync(fd, String(process.pid));
        closeSync(fd);
        return held(async () => rmSync(lockPath, { force: true }));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        if (liveLockOwner(lockPath) !== null) return null;
        rmSync(lockPath, { force: true });
      }
    }
    return null;
  }

  async provisionerLockHolder(): Promise<'none' | 'this process' | 'another process'> {
    if (this.path === ':memory:') return 'this process';
    const owner = liveLockOwner(`${this.path}.provisioner.lock`);
    return owner === null ? 'none' : owner === process.pid ? 'this process' : 'another process';
  }

  isUniqueViolation(err: unknown): boolean {
    const code = (err as { code?: unknown } | null)?.code;
    return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
  }

  async close(): Promise<void> {
    while (this.transactionOpen) await this.transactionEnded;
    this.statements.clear();
    this.db.close();
    this.onClosed?.();
  }
}
