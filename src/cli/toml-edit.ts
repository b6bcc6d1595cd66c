// Sets keys of one `[a.b]` table in TOML text while keeping everything else byte for byte
// (comments, order, other tables). Used by `svc sync` to write gateway settings into
// svc.toml; a TOML library's stringify would drop the comments users keep there.
//
// Line-based: the table is the `[a.b]` header line up to the next header line. A key that
// is already set has its line replaced; a new key goes after the table's last key line.
// A missing table is appended at the end. The caller re-parses the result and checks that
// it says what was intended, so a layout this does not understand (the table written with
// dotted keys or inline) is refused rather than corrupted.
import { stringify } from 'smol-toml';

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function setTableKeys(text: string, table: readonly [string, string], values: ReadonlyArray<readonly [string, string]>): string {
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  const lines = text.split(/\r?\n/);
  const trailingNewline = lines.length > 0 && lines[lines.length - 1] === '';
  if (trailingNewline) lines.pop();

  const [outer, inner] = table;
  const part = (name: string): string => `(?:${escapeRegExp(name)}|"${escapeRegExp(name)}"|'${escapeRegExp(name)}')`;
  const header = new RegExp(`^\\s*\\[\\s*${part(outer)}\\s*\\.\\s*${part(inner)}\\s*\\]\\s*(?:#.*)?$`);
  const anyHeader = /^\s*\[/;
  const rendered = values.map(([key, value]) => stringify({ [key]: value }).trim());

  const start = lines.findIndex((line) => header.test(line));
  if (start < 0) {
    while (lines.length > 0 && lines[lines.length - 1]!.trim() === '') lines.pop();
    if (lines.length > 0) lines.push('');
    lines.push(`[${outer}.${inner}]`, ...rendered);
    return lines.join(eol) + eol;
  }
  let end = start + 1;
  while (end < lines.length && !anyHeader.test(lines[end]!)) end++;

  let lastKeyLine = start;
  for (let i = start + 1; i < end; i++) {
    const trimmed = lines[i]!.trim();
    if (trimmed !== '' && !trimmed.startsWith('#')) lastKeyLine = i;
  }
  const additions: string[] = [];
  values.forEach(([key], index) => {
    const keyLine = new RegExp(`^\\s*${part(key)}\\s*=`);
    let found = false;
    for (let i = start + 1; i < end; i++) {
      if (keyLine.test(lines[i]!)) {
        lines[i] = rendered[index]!;
        found = true;
        break;
      }
    }
    if (!found) additions.push(rendered[index]!);
  });
  lines.splice(lastKeyLine + 1, 0, ...additions);
  return lines.join(eol) + (trailingNewline ? eol : '');
}
