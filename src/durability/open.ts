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
    const writer = await ObjectWriter.open(options.objectStorage, {
      ...defaultObjectWriterOptions,
      snapshotWalBytes: options.snapshotWalBytes ?? defaultObjectWriterOptions.snapshotWalBytes,
    });
    return objectStorage(writer);
  }
  if (options.diskPath) {
    return DiskWriter.open(options.diskPath, { ...defaultDiskOptions, snapshotWalBytes: options.snapshotWalBytes ?? defaultDiskOptions.snapshotWalBytes });
  }
  return new MemoryStorage(Store.create());
}

/** ObjectWriter as a DurableStorage. */
function objectStorage(writer: ObjectWriter): DurableStorage {
  const storage: DurableStorage = {
    store: writer.store,
    report: writer.report,
    onHealthChange: null,
    logBatch: (batch) => writer.logBatch(batch),
    sync: () => writer.sync(),
    health: () => writer.health(),
    close: () => writer.close(),
  };
  writer.onHealthChange((health) => storage.onHealthChange?.(health));
  return storage;
}
