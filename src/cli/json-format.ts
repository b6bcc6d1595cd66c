// Re-indents JSON text without parsing its values, so what the server sent survives
// exactly: integers beyond 2^53 (u64 IDs), `-0`, number spellings, duplicate keys and key
// order. JSON.parse + JSON.stringify would round big IDs and drop duplicates.
//
// The input must already be valid JSON (the caller checks with JSON.parse); this is a
// single pass over the characters with a depth counter, no recursion, so nesting depth is
// bounded only by memory. The pretty layout is exactly JSON.stringify(value, null, indent):
// `{}` / `[]` for empty containers, one member per line, `"key": value`.

/** Pretty (indent > 0) or compact (indent 0) JSON text of the valid JSON `text`. */
export function formatJson(text: string, indent: number): string {
  const pretty = indent > 0;
  const chunks: string[] = [];
  let depth = 0;
  let i = 0;
  const n = text.length;
  const newline = (): void => {
    if (pretty) chunks.push('\n' + ' '.repeat(depth * indent));
  };
  const nextSignificant = (from: number): number => {
    let j = from;
    while (j < n && isSpace(text.charCodeAt(j))) j++;
    return j;
  };
  while (i < n) {
    const c = text.charCodeAt(i);
    if (isSpace(c)) {
      i++;
    } else if (c === 0x22 /* " */) {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === 0x5c /* \ */) j += 2;
        else if (d === 0x22) break;
        else j++;
      }
      chunks.push(text.slice(i, j + 1));
      i = j + 1;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const close = c === 0x7b ? 0x7d : 0x5d;
      const j = nextSignificant(i + 1);
      if (text.charCodeAt(j) === close) {
        chunks.push(c === 0x7b ? '{}' : '[]');
        i = j + 1;
      } else {
        chunks.push(text[i]!);
        depth++;
        newline();
        i++;
      }
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
      newline();
      chunks.push(text[i]!);
      i++;
    } else if (c === 0x2c /* , */) {
      chunks.push(',');
      newline();
      i++;
    } else if (c === 0x3a /* : */) {
      chunks.push(pretty ? ': ' : ':');
      i++;
    } else {
      // A number or literal: copy up to the next structural character or space.
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (isSpace(d) || d === 0x2c || d === 0x7d || d === 0x5d || d === 0x3a) break;
        j++;
      }
      chunks.push(text.slice(i, j));
      i = j;
    }
  }
  return chunks.join('');
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** True when `text` is one JSON value (JSON.parse accepts it). */
export function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
