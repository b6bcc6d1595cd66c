// A reference between bare uWS and svcdb's server, to split a request's cost between the
// engine and the server around it: a bare uWebSockets.js app (as bench/bare-uws.ts) that
// runs every body through the engine inline on its one thread (executeRequest on a store of
// its own, writes committed and published at once) and answers with the engine's text.
// Nothing else of the server: no header walk or option headers, no metrics, no request
// log, no deadline watch, no reader pool or writer thread, no answer written as the socket
// drains. Not a server anyone should run.
//
// `node dist/bench/ab.js --config 'S|dist/src/cli/main.js|0|1|1|--readers 1'
//   --config 'E|--max-semi-space-size=1 dist/bench/bare-engine.js|0|1|1|'
//   --config 'U|dist/bench/bare-uws.js|0|1|1|'`
// (ab.js passes `serve --host H --port P ...`: util.ts listenAddress.)
import uWS from 'uWebSockets.js';
import { Store } from '../src/store/store.js';
import { executeRequest, execOptions, noFlags } from '../src/exec/request.js';
import { statusLine } from '../src/server/uws.js';
import { listenAddress } from './util.js';

const { host, port } = listenAddress(process.argv.slice(2));

const store = Store.create();
const options = execOptions({ queryTimeoutMs: 30_000 });

uWS.App()
  .post('/v2/query', (res) => {
    let aborted = false;
    let parts: Uint8Array[] | null = null;
    res.onAborted(() => { aborted = true; });
    res.onData((chunk, isLast) => {
      const part = new Uint8Array(chunk.slice(0)); // uWS reuses the chunk's memory after the callback
      if (!isLast) {
        (parts ??= []).push(part);
        return;
      }
      if (aborted) return;
      const body = parts === null ? part : Buffer.concat([...parts, part]);
      const out = executeRequest(store, body, noFlags, 'writer', options);
      if (store.committedEpoch() !== store.visibleEpoch()) store.publish(store.committedEpoch());
      const answer = 'status' in out ? out : { status: 500, body: '{"error":"internal_error","msg":"forwarded"}' };
      res.cork(() => {
        res.writeStatus(statusLine(answer.status)).writeHeader('Content-Type', 'application/json').end(answer.body);
      });
    });
  })
  .listen(host, port, (socket) => {
    if (!socket) {
      process.stderr.write(`bare-engine: cannot listen on ${host}:${port}\n`);
      process.exit(1);
    }
    process.stdout.write(`bare-engine listening on http://${host}:${uWS.us_socket_local_port(socket)}\n`);
  });
