// RFC 3339 date-times (envelope.md §3.3), checked the same way by the server's decoder and
// the client library: the client must refuse what the server refuses rather than turn an
// impossible date (February 30th, 24:00) into another, valid one as JavaScript's Date does.

const rfc3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

interface Parts { year: number; month: number; day: number; hour: number; minute: number; second: number; fraction: string; offsetMinutes: number }

/** RFC 3339 §5.6 with its ranges (§5.7): the offset's hours 00-23 and minutes 00-59 too. */
function parts(s: string): Parts | null {
  const m = rfc3339.exec(s);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const offsetHour = m[9] === undefined ? 0 : Number(m[9]), offsetMinute = m[10] === undefined ? 0 : Number(m[10]);
  if (month < 1 || month > 12) return null;
  // Gregorian leap years, year 0000 included (Date.UTC would read years 0-99 as 1900-1999).
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const daysInMonth = month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!;
  if (!(day >= 1 && day <= daysInMonth && hour <= 23 && minute <= 59 && second <= 60 && offsetHour <= 23 && offsetMinute <= 59)) return null;
  const offsetMinutes = (m[8] === '-' ? -1 : 1) * (offsetHour * 60 + offsetMinute);
  return { year, month, day, hour, minute, second, fraction: m[7] ?? '', offsetMinutes };
}

export function isRfc3339(s: string): boolean {
  return parts(s) !== null;
}

/**
 * Epoch milliseconds of an RFC 3339 date-time (fractions past milliseconds cut), or null
 * when `s` is not one. A leap second (:60) is the start of the next second, as POSIX time
 * counts it.
 */
export function rfc3339Ms(s: string): number | null {
  const p = parts(s);
  if (p === null) return null;
  const d = new Date(0);
  d.setUTCFullYear(p.year, p.month - 1, p.day);
  d.setUTCHours(p.hour, p.minute, p.second, Number(p.fraction.slice(0, 3).padEnd(3, '0')));
  return d.getTime() - p.offsetMinutes * 60_000;
}
