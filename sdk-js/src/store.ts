/**
 * Where a device or an agent runtime keeps what must survive a restart (its private keys,
 * the replay record, the pins, the event cursor, the audit log): one small asynchronous
 * key-value interface, so that the same SDK runs on `fileStore(dir)` in Node
 * ("@hashee/sdk/node") and on `indexedDbStore(name)` in a browser. Keys are short strings
 * ordered as strings; values are JSON. Nothing in a store is ever sent to the server.
 */
import type { Json } from "./canonical.js";

export interface Store {
  get(key: string): Promise<Json | undefined>;
  /** Durable when the promise resolves (a replay record must outlive a crash). */
  set(key: string, value: Json): Promise<void>;
  delete(key: string): Promise<void>;
  /** The keys that start with `prefix`, in string order. */
  keys(prefix: string): Promise<string[]>;
  /** The keys that start with `prefix` and their values, in key order, read at once (optional:
   * without it, `keys` then one `get` each). */
  entries?(prefix: string): Promise<[string, Json][]>;
  close(): Promise<void>;
}

/** A store that lives as long as the object: tests and throwaway runs. */
export function memoryStore(): Store {
  const data = new Map<string, string>(); // serialized, so a caller cannot mutate what is stored
  return {
    get: async (key) => {
      const text = data.get(key);
      return text === undefined ? undefined : (JSON.parse(text) as Json);
    },
    set: async (key, value) => {
      data.set(key, JSON.stringify(value));
    },
    delete: async (key) => {
      data.delete(key);
    },
    keys: async (prefix) => [...data.keys()].filter((key) => key.startsWith(prefix)).sort(),
    entries: async (prefix) => [...data].filter(([key]) => key.startsWith(prefix)).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, text]) => [key, JSON.parse(text) as Json]),
    close: async () => {},
  };
}

/** A store in this origin's IndexedDB database `name` (browsers; one object store). */
export function indexedDbStore(name: string, factory: IDBFactory = globalThis.indexedDB): Store {
  const OBJECTS = "kv";
  const opened = new Promise<IDBDatabase>((resolve, reject) => {
    const request = factory.open(name, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(OBJECTS);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error ?? new Error("IndexedDB did not open"));
  });
  async function run<T>(mode: IDBTransactionMode, work: (objects: IDBObjectStore) => IDBRequest<T>): Promise<T> {
    const db = await opened;
    return new Promise<T>((resolve, reject) => {
      const transaction = db.transaction(OBJECTS, mode, { durability: "strict" });
      const request = work(transaction.objectStore(OBJECTS));
      transaction.oncomplete = () => resolve(request.result); // after the commit, not before
      transaction.onerror = () => reject(transaction.error ?? new Error("IndexedDB transaction failed"));
      transaction.onabort = () => reject(transaction.error ?? new Error("IndexedDB transaction aborted"));
    });
  }
  return {
    get: async (key) => (await run("readonly", (s) => s.get(key))) as Json | undefined,
    set: async (key, value) => {
      await run("readwrite", (s) => s.put(value, key));
    },
    delete: async (key) => {
      await run("readwrite", (s) => s.delete(key));
    },
    keys: async (prefix) => (await run("readonly", (s) => s.getAllKeys(IDBKeyRange.bound(prefix, `${prefix}\uffff`))))
      .map(String).sort(),
    entries: async (prefix) => { // one transaction: keys and values of one range, in the same (key) order
      const range = IDBKeyRange.bound(prefix, `${prefix}\uffff`);
      let keys: IDBRequest<IDBValidKey[]> | undefined;
      const values = await run("readonly", (s) => {
        keys = s.getAllKeys(range);
        return s.getAll(range);
      });
      return keys!.result.map((key, i): [string, Json] => [String(key), values[i] as Json]);
    },
    close: async () => (await opened).close(),
  };
}
