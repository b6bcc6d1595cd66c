// `npm run bench [-- options]`: run.ts with the options, then disk.ts and kernels.ts;
// `npm run bench -- --scale [options]`: only the scale benchmark (scale.ts);
// `npm run bench -- indexes [options]` (or `--indexes`): only the secondary-index scenario (indexes.ts);
// `npm run bench -- vector [options]` (or `--vector`): the vector engine against its peers (vector.ts),
// then vector and text indexes in the server (search-server.ts);
// `npm run bench -- text [options]` (or `--text`): only the text engine scenario (text.ts);
// `npm run bench -- gateway [options]` (or `--gateway`): only the cloud gateway's cost (gateway.ts);
// `npm run bench -- memory [options]` (or `--memory`): where the server's RSS goes (memory.ts),
// then the property heap under updates that free and reuse its space (version-reuse.ts).
// (npm appends `-- options` to the end of the script line, so one entry point hands them
// to the right benchmark instead of to whichever command happens to come last.)
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const here = (f: string): string => fileURLToPath(new URL(f, import.meta.url));
/** The scenario named on the command line (as `name` or `--name`), with its options. */
const scenario = (name: string): string[] | null =>
  args.includes(name) || args.includes(`--${name}`) ? args.filter((a) => a !== name && a !== `--${name}`) : null;
const indexes = scenario('indexes'), vector = scenario('vector'), text = scenario('text'), gateway = scenario('gateway');
const memory = scenario('memory');
const steps: [string, string[]][] = args.includes('--scale')
  ? [['./scale.js', args.filter((a) => a !== '--scale')]]
  : indexes !== null ? [['./indexes.js', indexes]]
    : vector !== null ? [['./vector.js', vector], ['./search-server.js', vector]]
      : text !== null ? [['./text.js', text]]
        : gateway !== null ? [['./gateway.js', gateway]]
          : memory !== null ? [['./memory.js', memory], ['./version-reuse.js', memory]]
            : [['./run.js', args], ['./disk.js', []], ['./kernels.js', []]];
for (const [script, argv] of steps) {
  // The text bench forces collections to measure its peers' heaps.
  const flags = script === './text.js' ? ['--expose-gc'] : [];
  const r = spawnSync(process.execPath, [...flags, here(script), ...argv], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
