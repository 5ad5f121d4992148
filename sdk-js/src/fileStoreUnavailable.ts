/**
 * `fileStore` where there are no files (a browser): the package's "node" export condition
 * gives Node the real one (./node/fileStore.ts), so the same import works in both, and a
 * browser that calls it is told plainly what to use instead.
 */
import type { Store } from "./store.js";

export function fileStore(_dir: string): Store {
  throw new Error("fileStore needs Node; in a browser use indexedDbStore(name)");
}
