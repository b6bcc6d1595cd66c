// `npm run bench [-- options]`: run.ts with the options, then disk.ts and kernels.ts;
// `npm run bench -- --scale [options]`: only the scale benchmark (scale.ts);
// `npm run bench -- indexes [options]` (or `--indexes`): only the secondary-index scenario (indexes.ts);
// `npm run bench -- text [options]` (or `--text`): only the text engine scenario (text.ts).
// (npm appends `-- options` to the end of the script line, so one entry point hands them
// to the right benchmark instead of to whichever command happens to come last.)
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const here = (f: string): string => fileURLToPath(new URL(f, import.meta.url));
const indexes = args.includes('indexes') || args.includes('--indexes');
const text = args.includes('text') || args.includes('--text');
const steps: [string, string[]][] = args.includes('--scale')
  ? [['./scale.js', args.filter((a) => a !== '--scale')]]
  : indexes
    ? [['./indexes.js', args.filter((a) => a !== 'indexes' && a !== '--indexes')]]
    : text
      ? [['./text.js', args.filter((a) => a !== 'text' && a !== '--text')]]
      : [['./run.js', args], ['./disk.js', []], ['./kernels.js', []]];
for (const [script, argv] of steps) {
  // The text bench forces collections to measure its peers' heaps.
  const flags = script === './text.js' ? ['--expose-gc'] : [];
  const r = spawnSync(process.execPath, [...flags, here(script), ...argv], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
