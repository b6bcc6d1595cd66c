// Identifiers and API key secrets. IDs are random (not sequential) so one database's ID
// tells nothing about another's; key secrets are 32 random bytes behind a recognisable
// prefix, so a leaked key is easy to spot by secret scanners and in support requests.
// Only the SHA-256 of a secret is stored: a copy of the store does not hold usable keys.
import { createHash, randomBytes } from 'node:crypto';

export const apiKeyPrefix = 'svc_';
const apiKeySecretBytes = 32;
/** `svc_` + 43 base64url characters. */
export const apiKeyPattern = /^svc_[A-Za-z0-9_-]{43}$/;

export function newApiKeySecret(): string {
  return apiKeyPrefix + randomBytes(apiKeySecretBytes).toString('base64url');
}

/** What the store keeps and `grantForKeyHash` takes: lower-case hex SHA-256 of the secret. */
export function apiKeyHash(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** `ws_`, `db_`, `key_` + 20 hex characters (80 random bits). Plain ASCII: fits a header. */
export function newId(kind: 'ws' | 'db' | 'key'): string {
  return `${kind}_${randomBytes(10).toString('hex')}`;
}

const slugAlphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
const slugBaseChars = 24;

/**
 * A URL slug: the name lower-cased to [a-z0-9-] (at most 24 characters) plus 6 random
 * characters, so two databases named alike still get distinct slugs; the store's unique
 * index is the guarantee, and a collision makes the caller draw again.
 */
export function newSlug(name: string): string {
  const base = name.toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, slugBaseChars).replace(/-+$/, '');
  const random = randomBytes(6);
  let suffix = '';
  for (const byte of random) suffix += slugAlphabet[byte % slugAlphabet.length];
  return base === '' ? `db-${suffix}` : `${base}-${suffix}`;
}
