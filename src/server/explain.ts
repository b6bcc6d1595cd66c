// POST /v2/explain (docs/cli.md, `svc query --explain`): decode and plan on the front-end
// thread that received it (bounded by the body limit, like the inline reads' planning),
// execute nothing.
import { explainRequest } from '../exec/request.js';
import { asSvcError, errorBody } from '../protocol/errors.js';
import type { Store } from '../store/store.js';
import type { Explainer } from './http.js';

/**
 * 200 `{"sources":[...]}` with each source's members in byte-wise key order (envelope.md §7),
 * or the error body /v2/query would give. `store` is asked each time: a reader server's
 * follower may have swapped the buffers.
 */
export function explainer(store: () => Store): Explainer {
  return (body) => {
    try {
      const sources = explainRequest(store(), body).map((s) => (s.index === undefined
        ? { access: s.access, operation: s.operation }
        : { access: s.access, index: s.index, operation: s.operation }));
      return { status: 200, body: JSON.stringify({ sources }) };
    } catch (err) {
      const e = asSvcError(err);
      return { status: e.status, body: errorBody(e) };
    }
  };
}
