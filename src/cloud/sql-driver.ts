// One small SQL surface over better-sqlite3 and pg, so the control plane's queries are
// written once (sql-store.ts). Statements use `?` placeholders; the PostgreSQL driver
// numbers them ($1, $2, ...). Both dialects accept the SQL we write: standard DDL,
// INSERT ... ON CONFLICT ... DO UPDATE, RETURNING.

export type SqlValue = string | number | null;
export type SqlRow = Record<string, unknown>;

export interface SqlExecutor {
  /** Rows of the statement (none for statements without a result). */
  query<Row extends SqlRow = SqlRow>(sql: string, params?: readonly SqlValue[]): Promise<Row[]>;
}

export interface SqlDriver extends SqlExecutor {
  readonly dialect: 'sqlite' | 'postgres';
  /**
   * Runs `work` in one transaction: committed when it resolves, rolled back when it throws.
   * Statements of the transaction go through the executor it is given.
   */
  transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /** Serialises migrations across processes sharing the store (PostgreSQL replicas). */
  lockForMigrations(tx: SqlExecutor): Promise<void>;
  /**
   * Takes the store's one provisioner lock, held until released or until this process
   * ends; null when another process holds it. One `svc cloud serve` per store: two would
   * both start servers for the same databases.
   */
  tryProvisionerLock(): Promise<ProvisionerLock | null>;
  /**
   * Who holds the provisioner lock, for a process that lost it: nobody, this process (a
   * session of its own the store still keeps, which this call ends), or another process.
   */
  provisionerLockHolder(): Promise<'none' | 'this process' | 'another process'>;
  /** True when `err` is a unique-constraint violation (a slug or key collision). */
  isUniqueViolation(err: unknown): boolean;
  close(): Promise<void>;
}

/** `?` placeholders to `$1, $2, ...` (our SQL holds no `?` inside string literals). */
export function numberPlaceholders(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

/** The store's one provisioner lock, while held. */
export interface ProvisionerLock {
  release(): Promise<void>;
  /**
   * Settles, with why, if the lock is lost while held (PostgreSQL: its session ended or
   * stopped answering, so another process may take it). Never for a lock file.
   */
  readonly lost: Promise<string>;
}
