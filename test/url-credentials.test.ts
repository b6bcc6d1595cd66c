// URLs as messages and logs show them: no password, token or secret, wherever the URL
// carries it (user info or query parameters; a probe found `?password=` printed whole).
import { expect, it } from 'vitest';
import { describeStoreLocation } from '../src/cloud/open.js';
import { withoutCredentials } from '../src/url-credentials.js';
import { parseStorageUri } from '../src/durability/object-bucket.js';
import type { SvcError } from '../src/protocol/errors.js';

it('the control-plane store location hides a password given in user info or as a query parameter', () => {
  expect(describeStoreLocation('postgres://svc:hunter2@db.example:5432/cp')).toBe('postgres://svc:***@db.example:5432/cp');
  const shown = describeStoreLocation('postgres://svc@127.0.0.1:7940/cp?password=hunter2&sslmode=require&sslpassword=k3y&application_name=svc');
  expect(shown).not.toContain('hunter2');
  expect(shown).not.toContain('k3y');
  expect(shown).toBe('postgres://svc@127.0.0.1:7940/cp?password=***&sslmode=require&sslpassword=***&application_name=svc');
  expect(describeStoreLocation('postgresql://h/cp?PASSWORD=x%26y')).toBe('postgresql://h/cp?PASSWORD=***');
  expect(describeStoreLocation('sqlite:/tmp/cp.sqlite')).toBe('sqlite:/tmp/cp.sqlite');
});

it('withoutCredentials hides user info and secret query parameters, and keeps the rest', () => {
  expect(withoutCredentials('https://user:tok@registry.example/npm/')).toBe('https://***@registry.example/npm/');
  expect(withoutCredentials('https://registry.example/npm/?access_token=abc&x=1')).toBe('https://registry.example/npm/?access_token=***&x=1');
  expect(withoutCredentials('http://127.0.0.1:6969/v2/query?api_key=abc#frag')).toBe('http://127.0.0.1:6969/v2/query?api_key=***#frag');
  expect(withoutCredentials('http://127.0.0.1:6969/v2/query?timeout=5')).toBe('http://127.0.0.1:6969/v2/query?timeout=5');
  expect(withoutCredentials('http://u:pa?ss@host/x')).toBe('http://***@host/x');
  expect(withoutCredentials('http://u:pa/ss@host/x')).toBe('http://***@host/x');
});

it('a storage URI with credentials in it is refused, and the message does not show them', () => {
  let message = '';
  try {
    parseStorageUri('s3://AKIAXXX:supersecret@bucket/prefix');
  } catch (err) {
    message = (err as SvcError).msg;
  }
  expect(message).toContain('holds credentials');
  expect(message).not.toContain('supersecret');
  expect(message).not.toContain('AKIAXXX');
  // Raw secrets hold '/' and '?' (base64): still refused, still not shown (a review).
  for (const uri of ['s3://AKIAEXAMPLE:wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY@bucket/prefix', 's3://AKIAEXAMPLE:a?b@bucket/p']) {
    let shown = '';
    try { parseStorageUri(uri); } catch (err) { shown = (err as SvcError).msg; }
    expect(shown, uri).toContain('s3://***@bucket/');
    expect(shown, uri).not.toMatch(/wJal|K7MD|a\?b|AKIA/);
  }
  expect(() => parseStorageUri('s3://my-bucket/a/b')).not.toThrow();
  expect(parseStorageUri('s3://my_bucket.v2/a/b/')).toEqual({ bucket: 'my_bucket.v2', prefix: 'a/b' });
  expect(() => parseStorageUri('s3://bad:bucket/a')).toThrow(/a bucket name has letters, digits/);
});
