// The control plane's logger (src/cloud/log.ts) redacts fields named like secrets even
// when a caller hands it one by mistake: at the top level and one or two objects down.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createCloudLogger, redactedText } from '../src/cloud/log.js';

function capture(): { stream: Writable; lines(): Record<string, unknown>[] } {
  let text = '';
  const stream = new Writable({ write(chunk: Buffer, _enc, done) { text += chunk.toString('utf8'); done(); } });
  return { stream, lines: () => text.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe('control-plane logs', () => {
  it('redact secrets, tokens and Authorization headers, and keep the rest', () => {
    const out = capture();
    const logger = createCloudLogger('test', { destination: out.stream });
    const secret = 'svc_THIS-IS-A-SECRET-THAT-MUST-NOT-BE-LOGGED-000';
    logger.info({ secret, keyId: 'key_1' }, 'top level');
    logger.info({ created: { secret, id: 'key_2' }, token: 'admin-token-value' }, 'one level down');
    logger.info({ req: { headers: { authorization: `Bearer ${secret}`, host: 'h' } } }, 'two levels down');
    logger.info({ headers: { Authorization: `Bearer ${secret}` } }, 'capitalised header');
    const lines = out.lines();
    expect(lines).toHaveLength(4);
    expect(JSON.stringify(lines)).not.toContain('THIS-IS-A-SECRET');
    expect(JSON.stringify(lines)).not.toContain('admin-token-value');
    expect(lines[0]).toMatchObject({ secret: redactedText, keyId: 'key_1', msg: 'top level' });
    expect(lines[1]).toMatchObject({ created: { secret: redactedText, id: 'key_2' }, token: redactedText });
    expect(lines[2]).toMatchObject({ req: { headers: { authorization: redactedText, host: 'h' } } });
    expect(lines[3]).toMatchObject({ headers: { Authorization: redactedText } });
  });
});
