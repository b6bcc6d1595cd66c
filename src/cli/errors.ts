// Failures of `svc` subcommands. A CliError is an expected failure with a message meant for
// the user (bad flag combination, missing svc.toml, unreachable instance, HTTP error); the
// action wrapper prints it as `svc <command>: <message>` and sets a non-zero exit code.
// Anything else is a bug and is printed with its stack.

export class CliError extends Error {
  readonly exitCode: number;
  /** Print the message as is, without the `svc <command>: ` prefix. */
  readonly bare: boolean;
  constructor(message: string, options: { exitCode?: number; bare?: boolean } = {}) {
    super(message);
    this.name = 'CliError';
    this.exitCode = options.exitCode ?? 1;
    this.bare = options.bare ?? false;
  }
}

/** Wraps a commander action: CliError -> message + exit code, other errors -> stack + 1. */
export function action<A extends unknown[]>(command: string, run: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await run(...args);
    } catch (err) {
      if (err instanceof CliError) {
        process.stderr.write(err.bare ? `${err.message}\n` : `svc ${command}: ${err.message}\n`);
        process.exitCode = err.exitCode;
      } else if (isFileSystemError(err)) {
        // A path that is not what svc expects (state_dir naming a file, a pid file that is a
        // directory, no permission): the system's message names the path and what failed.
        process.stderr.write(`svc ${command}: ${err.message}\n`);
        process.exitCode = 1;
      } else {
        const text = err instanceof Error ? (err.stack ?? err.message) : String(err);
        process.stderr.write(`svc ${command}: unexpected error: ${text}\n`);
        process.exitCode = 1;
      }
    }
  };
}

function isFileSystemError(err: unknown): err is NodeJS.ErrnoException {
  const e = err as NodeJS.ErrnoException;
  return err instanceof Error && typeof e.code === 'string' && typeof e.syscall === 'string' && typeof e.path === 'string';
}

/** The message of an unknown thrown value. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
