// TypeScript input of `svc query`: `-e/--ts <expr>` and `--ts-file <path>`.
//
// -e: the expression is wrapped in a module that imports the client's exports, transpiled
//     with esbuild's transformSync (types stripped, ~0.1 s), and imported from a `data:`
//     URL. The import names the client by its file URL, the very module this CLI ships
//     (dist/src/client/index.js, exported as `svcdb/client`), so nothing is installed and
//     the builder classes are the ones `instanceof` checks here.
// --ts-file: the file is bundled with esbuild (its relative imports and packages are
//     inlined; `svcdb/client` and `svcdb` resolve to this CLI's own modules and stay
//     external) and imported the same way; its default export is the batch. The client's
//     exports are also set as globals, so a file may use `g`, `readBatch`, ... without
//     importing them.
//
// Either way the value must be a readBatch()/writeBatch() builder: the request (and its
// request_type) comes from `toRequest()`, serialised with the client's bigint-exact writer.
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { CliError, messageOf } from './errors.js';
import type { PreparedRequest } from './request-input.js';

type ClientModule = typeof import('../client/index.js');
type WireRequest = import('../client/index.js').WireRequest;
type Esbuild = typeof import('esbuild');

const clientUrl = new URL('../client/index.js', import.meta.url).href;
const engineUrl = new URL('../index.js', import.meta.url).href;
const nodeMajorMin = 20;

/** Lines the wrapper adds before the expression (for error positions). */
const wrapperLinesBefore = 2;

export async function requestFromExpression(expression: string, params?: string): Promise<PreparedRequest> {
  if (expression.trim() === '') throw new CliError('-e/--ts needs a TypeScript expression, e.g. -e "readBatch().varAs(\'n\', g().n().count()).returning([\'n\'])"');
  const client = await loadClient();
  const esbuild = await loadEsbuild();
  const names = scopeNames(client);
  const source = `import { ${names.join(', ')} } from ${JSON.stringify(clientUrl)};\nexport default (\n${expression}\n);\n`;
  let code: string;
  try {
    code = esbuild.transformSync(source, { loader: 'ts', format: 'esm', target: `node${nodeMajorMin}`, sourcefile: '-e' }).code;
  } catch (err) {
    throw new CliError(`the -e expression does not compile:\n${formatEsbuildErrors(err, wrapperLinesBefore, expression.split('\n').length)}`);
  }
  let value: unknown;
  try {
    value = (await importModule(code)).default;
    if (isThenable(value)) value = await value;
  } catch (err) {
    throw new CliError(`the -e expression failed: ${describeThrown(err)}`);
  }
  return toPrepared(client, value, 'the -e expression', 'evaluate to', params);
}

export async function requestFromTsFile(path: string, params?: string): Promise<PreparedRequest> {
  const file = resolve(path);
  if (!existsSync(file) || !statSync(file).isFile()) throw new CliError(`cannot read --ts-file ${path}: no such file`);
  const client = await loadClient();
  const esbuild = await loadEsbuild();
  let code: string;
  try {
    const result = await esbuild.build({
      entryPoints: [file],
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'node',
      target: `node${nodeMajorMin}`,
      logLevel: 'silent',
      plugins: [{
        name: 'svcdb-self',
        setup(build) {
          build.onResolve({ filter: /^svcdb(\/client)?$/ }, (args) => ({ path: args.path === 'svcdb' ? engineUrl : clientUrl, external: true }));
        },
      }],
    });
    code = result.outputFiles[0]!.text;
  } catch (err) {
    throw new CliError(`--ts-file ${path} does not compile:\n${formatEsbuildErrors(err, 0, Infinity)}`);
  }
  const globals = globalThis as unknown as Record<string, unknown>;
  const clientExports = client as unknown as Record<string, unknown>;
  for (const name of scopeNames(client)) if (!(name in globals)) globals[name] = clientExports[name];
  let value: unknown;
  try {
    value = (await importModule(code)).default;
    if (isThenable(value)) value = await value;
  } catch (err) {
    throw new CliError(`--ts-file ${path} failed: ${describeThrown(err)}`);
  }
  return toPrepared(client, value, `--ts-file ${path}`, '`export default`', params);
}

async function loadClient(): Promise<ClientModule> {
  const major = Number(process.versions.node.split('.')[0]);
  if (!(major >= nodeMajorMin)) {
    throw new CliError(`TypeScript input needs Node.js ${nodeMajorMin} or later (this is ${process.version}); install it, or send JSON with --json or --file`);
  }
  try {
    return await import('../client/index.js');
  } catch (err) {
    throw new CliError(`cannot load the svcdb client library (${clientUrl}): ${messageOf(err)}; send JSON with --json or --file instead`);
  }
}

async function loadEsbuild(): Promise<Esbuild> {
  try {
    return await import('esbuild');
  } catch (err) {
    throw new CliError(`cannot load esbuild, which compiles TypeScript input: ${messageOf(err)}; reinstall svcdb, or send JSON with --json or --file`);
  }
}

/** The client's value exports usable as identifiers (g, readBatch, writeBatch, defineParams, param, P, E, ...). */
function scopeNames(client: ClientModule): string[] {
  return Object.keys(client).filter((name) => name !== 'default' && /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name)).sort();
}

async function importModule(code: string): Promise<{ default?: unknown }> {
  return await import(`data:text/javascript;base64,${Buffer.from(code, 'utf8').toString('base64')}`) as { default?: unknown };
}

function toPrepared(client: ClientModule, value: unknown, what: string, verb: string, params: string | undefined): PreparedRequest {
  if (value instanceof client.Batch) {
    let values: Record<string, unknown> | undefined;
    if (params !== undefined) {
      let parsed: unknown;
      try {
        parsed = client.parseResponseJson(params); // integers beyond 2^53 stay exact (bigint)
      } catch (err) {
        throw new CliError(`--params is not valid JSON: ${messageOf(err)}`);
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new CliError('--params must be a JSON object of parameter values');
      values = parsed as Record<string, unknown>;
    }
    try {
      // Untyped values are checked by the batch's schema (or encoded as given) at run time.
      const request = (value as unknown as { toRequest(values?: unknown): WireRequest }).toRequest(values);
      return { body: client.writeJson(request), requestType: request.request_type };
    } catch (err) {
      throw new CliError(`${what}: cannot build the request: ${describeThrown(err)}`);
    }
  }
  if (value instanceof client.Traversal) {
    throw new CliError(
      `${what} must ${verb} a readBatch() or writeBatch() builder, not a traversal; wrap it, e.g. ` +
      `readBatch().varAs('result', <traversal>).returning(['result'])`,
    );
  }
  const got = value === null ? 'null' : value === undefined ? 'undefined' : typeof value === 'object' ? `an object (${value.constructor?.name ?? 'no prototype'})` : typeof value;
  throw new CliError(`${what} must ${verb} a readBatch() or writeBatch() builder; got ${got}`);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

function describeThrown(err: unknown): string {
  if (err instanceof Error) return err.name === 'Error' ? err.message : `${err.name}: ${err.message}`;
  return String(err);
}

interface EsbuildMessage {
  text: string;
  location: { file: string; line: number; column: number; lineText: string } | null;
}

/** esbuild's messages with positions in the user's text (`lineOffset` wrapper lines removed). */
function formatEsbuildErrors(err: unknown, lineOffset: number, userLines: number): string {
  const errors = (err as { errors?: EsbuildMessage[] }).errors;
  if (!Array.isArray(errors) || errors.length === 0) return `  ${messageOf(err)}`;
  return errors.slice(0, 5).map((e) => {
    if (e.location === null) return `  ${e.text}`;
    const { file, line, column, lineText } = e.location;
    const userLine = line - lineOffset;
    if (userLine < 1 || userLine > userLines) return `  ${file}: ${e.text} (at the end of the expression: is something unclosed?)`;
    return `  ${file}:${userLine}:${column + 1}: ${e.text}\n    ${lineText}\n    ${' '.repeat(column)}^`;
  }).join('\n');
}
