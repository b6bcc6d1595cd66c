// Public entry point of the `svcdb` package.
export { openDatabase, Database, type OpenOptions, type QueryOptions } from './embedded/database.js';
export { SvcError, type ErrorCode } from './protocol/errors.js';
