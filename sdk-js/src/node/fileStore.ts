/**
 * A {@link Store} in a directory (Node only): one JSON file per key, created 0600 in a
 * 0700 directory, written to a temporary file, flushed and renamed, so a value is either
 * the old one or the new one after a crash, and durable once `set` resolves.
 */
import { mkdirSync } from "node:fs";
import { open, readdir, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import type { Json } from "../canonical.js";
import type { Store } from "../store.js";

const SUFFIX = ".json";
const MAX_NAME = 200;

function fileName(key: string): string {
  // percent-encoding keeps a key's order-free identity and never yields ".", ".." or a "/"
  const name = encodeURIComponent(key).replace(/\./g, "%2E").replace(/\*/g, "%2A") + SUFFIX;
  if (name.length > MAX_NAME) throw new RangeError(`store key too long: ${key.slice(0, 40)}…`);
  return name;
}

function keyOf(name: string): string | undefined {
  return name.endsWith(SUFFIX) ? decodeURIComponent(name.slice(0, -SUFFIX.length)) : undefined;
}

export function fileStore(dir: string): Store {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return {
    async get(key) {
      try {
        return JSON.parse(await readFile(join(dir, fileName(key)), "utf8")) as Json;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        throw error;
      }
    },
    async set(key, value) {
      const target = join(dir, fileName(key));
      const temporary = `${target}.${randomBytes(6).toString("hex")}.tmp`;
      const handle = await open(temporary, "wx", 0o600);
      try {
        await handle.writeFile(JSON.stringify(value), "utf8");
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temporary, target);
    },
    async delete(key) {
      await rm(join(dir, fileName(key)), { force: true });
    },
    async keys(prefix) {
      const names = await readdir(dir);
      return names.map(keyOf).filter((key): key is string => key !== undefined && key.startsWith(prefix)).sort();
    },
    async close() {},
  };
}
