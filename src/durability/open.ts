// Opening a writer's storage, for the server's writer thread and the embedded handle alike.
import { Store } from '../store/store.js';
import { defaultDiskOptions, DiskWriter } from './disk-storage.js';
import { MemoryStorage, type DurableStorage } from './durable.js';
import { defaultObjectWriterOptions, ObjectWriter, type ObjectStorageOptions } from './object-storage.js';

export interface WriterStorageOptions {
  /** Disk directory (WAL + snapshots). */
  diskPath?: string | null;
  /** S3-compatible bucket prefix instead. */
  objectStorage?: ObjectStorageOptions | null;
  /** Snapshot after this many WAL bytes (disk and object storage). */
  snapshotWalBytes?: number;
}

/** Memory unless a directory or a bucket is given; recovers what the storage holds. */
export async function openWriterStorage(options: WriterStorageOptions): Promise<DurableStorage> {
  if (options.objectStorage) {
    return ObjectWriter.open(options.objectStorage, {
      ...defaultObjectWriterOptions,
      snapshotWalBytes: options.snapshotWalBytes ?? defaultObjectWriterOptions.snapshotWalBytes,
    });
  }
  if (options.diskPath) {
    return DiskWriter.open(options.diskPath, { ...defaultDiskOptions, snapshotWalBytes: options.snapshotWalBytes ?? defaultDiskOptions.snapshotWalBytes });
  }
  return new MemoryStorage(Store.create());
}
