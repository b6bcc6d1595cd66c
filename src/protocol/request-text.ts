// Where a request body's top-level `parameters` member sits in its JSON text, found
// without parsing the rest: the plan cache (exec/request.ts) keys a request on the text
// around it, so one query text with other parameter values reuses its decoded and planned
// query. Only structure is read here (strings, nesting, separators); validity is left to
// the parser: a body whose text around the span equals a body that decoded, and whose span
// parses as one JSON value, is that body with another value in the same place.
//
// Two finders: parametersSpan scans the whole text and is exact (the cache stores only
// keys made with it); lastParametersSpan only looks at the last `"parameters":` in the
// text, which is cheap, and may be wrong (an inner member of that name, a string). Its
// span is good for looking up: a key made from it equals a stored key only if the text
// up to the span equals a text whose top-level member starts there, and a text's structure
// up to a point is fixed by the text up to that point.

const QUOTE = 0x22, BACKSLASH = 0x5c, COLON = 0x3a, COMMA = 0x2c;
const LBRACE = 0x7b, RBRACE = 0x7d, LBRACKET = 0x5b, RBRACKET = 0x5d;

function skipWs(s: string, i: number): number {
  for (;;) {
    const c = s.charCodeAt(i);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
    else return i;
  }
}

/** The index after the string whose opening quote is at i, or -1 when it does not end. */
function stringEnd(s: string, i: number): number {
  for (let j = i + 1; j < s.length; j++) {
    const c = s.charCodeAt(j);
    if (c === BACKSLASH) j++;
    else if (c === QUOTE) return j + 1;
  }
  return -1;
}

/** The index after the value starting at i, going by strings and brackets only; -1 when it does not end. */
function valueEnd(s: string, i: number): number {
  let depth = 0;
  for (let j = i; j < s.length;) {
    const c = s.charCodeAt(j);
    if (c === QUOTE) {
      j = stringEnd(s, j);
      if (j < 0 || depth === 0) return j;
    } else if (c === LBRACE || c === LBRACKET) {
      depth++;
      j++;
    } else if (c === RBRACE || c === RBRACKET) {
      if (depth === 0) return j; // a scalar's end, or nothing at all
      depth--;
      j++;
      if (depth === 0) return j;
    } else if (depth === 0 && (c === COMMA || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09)) {
      return j;
    } else j++;
  }
  return depth === 0 ? s.length : -1;
}

/**
 * [start, end) of the value after the last `"parameters"` followed by `:` in the text, as
 * far as its structure goes; null when there is none. A candidate only (see above).
 */
export function lastParametersSpan(s: string): [number, number] | null {
  const name = s.lastIndexOf('"parameters"');
  if (name < 0) return null;
  const colon = skipWs(s, name + 12);
  if (s.charCodeAt(colon) !== COLON) return null;
  const start = skipWs(s, colon + 1);
  const end = valueEnd(s, start);
  return end > start ? [start, end] : null;
}

/**
 * Walks the members of the object that is the text `s`, by structure only, calling `visit`
 * with each member's name (its quotes at [nameStart, nameEnd)) and value ([valueStart,
 * valueEnd)) until it returns false. 'end': the object closes at the end of the text;
 * 'stopped': `visit` stopped the walk; null: the text is not one object as far as this scan
 * can tell, or it ends first (a body's start only).
 */
function walkTopLevelMembers(
  s: string, visit: (nameStart: number, nameEnd: number, valueStart: number, valueEnd: number) => boolean,
): 'end' | 'stopped' | null {
  let i = skipWs(s, 0);
  if (s.charCodeAt(i) !== LBRACE) return null;
  i = skipWs(s, i + 1);
  for (;;) {
    if (s.charCodeAt(i) !== QUOTE) return null;
    const nameStart = i;
    const nameEnd = stringEnd(s, i);
    if (nameEnd < 0) return null;
    i = skipWs(s, nameEnd);
    if (s.charCodeAt(i) !== COLON) return null;
    i = skipWs(s, i + 1);
    const end = valueEnd(s, i);
    if (end <= i) return null;
    if (!visit(nameStart, nameEnd, i, end)) return 'stopped';
    i = skipWs(s, end);
    const c = s.charCodeAt(i);
    if (c === COMMA) i = skipWs(s, i + 1);
    else if (c === RBRACE) return skipWs(s, i + 1) === s.length ? 'end' : null;
    else return null;
  }
}

/** Whether the member name at [nameStart, nameEnd) is written `"name"` (no escapes). */
function isName(s: string, nameStart: number, nameEnd: number, name: string): boolean {
  return nameEnd - nameStart === name.length + 2 && s.startsWith(name, nameStart + 1);
}

/**
 * [start, end) of the value of the top-level member whose name is written `"parameters"`
 * (no escapes), or null when there is none, it is there twice, or the text is not an
 * object as far as this scan can tell (the parser then reports what is wrong).
 */
export function parametersSpan(s: string): [number, number] | null {
  let found: [number, number] | null = null;
  const walked = walkTopLevelMembers(s, (nameStart, nameEnd, valueStart, valueEnd) => {
    if (!isName(s, nameStart, nameEnd, 'parameters')) return true;
    if (found !== null) return false; // twice
    found = [valueStart, valueEnd];
    return true;
  });
  return walked === 'end' ? found : null;
}

/**
 * The body's `request_type` when a top-level member written `"request_type"` (no escapes)
 * holds `"read"` or `"write"` within `s`, which may be only the start of the body; null when
 * `s` ends first or anything before it is not as expected. The HTTP thread sends a large
 * write straight to the writer with it (server/inline-reads.ts), instead of a reader that
 * parses the whole body only to forward it; the writer decodes it as fully as a reader
 * would, so a wrong guess only changes which thread answers.
 */
export function leadingRequestType(s: string): 'read' | 'write' | null {
  let value: string | null = null;
  walkTopLevelMembers(s, (nameStart, nameEnd, valueStart, valueEnd) => {
    if (!isName(s, nameStart, nameEnd, 'request_type')) return true;
    value = s.slice(valueStart, valueEnd);
    return false;
  });
  return value === '"write"' ? 'write' : value === '"read"' ? 'read' : null;
}
