#!/usr/bin/env -S MALLOC_MMAP_THRESHOLD_=262144 node --max-semi-space-size=1
// (The node flag and the glibc settings size the server's memory: src/server/launch.ts says
// why, and svc start passes the same when it spawns a server. A test keeps this line equal
// to launch.ts. Without `svc`, start the server with `npm start` or with these in front of
// `node dist/src/cli/main.js serve`.)
// The `svc` command. Each subcommand lives in its own file under src/cli/ and registers
// itself on the program here; this file only assembles them and runs the parser.
import { Command } from 'commander';
import { registerCloudAdmin } from './cloud-admin.js';
import { registerGateway } from './gateway.js';
import { registerInit } from './init.js';
import { registerQuery } from './query.js';
import { registerRepair } from './repair.js';
import { registerStart } from './start.js';
import { registerStatus } from './status.js';
import { registerStop } from './stop.js';
import { registerSync } from './sync.js';
import { installedVersion, registerUpdate } from './update.js';

const program = new Command('svc')
  .description('svcdb: a graph database served over POST /v2/query')
  .version(installedVersion(), '-V, --version', 'print the installed version')
  .showHelpAfterError()
  .enablePositionalOptions();

// serve.js loads the whole server (~0.2 s); only `svc serve` and the help need it.
const first = process.argv[2];
if (first === undefined || first === 'serve' || first === 'help' || first.startsWith('-')) {
  const { registerServe } = await import('./serve.js');
  registerServe(program);
}
registerInit(program);
registerStart(program);
registerStop(program);
registerStatus(program);
registerQuery(program);
registerSync(program);
registerRepair(program);
registerUpdate(program);
registerCloudAdmin(program);
registerGateway(program);

await program.parseAsync(process.argv);
