// `svc init local`: scaffolds a project in an empty directory. Creates svc.toml, the
// state directory, .gitignore entries, AGENTS.md and examples/request.json; no language
// project (no package.json, no Cargo.toml).
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';
import type { Command } from 'commander';
import { action, CliError } from './errors.js';
import { checkInstanceName, configFileName, defaultInstanceName, defaultPort, defaultStateDir } from './project.js';
import { portOption } from './options.js';
import { COUNT_NODES_REQUEST } from './query.js';

interface InitOptions {
  name: string;
  port: number;
  disk?: boolean;
  force?: boolean;
  dir?: string;
}

/** Entries init makes sure .gitignore has (SPEC "Command-line client"). */
export const gitignoreEntries: readonly string[] = [`${defaultStateDir}/`, '.env', 'target/', '*.log'];

/** Entries an otherwise empty directory may already hold (`git init` first is common). */
const ignorableEntries: ReadonlySet<string> = new Set(['.git']);

export function registerInit(program: Command): void {
  program
    .command('init')
    .description('create a project in an empty directory: svc.toml with one local instance, a state directory, .gitignore entries, AGENTS.md and examples/request.json')
    .argument('<target>', 'what to set up; only "local" (a local instance) is supported')
    .option('--name <instance>', 'name of the local instance', defaultInstanceName)
    .option('--port <port>', 'port of the local instance', portOption, defaultPort)
    .option('--disk', 'configure the instance with disk storage (persisted under .svc/data/<instance>) instead of memory')
    .option('--dir <path>', 'directory to initialise (default: the working directory; created when missing)')
    .option('--force', 'initialise a non-empty directory: overwrite svc.toml, AGENTS.md and examples/request.json, add missing .gitignore entries')
    .addHelpText('after', '\nExample:\n  mkdir my-graph && cd my-graph && svc init local && svc start dev')
    .action(action('init', async (target: string, options: InitOptions) => {
      init(target, options);
    }));
}

function init(target: string, options: InitOptions): void {
  if (target !== 'local') throw new CliError(`unknown target "${target}": only \`svc init local\` is supported (cloud databases are added as [enterprise.<name>] tables, see \`svc sync --help\`)`);
  const name = checkInstanceName(options.name);
  const dir = resolve(options.dir ?? process.cwd());
  if (existsSync(dir)) {
    if (!statSync(dir).isDirectory()) throw new CliError(`${dir} is not a directory`);
  } else {
    mkdirSync(dir, { recursive: true });
  }

  const present = readdirSync(dir).filter((entry) => !ignorableEntries.has(entry));
  if (present.length > 0 && options.force !== true) {
    const shown = present.slice(0, 5).join(', ') + (present.length > 5 ? `, ... (${present.length} entries)` : '');
    throw new CliError(
      `${dir} is not empty (${shown}). Run \`svc init local\` in an empty directory, or pass --force to write the project files anyway ` +
      `(svc.toml, AGENTS.md and examples/request.json are overwritten; missing .gitignore entries are appended).`,
    );
  }

  const projectName = basename(dir).replace(/[^A-Za-z0-9_.-]/g, '-') || 'svc-project';
  const storage = options.disk === true ? 'disk' : 'memory';
  const written: string[] = [];
  const write = (path: string, text: string): void => {
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, text);
    written.push(relative(dir, path));
  };

  write(join(dir, configFileName), svcToml(projectName, name, options.port, storage));
  mkdirSync(join(dir, defaultStateDir), { recursive: true });
  written.push(`${defaultStateDir}/`);
  written.push(`.gitignore${updateGitignore(join(dir, '.gitignore'))}`);
  write(join(dir, 'AGENTS.md'), agentsMd(name, options.port, storage));
  write(join(dir, 'examples', 'request.json'), exampleRequest);

  const out = process.stdout;
  out.write(`Initialised svcdb project "${projectName}" in ${dir}\n`);
  for (const file of written) out.write(`  ${file}\n`);
  out.write(`\nNext:\n  svc start ${name}${storage === 'memory' ? '            # in-memory; add --disk to persist' : ''}\n`);
  out.write(`  svc query ${name} --file examples/request.json\n  svc stop ${name}\n`);
}

/** Appends the missing entries; returns a note for the file list. */
function updateGitignore(path: string): string {
  const existing = existsSync(path) ? readFileSync(path, 'utf8') : '';
  const lines = new Set(existing.split(/\r?\n/).map((l) => l.trim()));
  const missing = gitignoreEntries.filter((entry) => !lines.has(entry) && !lines.has(entry.replace(/\/$/, '')));
  if (missing.length === 0) return ' (already had the svc entries)';
  const prefix = existing.length === 0 ? '' : existing.endsWith('\n') ? '\n' : '\n\n';
  appendFileSync(path, `${prefix}# svcdb (svc init local)\n${missing.join('\n')}\n`);
  return existing.length === 0 ? '' : ` (added ${missing.join(', ')})`;
}

function svcToml(projectName: string, instance: string, port: number, storage: 'memory' | 'disk'): string {
  return `# svcdb project configuration, written by \`svc init local\`. Reference: docs/cli.md.

[project]
name = ${JSON.stringify(projectName)}
# Runtime used by \`svc start\`. The default, "process", runs \`svc serve\` as a background
# process. "docker" and "podman" are recognised, but no svcdb container image is published
# yet, so \`svc start\` says so and uses the process runtime.
# container_runtime = "process"

# A local instance: svc start ${instance} / svc query ${instance} ... / svc status ${instance} / svc stop ${instance}
[local.${instance}]
host = "127.0.0.1"
port = ${port}
# "memory": data is discarded when the instance stops. "disk": persisted under
# <state_dir>/data/${instance} (\`svc start ${instance} --disk\` also selects disk for one start).
storage = "${storage}"
# Pid file, log and disk data of the instance.
state_dir = "${defaultStateDir}"

# A cloud database: fill in gateway_url, keep the API key in the environment or .env
# (never in this file), then run \`svc sync prod\` to fetch the rest.
# [enterprise.prod]
# gateway_url = "https://gateway.example.com"
# query_auth_header = "Authorization"
# query_auth_scheme = "bearer"     # or "raw"
# query_auth_env = "SVC_API_KEY"
# database_id = ""
`;
}

function agentsMd(instance: string, port: number, storage: 'memory' | 'disk'): string {
  return `# Working with this svcdb project

This directory is an svcdb project: \`svc.toml\` configures a local graph database instance
named \`${instance}\` on http://127.0.0.1:${port} (storage: ${storage}). Every read and write is one
JSON request to \`POST /v2/query\`; the \`svc\` command line starts the instance and sends requests.

## Start, check, stop

\`\`\`sh
svc start ${instance}          # background process; waits until it is ready, prints the URL
svc status ${instance}         # running/stopped, pid, port, storage, uptime (--json for scripts)
svc stop ${instance}           # graceful; succeeds when already stopped
\`\`\`

${storage === 'memory'
    ? `Storage is in memory: stopping the instance discards its data. \`svc start ${instance} --disk\`
persists it under \`.svc/data/${instance}\`.`
    : `Storage is on disk under \`.svc/data/${instance}\`: data survives restarts.`}
The log is \`.svc/${instance}.log\`.

## Query

\`\`\`sh
svc query ${instance} --file examples/request.json         # a JSON request file
svc query ${instance} --json '${COUNT_NODES_REQUEST}'
svc query ${instance} -e "readBatch().varAs('n', g().n().count()).returning(['n'])"
svc query ${instance} --ts-file queries/report.ts          # a file whose default export is a batch
\`\`\`

- \`examples/request.json\` counts the nodes labelled \`User\` and returns \`{"node_count": N}\`.
- A request is \`{"request_type": "read"|"write", "query": {"read"|"write": {"entries": [...], "returns": [...]}}}\`;
  each entry is \`{"query": {"name": ..., "root": <operation tree>}}\`. Only read batches may use
  \`--warm\`; mutations (\`add_n\`, \`add_e\`, ...) need \`"write"\`.
- Output is pretty JSON (\`--compact\` for one line). A failure prints
  \`Query failed with HTTP <status>: {"error": <code>, "msg": <text>}\` and exits non-zero;
  branch on \`error\`, never on \`msg\`.

## Rules

- Do not commit \`.env\` or API keys; \`.svc/\` holds runtime state and is ignored.
- Cloud databases are \`[enterprise.<name>]\` tables in \`svc.toml\`; the API key comes from the
  variable named by \`query_auth_env\` (default \`SVC_API_KEY\`) in the shell or \`.env\`.
- \`svc <command> --help\` lists every flag.
`;
}

export const exampleRequest = `${JSON.stringify({
  request_type: 'read',
  query_name: 'count_users',
  query: {
    read: {
      entries: [
        {
          query: {
            name: 'node_count',
            root: { count: { input: { nodes_where: { predicate: { eq: { left: { property: '$label' }, right: { constant: { string: 'User' } } } } } } } },
          },
        },
      ],
      returns: ['node_count'],
    },
  },
}, null, 2)}\n`;
