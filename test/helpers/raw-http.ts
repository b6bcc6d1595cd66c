// Raw HTTP/1.1 over a socket, for requests no client library sends (repeated or conflicting
// framing headers, hidden requests).
import { connect } from 'node:net';

/** Sends `text` on a new connection; resolves with all it received once the server closed it (or `waitMs` passed). */
export function exchange(port: number, text: string, waitMs = 1000): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.setEncoding('utf8').on('data', (d: string) => { received += d; });
    socket.on('error', () => undefined);
    const timer = setTimeout(() => socket.destroy(), waitMs);
    socket.on('close', () => { clearTimeout(timer); resolve(received); });
    socket.write(text);
  });
}
