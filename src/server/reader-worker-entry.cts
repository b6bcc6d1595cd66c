// The file Piscina starts each reader thread with. Piscina loads a thread's code with
// require() first; on Node 20.19+ that would load reader-worker.js (an ES module) through
// require(esm), and a thread terminated while require() links an ES module (a pool closed
// while a replacement thread starts) aborts the whole process on a native assertion. This
// CommonJS file loads the reader with import() instead, which a termination simply ends.
// Piscina awaits the `default` export it finds: the reader's task function.
const reader = import('./reader-worker.js').then(
  (loaded) => loaded.default,
  (err: unknown) => {
    // Piscina takes a rejected `default` for "no handler" and runs the thread anyway, the
    // cause lost: end the thread with it instead (the pool's 'error' event).
    process.nextTick(() => {
      throw err;
    });
    return new Promise<never>(() => undefined);
  },
);

export = { __esModule: true, default: reader };
