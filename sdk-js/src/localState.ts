/**
 * What one device (or agent runtime) remembers across restarts, over a {@link Store}
 * (sdk/hashee_sdk/store.py's LocalStore, the same names):
 *
 * * the **replay record** (SPEC §9.4): every `(relation_id, call_id)` seen, kept until the
 *   call's `expires_at`, so a call replayed after a restart is refused, not run again;
 * * the **pinned keys** (SPEC §9.2) of the other party, per relation;
 * * the **pinned identity** of each relation's agent, or that it had none;
 * * the **grants** this device has seen or confirmed, and the acknowledgement it pinned;
 * * the **event cursor**, so a restarted listener resumes with `?since=`;
 * * this side's own **key pair** (its secret halves, never sent anywhere).
 */
import type { Json } from "./canonical.js";
import { KeyPair, PublicKeys, type KeyPairSecret } from "./crypto.js";
import { b64decode, b64encode } from "./encoding.js";
import type { PublicJwk } from "./jose.js";
import type { Store } from "./store.js";

export type Party = "agent" | "user";

// Relation and call ids come from the server: encoded so that none can reach into another
// relation's keys with a "/".
const part = (text: string): string => encodeURIComponent(text);

export class LocalState {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(readonly store: Store) {}

  /** Run `work` after every earlier serialized step: check-then-write stays atomic in this process. */
  private serialized<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  // --- replay record ----------------------------------------------------------------

  /** Record a call seen for the first time and return null; for a call already seen,
   * record nothing and return the message id it first came in. Expired records are purged. */
  rememberCall(call: { relationId: string; callId: string; messageId: string; expiresAtMs: number; nowMs: number }):
  Promise<string | null> {
    return this.serialized(async () => {
      for (const key of await this.store.keys("calls/")) {
        const seen = (await this.store.get(key)) as { expires_at_ms?: number } | undefined;
        if ((seen?.expires_at_ms ?? 0) < call.nowMs) await this.store.delete(key);
      }
      const key = `calls/${part(call.relationId)}/${part(call.callId)}`;
      const seen = (await this.store.get(key)) as { message_id?: string } | undefined;
      if (seen !== undefined) return String(seen.message_id ?? "");
      await this.store.set(key, { message_id: call.messageId, expires_at_ms: call.expiresAtMs });
      return null;
    });
  }

  // --- pinned keys ------------------------------------------------------------------

  async pinned(relationId: string, party: Party): Promise<Map<string, PublicKeys>> {
    const prefix = `pins/${part(relationId)}/${party}/`;
    const pinned = new Map<string, PublicKeys>();
    for (const key of await this.store.keys(prefix)) {
      const value = (await this.store.get(key)) as { x25519: string; ed25519: string };
      const keys = PublicKeys.fromRaw(b64decode(value.x25519), b64decode(value.ed25519));
      pinned.set(keys.keyId, keys);
    }
    return pinned;
  }

  async pin(relationId: string, party: Party, keys: Iterable<PublicKeys>): Promise<void> {
    for (const k of keys) {
      await this.store.set(`pins/${part(relationId)}/${party}/${k.keyId}`,
        { x25519: b64encode(k.x25519), ed25519: b64encode(k.ed25519) });
    }
  }

  // --- the agent's identity ---------------------------------------------------------

  /** [pinned?, the identity's public JWK — null for an agent pinned as having none]. */
  async pinnedIdentity(relationId: string): Promise<[boolean, PublicJwk | null]> {
    const value = (await this.store.get(`identity/${part(relationId)}`)) as { jwk: PublicJwk | null } | undefined;
    return value === undefined ? [false, null] : [true, value.jwk];
  }

  async pinIdentity(relationId: string, agentId: string, jwk: PublicJwk | null): Promise<void> {
    await this.store.set(`identity/${part(relationId)}`, { agent_id: agentId, jwk: jwk as Json });
  }

  // --- grants seen or confirmed on this device ---------------------------------------

  /** The scopes this device has seen granted or confirmed; null before the first look. */
  async confirmedGrants(relationId: string): Promise<Set<string> | null> {
    const value = (await this.store.get(`grants/${part(relationId)}`)) as string[] | undefined;
    return value === undefined ? null : new Set(value);
  }

  confirmGrants(relationId: string, scopes: Iterable<string>): Promise<void> {
    return this.serialized(async () => {
      const current = (await this.confirmedGrants(relationId)) ?? new Set<string>();
      for (const scope of scopes) current.add(scope);
      await this.store.set(`grants/${part(relationId)}`, [...current].sort());
    });
  }

  /** Forget confirmations: these scopes are asked once more on the device. */
  unconfirmGrants(relationId: string, scopes: Iterable<string>): Promise<void> {
    return this.serialized(async () => {
      const current = await this.confirmedGrants(relationId);
      if (current === null) return;
      for (const scope of scopes) current.delete(scope);
      await this.store.set(`grants/${part(relationId)}`, [...current].sort());
    });
  }

  async pinnedAcknowledgement(relationId: string): Promise<{ version: number; hash: string } | null> {
    return ((await this.store.get(`ack/${part(relationId)}`)) as { version: number; hash: string } | undefined) ?? null;
  }

  async pinAcknowledgement(relationId: string, version: number, hash: string): Promise<void> {
    await this.store.set(`ack/${part(relationId)}`, { version, hash });
  }

  // --- event cursor -----------------------------------------------------------------

  async cursor(name: string): Promise<number | null> {
    const value = await this.store.get(`cursor/${part(name)}`);
    return typeof value === "number" ? value : null;
  }

  /** Move the cursor forward only: an event handled twice is harmless, one skipped is not. */
  setCursor(name: string, lastId: number): Promise<void> {
    return this.serialized(async () => {
      const current = await this.cursor(name);
      if (current === null || lastId > current) await this.store.set(`cursor/${part(name)}`, lastId);
    });
  }

  // --- this side's key pair ---------------------------------------------------------

  /** The key pair kept in the store, made (and kept) the first time. */
  keyPair(): Promise<KeyPair> {
    return this.serialized(async () => {
      const secret = (await this.store.get("secret/key-pair")) as KeyPairSecret | undefined;
      if (secret !== undefined) return KeyPair.fromSecret(secret);
      const pair = KeyPair.generate();
      await this.store.set("secret/key-pair", { ...pair.secret() });
      return pair;
    });
  }
}
