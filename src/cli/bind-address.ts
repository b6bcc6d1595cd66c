// Which addresses expose the local server beyond this machine. `svc serve` has no
// authentication at all, so binding anywhere but loopback deserves a warning.
import { isIP } from 'node:net';

/** True for `localhost`, 127.0.0.0/8, `::1` and the IPv4-mapped loopback `::ffff:127.x.y.z`. */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (h === 'localhost' || h === 'localhost.') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) {
    if (h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(h);
    return mapped !== null && mapped[1]!.startsWith('127.');
  }
  return false; // a host name, 0.0.0.0, ::, a LAN or public address
}

/** The warning for a bind address other machines can reach, or null for loopback. */
export function noAuthenticationWarning(host: string): string | null {
  if (isLoopbackHost(host)) return null;
  const everywhere = host === '0.0.0.0' || host === '::' || host === '[::]' || host === '';
  return `listening on ${everywhere ? `${host || '(all addresses)'} (every network interface)` : host}: the local server has no authentication; ` +
    'anyone who can reach this port can read and change every graph. Bind 127.0.0.1 unless a firewall or proxy guards it.';
}
