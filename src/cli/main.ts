#!/usr/bin/env node
// The `svc` command. Each subcommand lives in its own file under src/cli/ and registers
// itself on the program here; this file only assembles them and runs the parser.
import { Command } from 'commander';
import { registerServe } from './serve.js';

const program = new Command('svc')
  .description('svcdb: a graph database served over POST /v2/query')
  .showHelpAfterError()
  .enablePositionalOptions();

registerServe(program);

await program.parseAsync(process.argv);
