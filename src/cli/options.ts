// Option parsers shared by the svc commands (commander calls them with the option's text).
import { InvalidArgumentError } from 'commander';

/** A whole number of `name` in [min, max], else commander's usage error naming the range. */
export function integerOption(name: string, min: number, max: number): (value: string) => number {
  return (value: string) => {
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}.`);
    }
    return Number(value);
  };
}

/** A TCP port, 1-65535. */
export function portOption(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 65535) throw new InvalidArgumentError('must be an integer from 1 to 65535.');
  return Number(value);
}
