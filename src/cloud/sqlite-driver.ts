// The embedded store's driver: one better-sqlite3 connection to a file, in WAL mode so a
// gateway and `svc cloud serve` on one laptop can share the file (readers never block the
// writer; concurrent writers wait up to busyTimeoutMs).
//
// better-sqlite3 is synchronous. A transaction's work is asynchronous, though, so other
// callers could run statements between its awaits and land inside it: while a transaction
// is open, every other statement waits for it to end.
import Database from 'better-sqlite3';
import type { SqlDriver, SqlExecutor, SqlRow, SqlValue } from './sql-driver.js';

const busyTimeoutMs = 5_000;
/** Prepared statements kept per connection; our queries are a fixed, small set. */
const statementCacheMax = 256;

export class SqliteDriver implements SqlDriver {
  readonly dialect = 'sqlite' as const;
  private readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();
  private transactionOpen = false;
  private transactionEnded: Promise<void> = Promise.resolve();

  constructor(path: string) {
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    this.db.pragma('foreign_keys = ON');
    // WAL + NORMAL loses at most the last transactions on power loss, never consistency;
    // the control plane's writes are admin actions and usage counters.
    this.db.pragma('synchronous = NORMAL');
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

  private async waitForTransaction(): Promise<void> {
    while (this.transactionOpen) await this.transactionEnded;
  }

  async query<Row extends SqlRow = SqlRow>(sql: string, params: readonly SqlValue[] = []): Promise<Row[]> {
    await this.waitForTransaction();
    return this.run<Row>(sql, params);
  }

  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    await this.waitForTransaction();
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

  isUniqueViolation(err: unknown): boolean {
    const code = (err as { code?: unknown } | null)?.code;
    return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
  }

  async close(): Promise<void> {
    await this.waitForTransaction();
    this.statements.clear();
    this.db.close();
  }
}
