// `svc query <instance>`: builds one request from exactly one input (--file, --json,
// -e/--ts, --ts-file), sends it to POST /v2/query of a local instance or a cloud gateway,
// and prints the answer:
//
//   2xx with a body   pretty JSON (2-space indent), or one line with --compact
//   204               nothing, exit 0 (a cloud warming read)
//   non-2xx           `Query failed with HTTP <status>: <body>` on stderr, exit 1
//   unreachable       `cannot reach ... at <endpoint>` plus a hint, exit 1
//
// --explain sends the same body to POST /v2/explain (the access path of each nodes_where /
// edges_where; nothing runs) and prints that answer. --wait, after a write whose answer
// holds index receipts, polls their operations until they settle (index-wait.ts): exit 0
// when all succeeded, 2 when one is blocked or aborted.
import { Option, type Command } from 'commander';
import { action, CliError } from './errors.js';
import { cloudHeaders, cloudHint, requireApiKey, resolveCloudSettings, type CloudFlags } from './cloud.js';
import { httpRequest, localBaseUrl, Unreachable } from './http.js';
import { findReceipts, waitForOperations } from './index-wait.js';
import { formatJson, isJson } from './json-format.js';
import { checkInstanceName, defaultHost, defaultPort, findInstance, findProjectRoot, loadProjectAt } from './project.js';
import { checkRequestText, readRequestFile, type PreparedRequest } from './request-input.js';
import { integerOption, portOption } from './options.js';
import { requestFromExpression, requestFromTsFile } from './ts-eval.js';

/** The JSON request the help texts (and AGENTS.md of `svc init`) show: the number of nodes. */
export const COUNT_NODES_REQUEST = '{"request_type":"read","query":{"read":{"entries":[{"query":{"name":"n","root":{"count":{"input":{"nodes":{"reference":"all"}}}}}}],"returns":["n"]}}}';

interface QueryOptions extends CloudFlags {
  file?: string;
  json?: string;
  ts?: string;
  tsFile?: string;
  params?: string;
  compact?: boolean;
  warm?: boolean;
  explain?: boolean;
  wait?: boolean;
  host?: string;
  port?: number;
  timeoutMs: number;
}

interface Target {
  /** `http://host:port` or the gateway URL, without a path. */
  readonly base: string;
  readonly headers: Record<string, string>;
  /** "local instance "dev"" / "cloud instance "prod"" */
  readonly label: string;
  readonly hint: string;
}

const inputFlags = ['--file', '--json', '-e/--ts', '--ts-file'] as const;

export function registerQuery(program: Command): void {
  program
    .command('query')
    .description('send one request to POST /v2/query of an instance and print the JSON answer')
    .argument('<instance>', 'a [local.<instance>] or [enterprise.<instance>] table of svc.toml')
    .option('--file <path>', 'the request as a JSON file ("-" reads standard input)')
    .option('--json <string>', 'the request as inline JSON')
    .option('-e, --ts <expr>', 'a TypeScript expression that evaluates to a readBatch()/writeBatch() builder (g, readBatch, writeBatch, defineParams, param, P, E, ... are in scope)')
    .option('--ts-file <path>', 'a TypeScript file whose default export is a readBatch()/writeBatch() builder')
    .option('--params <json>', 'parameter values (a JSON object) for the batch of -e/--ts-file, passed to toRequest()')
    .option('--compact', 'print the answer on one line')
    .option('--warm', 'send the read with x-svc-warm: true (cache warming; the cloud answers 204, a local instance 200 with the body)')
    .option('--explain', 'send the request to POST /v2/explain instead: print the access path (scan or index) of each nodes_where/edges_where; nothing is executed')
    .option('--wait', 'after a write that created or dropped indexes, wait for those index operations and show their progress on stderr (exit 2 when one is blocked or aborted)')
    .option('--host <host>', 'local instance: connect to this host instead of the configured one')
    .option('--port <port>', 'local instance: connect to this port instead of the configured one', portOption)
    .option('--timeout-ms <ms>', 'give up after this long (0 = wait as long as the server takes)', integerOption('timeout-ms', 0, 86_400_000), 0)
    .addOption(new Option('--gateway-url <url>', 'cloud instance: override gateway_url').helpGroup('Cloud instance overrides:'))
    .addOption(new Option('--auth-header <name>', 'cloud instance: override query_auth_header').helpGroup('Cloud instance overrides:'))
    .addOption(new Option('--auth-scheme <scheme>', 'cloud instance: override query_auth_scheme').choices(['bearer', 'raw']).helpGroup('Cloud instance overrides:'))
    .addOption(new Option('--auth-env <variable>', 'cloud instance: override query_auth_env (the variable holding the API key)').helpGroup('Cloud instance overrides:'))
    .addOption(new Option('--database-id <id>', 'cloud instance: override database_id (sent as x-svc-tenant-id)').helpGroup('Cloud instance overrides:'))
    .addHelpText('after', `
Exactly one of --file, --json, -e/--ts, --ts-file is required.

Examples:
  svc query dev --file examples/request.json
  svc query dev --json '${COUNT_NODES_REQUEST}'
  svc query dev -e "readBatch().varAs('n', g().nWithLabel('User').count()).returning(['n'])"
  svc query dev -e "writeBatch().varAs('ann', g().addN('User', { name: 'Ann' })).returning(['ann'])"
  svc query dev -e "readBatch().varAs('u', g().nWithLabel('User', P.eq('name', param('name'))).valueMap()).returning(['u'])" --params '{"name":"Ann"}'
  svc query dev --explain --file examples/request.json
  svc query dev --wait --json '{"request_type":"write","query":{"write":{"entries":[{"query":{"name":"r","root":{"create_index":{"spec":{"node_equality":{"label":"User","property":"email"}},"if_not_exists":true}}}}],"returns":["r"]}}}'
  svc query prod --file examples/request.json --compact`)
    .action(action('query', async (name: string, options: QueryOptions) => {
      await query(name, options);
    }));
}

async function query(name: string, options: QueryOptions): Promise<void> {
  checkInstanceName(name);
  const given = [options.file, options.json, options.ts, options.tsFile].map((v, i) => (v === undefined ? null : inputFlags[i]!)).filter((v) => v !== null);
  if (given.length === 0) throw new CliError(`a request is required: give exactly one of ${inputFlags.join(', ')}`);
  if (given.length > 1) throw new CliError(`${given.join(' and ')} are mutually exclusive: give exactly one of ${inputFlags.join(', ')}`);

  const target = resolveTarget(name, options);
  const request = await prepare(options);
  if (options.warm === true && request.requestType !== 'read') {
    throw new CliError('--warm applies to read requests only; this request is a write');
  }
  if (options.explain === true && (options.warm === true || options.wait === true)) {
    throw new CliError(`--explain executes nothing; it cannot be combined with ${options.warm === true ? '--warm' : '--wait'}`);
  }
  if (options.wait === true && request.requestType !== 'write') {
    throw new CliError('--wait applies to write requests (create_index / drop_index); this request is a read');
  }
  const url = `${target.base}${options.explain === true ? '/v2/explain' : '/v2/query'}`;
  const headers: Record<string, string> = { 'content-type': 'application/json', ...target.headers };
  if (options.warm === true) headers['x-svc-warm'] = 'true';

  let response;
  try {
    response = await httpRequest(url, { method: 'POST', headers, body: request.body, timeoutMs: options.timeoutMs });
  } catch (err) {
    if (err instanceof Unreachable) throw new CliError(`cannot reach ${target.label} at ${url} (${err.reason}).\nHint: ${target.hint}`);
    throw err;
  }

  if (response.status === 204) return;
  if (response.status < 200 || response.status > 299) {
    const body = response.text.trim();
    const retryAfter = response.status === 429 ? response.header('retry-after') : null;
    throw new CliError(
      `Query failed with HTTP ${response.status}: ${body === '' ? '(no body)' : body}` + (retryAfter === null ? '' : `\nRetry-After: ${retryAfter} s`),
      { bare: true },
    );
  }
  if (response.text.trim() === '') return;
  const out = isJson(response.text) ? formatJson(response.text, options.compact === true ? 0 : 2) : response.text.trimEnd();
  process.stdout.write(`${out}\n`);
  if (options.wait === true) await waitForReceipts(response.text, target, headers, options.timeoutMs);
}

/** --wait: the answer's receipts with an operation, polled through /v2/query until settled. */
async function waitForReceipts(answer: string, target: Target, headers: Record<string, string>, timeoutMs: number): Promise<void> {
  if (!isJson(answer)) return;
  const receipts = findReceipts(JSON.parse(answer));
  if (receipts.length === 0) {
    process.stderr.write('no index operation to wait for (the answer holds no accepted / existing_operation receipt)\n');
    return;
  }
  const url = `${target.base}/v2/query`;
  const pollHeaders = { ...headers };
  delete pollHeaders['x-svc-warm'];
  await waitForOperations(receipts, {
    sink: process.stderr,
    send: async (body) => {
      try {
        return await httpRequest(url, { method: 'POST', headers: pollHeaders, body, timeoutMs });
      } catch (err) {
        if (err instanceof Unreachable) throw new CliError(`cannot reach ${target.label} at ${url} while waiting for index operations (${err.reason}).\nHint: ${target.hint}`);
        throw err;
      }
    },
  });
}

async function prepare(options: QueryOptions): Promise<PreparedRequest> {
  if (options.params !== undefined && (options.file !== undefined || options.json !== undefined)) {
    throw new CliError('--params applies to -e/--ts and --ts-file; a JSON request carries its values in "parameters"');
  }
  if (options.file !== undefined) return readRequestFile(options.file);
  if (options.json !== undefined) return checkRequestText(options.json, '--json');
  if (options.ts !== undefined) return requestFromExpression(options.ts, options.params);
  return requestFromTsFile(options.tsFile!, options.params);
}

function resolveTarget(name: string, options: QueryOptions): Target {
  const cloudFlags = (['gatewayUrl', 'authHeader', 'authScheme', 'authEnv', 'databaseId'] as const).filter((k) => options[k] !== undefined);
  const localFlags = (['host', 'port'] as const).filter((k) => options[k] !== undefined);
  const root = findProjectRoot();

  if (root === null) {
    // No project: --host/--port alone address a server (e.g. one run with `svc serve`).
    if (localFlags.length === 0) {
      throw new CliError(`no svc.toml found in ${process.cwd()} or any parent directory: run \`svc init local\`, or address a server directly with --host/--port`);
    }
    const base = localBaseUrl(options.host ?? defaultHost, options.port ?? defaultPort);
    return { base, headers: {}, label: 'the server', hint: 'start a server there (`svc serve --port <port>`), or check --host and --port.' };
  }

  const project = loadProjectAt(root);
  const instance = findInstance(project, name);
  if (instance.kind === 'local') {
    if (cloudFlags.length > 0) throw new CliError(`"${name}" is a local instance; --gateway-url, --auth-header, --auth-scheme, --auth-env and --database-id apply to cloud instances`);
    return {
      base: localBaseUrl(options.host ?? instance.host, options.port ?? instance.port),
      headers: {},
      label: `local instance "${name}"`,
      hint: `start it with \`svc start ${name}\` and check it with \`svc status ${name}\`.`,
    };
  }

  if (localFlags.length > 0) throw new CliError(`"${name}" is a cloud instance ([enterprise.${name}]); --host and --port apply to local instances (a cloud instance is addressed by gateway_url)`);
  const settings = resolveCloudSettings(project, instance, options);
  const apiKey = requireApiKey(project, settings);
  return {
    base: settings.gatewayUrl,
    headers: cloudHeaders(settings, apiKey),
    label: `cloud instance "${name}"`,
    hint: cloudHint(name, project.configPath),
  };
}
