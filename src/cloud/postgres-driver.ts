// The shared store's driver: a pg connection pool, for several gateway replicas and the
// admin server against one PostgreSQL database.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { numberPlaceholders, type ProvisionerLock, type SqlDriver, type SqlExecutor, type SqlRow, type SqlValue } from './sql-driver.js';

/** Connections per process: the gateway caches answers, so few queries are in flight. */
const poolSizeMax = 8;
const connectTimeoutMs = 5_000;
/** Any fixed number shared by every process of the control plane: the migration lock. */
const migrationLockKey = 0x5376_6301;
export const provisionerLockKey = 0x5376_6302;
/** How often the provisioner lock's session is asked whether it is alive, and how long it may take to answer. */
const lockHeartbeatMs = 2_000;
const lockHeartbeatTimeoutMs = 5_000;

export class PostgresDriver implements SqlDriver {
  readonly dialect = 'postgres' as const;
  private readonly pool: pg.Pool;
  /** The application_name of this process's lock sessions: tells its own stale session from another process's. */
  private readonly lockSessionName = `svc-cloud-lock ${randomUUID()}`;

  constructor(private readonly connectionString: string) {
    this.pool = new pg.Pool({ connectionString, max: poolSizeMax, connectionTimeoutMillis: connectTimeoutMs });
    // An idle client losing its connection (server restart) must not crash the process;
    // the pool drops it and the next query opens a new one.
    this.pool.on('error', () => undefined);
  }

  async query<Row extends SqlRow = SqlRow>(sql: string, params: readonly SqlValue[] = []): Promise<Row[]> {
    const result = await this.pool.query<Row>(numberPlaceholders(sql), params as SqlValue[]);
    return result.rows;
  }

  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      await client.query('BEGIN');
      try {
        const result = await work({
          query: async <Row extends SqlRow>(sql: string, params: readonly SqlValue[] = []) =>
            (await client.query<Row>(numberPlaceholders(sql), params as SqlValue[])).rows,
        });
        await client.query('COMMIT');
        return result;
      } catch (err) {
        try {
          await client.query('ROLLBACK');
        } catch {
          broken = true;
        }
        throw err;
      }
    } finally {
      client.release(broken);
    }
  }

  async lockForMigrations(tx: SqlExecutor): Promise<void> {
    // Held until the transaction ends: replicas opening at once apply each version once.
    await tx.query('SELECT pg_advisory_xact_lock(?)', [migrationLockKey]);
  }

  async tryProvisionerLock(): Promise<ProvisionerLock | null> {
    // A session lock on a connection of its own, outside the pool: it lasts as long as the
    // connection, so a process that dies (even kill -9) lets go of it with its socket. The
    // holder must also learn when the session ends under it (a PostgreSQL restart, a
    // network cut, pg_terminate_backend): the lock is then free for another process.
    const client = new pg.Client({
      connectionString: this.connectionString, connectionTimeoutMillis: connectTimeoutMs,
      keepAlive: true, query_timeout: lockHeartbeatTimeoutMs,
      // Every lock session of this process carries its token (provisionerLockHolder).
      application_name: this.lockSessionName,
    });
    let lose: (why: string) => void = () => undefined;
    const lost = new Promise<string>((resolve) => { lose = resolve; });
    client.on('error', (err) => lose(`the lock's session failed: ${err.message}`));
    client.on('end', () => lose('the lock\'s session ended'));
    await client.connect();
    let locked: boolean;
    try {
      locked = (await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [provisionerLockKey])).rows[0]?.locked === true;
    } catch (err) {
      // A query that timed out may still be granted on the server: ending the session frees it.
      await client.end().catch(() => undefined);
      throw err;
    }
    if (!locked) {
      await client.end();
      return null;
    }
    let released = false;
    // A session that stops answering is ended from this side, so PostgreSQL frees the lock
    // as soon as it sees the socket close and this process can take it again at once.
    const heartbeat = setInterval(() => {
      client.query('SELECT 1').catch((err: unknown) => {
        if (released) return;
        lose(`the lock's session stopped answering: ${err instanceof Error ? err.message : String(err)}`);
        void client.end().catch(() => undefined);
      });
    }, lockHeartbeatMs);
    heartbeat.unref();
    return {
      lost: lost.then((why) => {
        clearInterval(heartbeat);
        return released ? new Promise<string>(() => undefined) : why;
      }),
      release: async () => {
        released = true;
        clearInterval(heartbeat);
        await client.query('SELECT pg_advisory_unlock($1)', [provisionerLockKey]).catch(() => undefined);
        await client.end().catch(() => undefined);
      },
    };
  }

  async provisionerLockHolder(): Promise<'none' | 'this process' | 'another process'> {
    const rows = await this.query<{ pid: number; application_name: string | null }>(
      `SELECT a.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.classid = 0 AND l.objid = ? AND l.objsubid = 1 AND l.granted`, [provisionerLockKey]);
    if (rows.length === 0) return 'none';
    const holder = rows[0]!;
    if (holder.application_name !== this.lockSessionName) return 'another process';
    // A session of this process that PostgreSQL still keeps (its end not seen yet): end it.
    await this.query('SELECT pg_terminate_backend(?)', [holder.pid]);
    return 'this process';
  }

  isUniqueViolation(err: unknown): boolean {
    return (err as { code?: unknown } | null)?.code === '23505';
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
