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
      } else {
        const text = err instanceof Error ? (err.stack ?? err.message) : String(err);
        process.stderr.write(`svc ${command}: unexpected error: ${text}\n`);
        process.exitCode = 1;
      }
    }
  };
}

/** The message of an unknown thrown value. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
