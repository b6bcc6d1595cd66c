// s3rver (an S3 imitation on the local filesystem) for object-storage tests, on loopback.
export interface S3rverInstance {
  run(): Promise<{ port: number }>;
  close(): Promise<void>;
  httpServer?: { closeAllConnections(): void };
}
type S3rverClass = new (options: Record<string, unknown>) => S3rverInstance;

export const s3Credentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

/** s3rver ships no types: load it untyped and describe the little we use. Port 0: a free one. */
export async function startS3rver(directory: string, port = 0): Promise<{ server: S3rverInstance; port: number }> {
  const { default: S3rver } = (await import('s3rver' as string)) as { default: S3rverClass };
  const server = new S3rver({ port, address: '127.0.0.1', directory, silent: true, configureBuckets: [{ name: 'bucket' }] });
  const started = await server.run();
  return { server, port: started.port };
}

/**
 * Stop s3rver as a crash or a network cut would: drop every connection, requests in flight
 * included (close() alone waits for busy keep-alive connections, which a steady writer
 * never lets go idle).
 */
export async function killS3rver(server: S3rverInstance): Promise<void> {
  const closed = server.close();
  server.httpServer?.closeAllConnections();
  await closed;
}
