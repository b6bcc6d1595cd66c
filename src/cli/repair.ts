// `svc repair --disk DIR`: the documented way out of a directory that recovery refuses
// (docs/durability.md). Keeps an untouched copy, rebuilds DIR from what precedes the first
// damage, and says how many committed batches could not be recovered.
import type { Command } from 'commander';
import { resolve } from 'node:path';
import { action, CliError } from './errors.js';

interface RepairOptions {
  disk?: string;
  copyTo?: string;
}

export function registerRepair(program: Command): void {
  program
    .command('repair')
    .description('recover a --disk directory that fails to open: keep a copy, rebuild it from what precedes the damage')
    .requiredOption('--disk <dir>', 'the database directory (no server may be running on it)')
    .option('--copy-to <dir>', 'where to keep the untouched copy (default <dir>.damaged-<time>)')
    .action(action('repair', async (options: RepairOptions) => {
      const dir = resolve(options.disk!);
      const copyTo = resolve(options.copyTo ?? `${dir}.damaged-${new Date().toISOString().replace(/[:.]/g, '-')}`);
      // Loaded here: the storage code is not needed by the other commands.
      const { repairDirectory } = await import('../durability/disk-storage.js');
      const report = await repairDirectory(dir, copyTo).catch((err: unknown) => {
        throw new CliError(err instanceof Error ? err.message : String(err));
      });
      if (report.damage === null) {
        process.stdout.write(`${dir} opens as it is (epoch ${report.epoch}): nothing to repair\n`);
        return;
      }
      const lost = Math.max(0, report.newestEpochSeen - report.epoch);
      process.stdout.write([
        `damage: ${report.damage}`,
        `kept an untouched copy in ${report.copy}`,
        `recovered epoch ${report.epoch}; ${lost === 0 ? 'no committed batch is known to be lost' : `at least ${lost} committed batches (epochs ${report.epoch + 1}..${report.newestEpochSeen}) could not be recovered`}`,
        '',
      ].join('\n'));
      if (lost > 0) throw new CliError(`repaired, but ${lost} committed batches could not be recovered`, { exitCode: 3 });
    }));
}
