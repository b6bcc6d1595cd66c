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
