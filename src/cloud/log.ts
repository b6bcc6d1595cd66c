// The control plane's structured logs (pino, one JSON object a line on stderr). The code
// never hands a secret to the logger: API key secrets exist only in the creation answer,
// the admin token only in the comparison. Redaction is the second line of defence, for a
// field someone adds later: any property named like a secret is replaced, at the top
// level and one or two objects down (pino's paths name levels explicitly).
import { pino, type DestinationStream, type Logger } from 'pino';
import { apiKeyPrefix } from './secrets.js';

const secretFields = ['secret', 'token', 'authorization', 'Authorization', 'adminToken', 'apiKey', 'password', 'cookie'];
export const redactedPaths: readonly string[] = [
  ...secretFields,
  ...secretFields.map((f) => `*.${f}`),
  ...secretFields.map((f) => `*.*.${f}`),
];
export const redactedText = '[redacted]';

/** An API key (or a long part of one) anywhere in a text. */
const apiKeysInText = new RegExp(`${apiKeyPrefix}[A-Za-z0-9_-]{16,}`, 'g');

/**
 * `text` from a client with any API key in it redacted: for values a log shows that a client
 * chose (a key sent in the tenant header by mistake is still a secret).
 */
export function withoutApiKeys(text: string): string {
  return text.includes(apiKeyPrefix) ? text.replace(apiKeysInText, redactedText) : text;
}

export interface CloudLoggerOptions {
  /** Where lines go; default stderr (asynchronously, flushed at exit). */
  readonly destination?: DestinationStream;
  readonly level?: string;
}

export function createCloudLogger(name: string, options: CloudLoggerOptions = {}): Logger {
  return pino({
    name,
    level: options.level ?? process.env['SVC_LOG_LEVEL'] ?? 'info',
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: [...redactedPaths], censor: redactedText },
    base: { pid: process.pid },
  }, options.destination ?? pino.destination({ fd: 2, sync: false }));
}

export type { Logger };
