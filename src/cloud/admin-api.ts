// The control plane's admin HTTP API (node:http: a handful of requests a minute, no hot
// path). Every route needs `Authorization: Bearer <admin token>`; the token comes from the
// environment (SVC_CLOUD_ADMIN_TOKEN), is compared in constant time and is never logged.
// Bodies are JSON with snake_case fields; errors are `{error, msg}` like the query API.
//
//   GET    /health                                      (no token: liveness for supervisors)
//   GET    /admin/v1/plans                              allowances of every plan
//   PUT    /admin/v1/plans/:plan                        {reads_per_month, writes_per_month}
//   POST   /admin/v1/workspaces                         {name, plan}                  -> 201
//   GET    /admin/v1/workspaces
//   GET    /admin/v1/workspaces/:id
//   PATCH  /admin/v1/workspaces/:id                     {name?, plan?}
//   DELETE /admin/v1/workspaces/:id                     (409 while it has databases)
//   GET    /admin/v1/workspaces/:id/usage[?month=]      a month's reads and writes (default this month)
//   POST   /admin/v1/databases                          {workspace_id, name, readers?, rate_limit?} -> 202 Provisioning
//   GET    /admin/v1/databases[?workspace_id=]
//   GET    /admin/v1/databases/:id
//   PATCH  /admin/v1/databases/:id                      {rate_limit: {per_second, burst} | null}
//   DELETE /admin/v1/databases/:id                      stops its servers, revokes its keys
//   POST   /admin/v1/databases/:id/keys                 {name, permission}  -> 201 {key, secret} (the only time)
//   GET    /admin/v1/databases/:id/keys
//   DELETE /admin/v1/databases/:id/keys/:keyId          revoke
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  ControlPlaneError,
  type ApiKey, type ControlPlaneStore, type Database, type PlanAllowance, type Workspace, type WorkspaceUsage,
} from './admin-store.js';
import { planNames, type PlanName, type RateLimit } from './control-plane.js';
import type { Logger } from './log.js';
import { isPlanName, monthPattern } from './plans.js';
import type { Provisioner } from './provision.js';
import { monotonicMs } from '../clock.js';

export const adminTokenEnv = 'SVC_CLOUD_ADMIN_TOKEN';
/** A shorter token is refused at start: it could be guessed. */
export const adminTokenLengthMin = 24;
export const adminBodyBytesMax = 64 * 1024;
export const defaultReaderCount = 1;

export interface AdminApiOptions {
  readonly store: ControlPlaneStore;
  readonly provisioner: Provisioner;
  readonly adminToken: string;
  /** The gateway's public base URL, recorded as each new database's endpoint. */
  readonly gatewayUrl: string;
  readonly host?: string;
  readonly port?: number;
  readonly logger?: Logger;
}

export interface RunningAdminApi {
  readonly url: string;
  close(): Promise<void>;
}

/** A percent-decoded path segment; 400 for a malformed escape (decodeURIComponent throws). */
function pathPart(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, 'invalid_request', `malformed percent-encoding in the path segment ${JSON.stringify(segment)}`);
  }
}

class HttpError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

/** Why a token cannot be used, or null. */
export function adminTokenProblem(token: string | undefined): string | null {
  if (token === undefined || token === '') return `set ${adminTokenEnv} to the admin token (at least ${adminTokenLengthMin} characters)`;
  if (token.length < adminTokenLengthMin) return `${adminTokenEnv} is shorter than ${adminTokenLengthMin} characters`;
  if (/\s/.test(token)) return `${adminTokenEnv} holds whitespace`;
  return null;
}

// ---------------------------------------------------------------- JSON shapes

function workspaceJson(w: Workspace): object {
  return { id: w.id, name: w.name, plan: w.plan, created_at: w.createdAt };
}

function rateLimitJson(r: RateLimit | null): object | null {
  return r === null ? null : { per_second: r.perSecond, burst: r.burst };
}

function databaseJson(d: Database): object {
  return {
    id: d.id, workspace_id: d.workspaceId, name: d.name, slug: d.slug, endpoint: d.endpoint,
    status: d.status, status_detail: d.statusDetail, storage_prefix: d.storagePrefix, readers: d.readerCount,
    writer_url: d.writerUrl, reader_urls: d.readerUrls,
    rate_limit: rateLimitJson(d.rateLimit), rate_limit_override: rateLimitJson(d.rateLimitOverride),
    created_at: d.createdAt,
  };
}

function keyJson(k: ApiKey): object {
  return { id: k.id, database_id: k.databaseId, name: k.name, permission: k.permission, created_at: k.createdAt, revoked_at: k.revokedAt };
}

function usageJson(u: WorkspaceUsage): object {
  return {
    workspace_id: u.workspaceId, month: u.month, reads: u.reads, writes: u.writes,
    allowance: { reads_per_month: u.allowance.readsPerMonth, writes_per_month: u.allowance.writesPerMonth },
  };
}

function allowanceJson(a: PlanAllowance): object {
  return { reads_per_month: a.readsPerMonth, writes_per_month: a.writesPerMonth };
}

// ---------------------------------------------------------------- request bodies

type Body = Record<string, unknown>;

function field(body: Body, name: string): unknown {
  return Object.hasOwn(body, name) ? body[name] : undefined;
}

function stringField(body: Body, name: string, required: true): string;
function stringField(body: Body, name: string, required: false): string | undefined;
function stringField(body: Body, name: string, required: boolean): string | undefined {
  const value = field(body, name);
  if (value === undefined && !required) return undefined;
  if (typeof value !== 'string') throw new HttpError(400, 'invalid_request', `field ${name} must be a string`);
  return value;
}

function planField(body: Body, required: boolean): PlanName | undefined {
  const value = field(body, 'plan');
  if (value === undefined && !required) return undefined;
  if (!isPlanName(value)) throw new HttpError(400, 'invalid_request', `field plan must be one of ${planNames.join(', ')}`);
  return value;
}

function rateLimitField(body: Body): RateLimit | null | undefined {
  const value = field(body, 'rate_limit');
  if (value === undefined || value === null) return value;
  if (typeof value !== 'object' || Array.isArray(value)) throw new HttpError(400, 'invalid_request', 'field rate_limit must be {per_second, burst} or null');
  const limit = value as Body;
  return { perSecond: field(limit, 'per_second') as number, burst: field(limit, 'burst') as number };
}

function readBody(req: IncomingMessage): Promise<Body> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      if (tooLarge) return;
      bytes += chunk.length;
      if (bytes > adminBodyBytesMax) {
        // Answered at once; the rest is read and dropped, then the connection closes
        // (destroying the request here would lose the answer).
        tooLarge = true;
        chunks.length = 0;
        reject(new HttpError(413, 'payload_too_large', `admin request bodies are limited to ${adminBodyBytesMax} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => {
      if (tooLarge) return;
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') {
        resolve({});
        return;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        reject(new HttpError(400, 'invalid_json', 'the body is not valid JSON'));
        return;
      }
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
        reject(new HttpError(400, 'invalid_request', 'the body must be a JSON object'));
        return;
      }
      resolve(parsed as Body);
    });
  });
}

// ---------------------------------------------------------------- the server

export async function startAdminApi(options: AdminApiOptions): Promise<RunningAdminApi> {
  const problem = adminTokenProblem(options.adminToken);
  if (problem !== null) throw new Error(problem);
  // Comparing digests keeps the comparison constant-time whatever the lengths.
  const tokenDigest = createHash('sha256').update(options.adminToken, 'utf8').digest();
  const { store, provisioner, logger } = options;

  function authorize(req: IncomingMessage): void {
    const header = req.headers['authorization'];
    if (header === undefined || header === '') throw new HttpError(401, 'missing_admin_token', 'send Authorization: Bearer <admin token>');
    // The scheme is case-insensitive (RFC 9110 §11.1), as the gateway reads it.
    const match = /^Bearer ([^\s]+)$/i.exec(header);
    if (match === null) throw new HttpError(401, 'malformed_authorization', 'the Authorization header must be "Bearer <admin token>"');
    const given = createHash('sha256').update(match[1]!, 'utf8').digest();
    if (!timingSafeEqual(given, tokenDigest)) throw new HttpError(401, 'invalid_admin_token', 'the admin token is not valid');
  }

  async function workspaceOr404(id: string): Promise<Workspace> {
    const workspace = await store.workspace(id);
    if (workspace === null) throw new HttpError(404, 'not_found', `no workspace ${JSON.stringify(id)}`);
    return workspace;
  }

  async function databaseOr404(id: string): Promise<Database> {
    const database = await store.databaseRecord(id);
    if (database === null || database.status === 'Deleted') throw new HttpError(404, 'not_found', `no database ${JSON.stringify(id)}`);
    return database;
  }

  /** Routes one authorized request; returns [status, body]. */
  async function route(method: string, parts: string[], query: URLSearchParams, req: IncomingMessage): Promise<[number, unknown]> {
    const [collection, id, sub, subId] = parts;
    const arity = parts.length;
    if (collection === 'plans') {
      if (method === 'GET' && arity === 1) {
        const allowances = await store.planAllowances();
        return [200, { plans: planNames.map((p) => ({ name: p, ...allowanceJson(allowances[p]) })) }];
      }
      if (method === 'PUT' && arity === 2) {
        if (!isPlanName(id)) throw new HttpError(404, 'not_found', `no plan ${JSON.stringify(id)}`);
        const body = await readBody(req);
        const allowance = { readsPerMonth: field(body, 'reads_per_month') as number, writesPerMonth: field(body, 'writes_per_month') as number };
        await store.setPlanAllowance(id, allowance);
        logger?.info({ plan: id, ...allowanceJson(allowance) }, 'plan allowance changed');
        return [200, { name: id, ...allowanceJson((await store.planAllowances())[id]) }];
      }
    }
    if (collection === 'workspaces') {
      if (method === 'POST' && arity === 1) {
        const body = await readBody(req);
        const workspace = await store.createWorkspace(stringField(body, 'name', true), planField(body, true)!);
        logger?.info({ workspaceId: workspace.id, plan: workspace.plan }, 'workspace created');
        return [201, workspaceJson(workspace)];
      }
      if (method === 'GET' && arity === 1) return [200, { workspaces: (await store.listWorkspaces()).map(workspaceJson) }];
      if (method === 'GET' && arity === 2) return [200, workspaceJson(await workspaceOr404(id!))];
      if (method === 'PATCH' && arity === 2) {
        const body = await readBody(req);
        const name = stringField(body, 'name', false);
        const plan = planField(body, false);
        const before = await workspaceOr404(id!);
        const after = await store.updateWorkspace(id!, { ...(name !== undefined ? { name } : {}), ...(plan !== undefined ? { plan } : {}) });
        if (before.plan !== after.plan) logger?.info({ workspaceId: id, from: before.plan, to: after.plan }, 'plan changed');
        return [200, workspaceJson(after)];
      }
      if (method === 'DELETE' && arity === 2) {
        await store.deleteWorkspace(id!);
        logger?.info({ workspaceId: id }, 'workspace deleted');
        return [204, null];
      }
      if (method === 'GET' && arity === 3 && sub === 'usage') {
        // ?month=YYYY-MM for a past month's record; default this month (UTC).
        const month = query.get('month');
        if (month !== null && !monthPattern.test(month)) throw new HttpError(400, 'invalid_request', 'month must be YYYY-MM');
        const at = month === null ? new Date() : new Date(`${month}-01T00:00:00Z`);
        return [200, usageJson(await store.usage(id!, at))];
      }
    }
    if (collection === 'databases') {
      if (method === 'POST' && arity === 1) {
        const body = await readBody(req);
        const readers = field(body, 'readers') ?? defaultReaderCount;
        const rateLimit = rateLimitField(body);
        const database = await store.createDatabase({
          workspaceId: stringField(body, 'workspace_id', true),
          name: stringField(body, 'name', true),
          readerCount: readers as number,
          ...(rateLimit !== undefined ? { rateLimitOverride: rateLimit } : {}),
        }, options.gatewayUrl);
        logger?.info({ databaseId: database.id, workspaceId: database.workspaceId, slug: database.slug }, 'database created');
        // Answer at once (202, Provisioning); clients poll GET until Active or Failed.
        void provisioner.provision(database.id).catch((err: unknown) => {
          logger?.error({ databaseId: database.id, reason: err instanceof Error ? err.message : String(err) }, 'provisioning did not start');
        });
        return [202, databaseJson(database)];
      }
      if (method === 'GET' && arity === 1) {
        const workspaceId = query.get('workspace_id');
        if (workspaceId !== null) await workspaceOr404(workspaceId);
        return [200, { databases: (await store.listDatabases(workspaceId ?? undefined)).map(databaseJson) }];
      }
      if (method === 'GET' && arity === 2) return [200, databaseJson(await databaseOr404(id!))];
      if (method === 'PATCH' && arity === 2) {
        const body = await readBody(req);
        const rateLimit = rateLimitField(body);
        if (rateLimit === undefined) throw new HttpError(400, 'invalid_request', 'nothing to change: send rate_limit ({per_second, burst} or null)');
        await databaseOr404(id!);
        const database = await store.setRateLimitOverride(id!, rateLimit);
        logger?.info({ databaseId: id, rateLimit: rateLimitJson(rateLimit) }, 'rate limit override changed');
        return [200, databaseJson(database)];
      }
      if (method === 'DELETE' && arity === 2) {
        await databaseOr404(id!);
        // Keys stop granting first, then the servers go: no request reaches a dying server.
        await store.markDatabaseDeleted(id!);
        await provisioner.deprovision(id!);
        logger?.info({ databaseId: id }, 'database deleted');
        return [204, null];
      }
      if (method === 'POST' && arity === 3 && sub === 'provision') {
        // A Failed database (its servers did not start: storage down, a bad host) is started
        // again on its data, once; Active and Provisioning ones are left as they are.
        const database = await databaseOr404(id!);
        if (database.status !== 'Failed') throw new HttpError(409, 'conflict', `database ${id} is ${database.status}: only a Failed database is provisioned again`);
        await store.setDatabaseStatus(id!, 'Provisioning');
        logger?.info({ databaseId: id }, 'provisioning again');
        void provisioner.provision(id!).catch((err: unknown) => {
          logger?.error({ databaseId: id, reason: err instanceof Error ? err.message : String(err) }, 'provisioning did not start');
        });
        return [202, databaseJson(await databaseOr404(id!))];
      }
      if (sub === 'keys') {
        if (method === 'POST' && arity === 3) {
          const body = await readBody(req);
          const permission = stringField(body, 'permission', true);
          if (permission !== 'read' && permission !== 'read_write') throw new HttpError(400, 'invalid_request', 'field permission must be "read" or "read_write"');
          await databaseOr404(id!);
          const created = await store.createApiKey(id!, stringField(body, 'name', true), permission);
          logger?.info({ databaseId: id, keyId: created.key.id, permission }, 'api key created');
          return [201, { key: keyJson(created.key), secret: created.secret }];
        }
        if (method === 'GET' && arity === 3) {
          await databaseOr404(id!);
          return [200, { keys: (await store.listApiKeys(id!)).map(keyJson) }];
        }
        if (method === 'DELETE' && arity === 4) {
          await databaseOr404(id!);
          const key = await store.revokeApiKey(id!, subId!);
          logger?.info({ databaseId: id, keyId: key.id }, 'api key revoked');
          return [200, keyJson(key)];
        }
      }
    }
    throw new HttpError(404, 'not_found', `no route ${method} /admin/v1/${parts.join('/')}`);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = monotonicMs();
    const method = req.method ?? 'GET';
    const url = new URL(req.url ?? '/', 'http://admin');
    let status = 500;
    let body: unknown = null;
    try {
      if (url.pathname === '/health') {
        [status, body] = method === 'GET' ? [200, { ok: true }] : [405, { error: 'method_not_allowed', msg: 'GET /health' }];
      } else {
        if (!url.pathname.startsWith('/admin/v1/')) throw new HttpError(404, 'not_found', `no route ${url.pathname}`);
        authorize(req);
        const parts = url.pathname.slice('/admin/v1/'.length).split('/').filter((p) => p !== '').map(pathPart);
        [status, body] = await route(method, parts, url.searchParams, req);
      }
    } catch (err) {
      if (err instanceof HttpError) [status, body] = [err.status, { error: err.code, msg: err.message }];
      else if (err instanceof ControlPlaneError) {
        status = err.code === 'not_found' ? 404 : err.code === 'conflict' ? 409 : 400;
        body = { error: err.code === 'invalid' ? 'invalid_request' : err.code, msg: err.message };
      } else {
        status = 500;
        body = { error: 'internal_error', msg: 'the control plane failed; see its log' };
        logger?.error({ err: err instanceof Error ? err.message : String(err), method, path: url.pathname }, 'admin request failed');
      }
    }
    // Method and path only: query strings and bodies are not logged (they may name secrets).
    logger?.info({ method, path: url.pathname, status, ms: monotonicMs() - started }, 'admin request');
    if (status === 413) res.setHeader('connection', 'close');
    if (status === 204 || body === null) {
      res.writeHead(status).end();
    } else {
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', 'content-length': Buffer.byteLength(text) }).end(text);
    }
  }

  const server: Server = createServer((req, res) => {
    void handle(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${address.port}`;
  logger?.info({ url }, 'admin API listening');
  return {
    url,
    async close(): Promise<void> {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
    },
  };
}
