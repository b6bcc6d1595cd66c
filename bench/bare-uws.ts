// The reference point for the HTTP scenarios: a bare uWebSockets.js server that reads
// the POST body and answers a fixed JSON body. Run as its own process by bench/servers.ts;
// prints `bare-uws listening on http://127.0.0.1:PORT` once listening.
import uWS from 'uWebSockets.js';
import { listenAddress } from './util.js';

const { host, port } = listenAddress(process.argv.slice(2));
const BODY = '{"r":[{"$id":1,"$label":"User","age":42,"name":"ana_1","score":12.345}]}';

uWS.App()
  .post('/v2/query', (res) => {
    let aborted = false;
    res.onAborted(() => { aborted = true; });
    res.onData((_chunk, isLast) => {
      if (!isLast || aborted) return;
      res.cork(() => {
        res.writeStatus('200 OK').writeHeader('Content-Type', 'application/json').end(BODY);
      });
    });
  })
  .listen(host, port, (socket) => {
    if (!socket) {
      process.stderr.write(`bare-uws: cannot listen on ${host}:${port}\n`);
      process.exit(1);
    }
    process.stdout.write(`bare-uws listening on http://${host}:${uWS.us_socket_local_port(socket)}\n`);
  });
