/**
 * The device's local audit log (SPEC §6 step 7; sdk/hashee_sdk/audit.py), over a Store.
 *
 * An entry is `{call_id, agent_id, tool_name, scope, arguments_digest, status, reason,
 * timestamp}`. `arguments_digest` is HMAC-SHA256, keyed with a device-local secret, of the
 * RFC 8785 bytes of the arguments: equal arguments give equal digests on this device, but
 * short arguments cannot be guessed back from the log. The arguments themselves are never
 * stored. Entries older than 30 days are purged whenever one is written. Besides answered
 * calls it holds the security refusals (status `refused`: `call_expired`,
 * `call_replayed`…), so the user sees what was stopped.
 */
import { hmac } from "@noble/hashes/hmac";
import { sha256 } from "@noble/hashes/sha2";
import { randomBytes } from "@noble/hashes/utils";
import { canonicalize } from "./canonical.js";
import { b64decode, b64encode, hex, utf8 } from "./encoding.js";
import type { Store } from "./store.js";

export const RETENTION_MS = 30 * 24 * 3600 * 1000;
const SECRET_KEY = "secret/audit";
const PREFIX = "audit/";

export interface AuditEntry {
  readonly call_id: string;
  readonly agent_id: string;
  readonly tool_name: string;
  readonly scope: string;
  readonly arguments_digest: string;
  readonly status: string;
  readonly reason: string | null;
  /** epoch milliseconds */
  readonly timestamp: number;
}

export class AuditLog {
  private secret: Promise<Uint8Array> | undefined;

  constructor(readonly store: Store, readonly retentionMs: number = RETENTION_MS) {}

  /** The keyed digest of some arguments (never reversible without the device's secret). */
  async digest(argumentsValue: unknown): Promise<string> {
    let data: Uint8Array;
    try {
      data = canonicalize(argumentsValue);
    } catch {
      data = utf8(String(JSON.stringify(argumentsValue) ?? typeof argumentsValue)); // still digest, never store
    }
    return hex(hmac(sha256, await this.loadSecret(), data));
  }

  /** Append one entry and purge the expired ones. */
  async record(entry: Omit<AuditEntry, "arguments_digest" | "timestamp"> & { arguments: unknown; nowMs: number }):
  Promise<AuditEntry> {
    const { arguments: args, nowMs, ...rest } = entry;
    const saved: AuditEntry = { ...rest, arguments_digest: await this.digest(args), timestamp: nowMs };
    // the key orders entries by time; the random tail keeps two entries of one millisecond apart
    await this.store.set(`${PREFIX}${String(nowMs).padStart(15, "0")}/${hex(randomBytes(6))}`, { ...saved });
    await this.purge(nowMs);
    return saved;
  }

  /** Delete entries older than the retention period; returns how many. */
  async purge(nowMs: number): Promise<number> {
    const oldest = String(nowMs - this.retentionMs).padStart(15, "0");
    const expired = (await this.store.keys(PREFIX)).filter((key) => key.slice(PREFIX.length).split("/")[0]! < oldest);
    for (const key of expired) await this.store.delete(key);
    return expired.length;
  }

  async entries(): Promise<AuditEntry[]> {
    if (this.store.entries) { // one read (IndexedDB: one transaction), not one per entry: the page lists them after every call
      return (await this.store.entries(PREFIX)).map(([, entry]) => entry as unknown as AuditEntry);
    }
    const entries: AuditEntry[] = [];
    for (const key of await this.store.keys(PREFIX)) {
      const entry = await this.store.get(key);
      if (entry !== undefined) entries.push(entry as unknown as AuditEntry);
    }
    return entries;
  }

  async hasCall(callId: string): Promise<boolean> {
    return (await this.entries()).some((entry) => entry.call_id === callId);
  }

  private loadSecret(): Promise<Uint8Array> {
    this.secret ??= (async () => {
      const kept = await this.store.get(SECRET_KEY);
      if (typeof kept === "string") return b64decode(kept);
      const secret = randomBytes(32);
      await this.store.set(SECRET_KEY, b64encode(secret));
      return secret;
    })();
    return this.secret;
  }
}
