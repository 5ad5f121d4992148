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
import type { Json, JsonObject } from "./canonical.js";
import { KeyPair, PublicKeys, type KeyPairSecret } from "./crypto.js";
import { b64decode, b64encode } from "./encoding.js";
import type { PublicJwk } from "./jose.js";
import type { Store } from "./store.js";

export type Party = "agent" | "user";

// Relation and call ids come from the server: encoded so that none can reach into another
// relation's keys with a "/".
const part = (text: string): string => encodeURIComponent(text);

/** Expired replay records are swept at most this often: a sweep reads every record kept. A
 * record kept longer than its call's life harms nothing. */
const SWEEP_EVERY_MS = 60_000;
const CALLS = "calls/";

interface SeenCall {
  readonly message_id: string;
  readonly expires_at_ms: number;
}

/** The replay record's two halves (see {@link LocalState.claimCall}). */
export interface CallClaim {
  /** The message id the call first came in, when this process has already seen it: refused. */
  readonly replayOf: string | null;
  /** Settles once the record is durable in the store: null, or the message id of an earlier
   * record of the same call found there (another process's): a replay too. Rejects if the
   * store failed. Nothing may be run or answered for the call before it settles to null. */
  readonly durable: Promise<string | null>;
}

export class LocalState {
  private queue: Promise<unknown> = Promise.resolve();
  /** The replay record's own queue: its writes wait for no other kind of step, and none waits for them. */
  private callQueue: Promise<unknown> = Promise.resolve();
  private nextSweepMs = 0;
  /** The replay record as this process knows it: loaded from the store once, then kept in step. */
  private seenCalls: Promise<Map<string, SeenCall>> | undefined;
  /** The once grants used, per relation, as last read from the store and kept in step since:
   * a call's checks read them here, not in a store transaction that would queue behind the
   * replay record's durable write (IndexedDB runs transactions on one store in turn). */
  private readonly usedOnce = new Map<string, Map<string, number>>();

  constructor(readonly store: Store) {}

  /** Run `work` after every earlier serialized step: check-then-write stays atomic in this process. */
  private serialized<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private serializedCalls<T>(work: () => Promise<T>): Promise<T> {
    const next = this.callQueue.then(work, work);
    this.callQueue = next.catch(() => undefined);
    return next;
  }

  // --- replay record ----------------------------------------------------------------

  /** Record a call seen for the first time and return null; for a call already seen,
   * record nothing and return the message id it first came in. Resolves once the record is
   * durable. Expired records are purged. */
  async rememberCall(call: { relationId: string; callId: string; messageId: string; expiresAtMs: number; nowMs: number }):
  Promise<string | null> {
    const claim = await this.claimCall(call);
    return claim.replayOf ?? (await claim.durable);
  }

  /** The replay record in two halves, so that the store's write (a durable IndexedDB
   * transaction: milliseconds) need not stand before the prompt. `replayOf` is decided at
   * once, in memory, atomically in this process: a replay arriving while the first call's
   * record is still being written is refused. `durable` is the write (and a last look at the
   * store, where another process may have recorded the call first): the device runs no tool
   * and sends no answer before it settles to null. */
  async claimCall(call: { relationId: string; callId: string; messageId: string; expiresAtMs: number; nowMs: number }):
  Promise<CallClaim> {
    const seen = await this.loadCalls();
    const key = `${CALLS}${part(call.relationId)}/${part(call.callId)}`;
    const known = seen.get(key);
    if (known !== undefined && known.expires_at_ms >= call.nowMs) return { replayOf: known.message_id, durable: Promise.resolve(null) };
    const record: SeenCall = { message_id: call.messageId, expires_at_ms: call.expiresAtMs };
    seen.set(key, record);
    const durable = this.serializedCalls(async () => {
      const stored = (await this.store.get(key)) as Partial<SeenCall> | undefined;
      if (stored !== undefined && (stored.expires_at_ms ?? 0) >= call.nowMs) return String(stored.message_id ?? "");
      await this.store.set(key, { ...record });
      return null;
    });
    durable.catch(() => undefined); // the caller awaits it; an early refusal may not
    if (call.nowMs >= this.nextSweepMs) { // after this call's write: a record kept longer harms nothing
      this.nextSweepMs = call.nowMs + SWEEP_EVERY_MS;
      void this.sweepCalls(seen, call.nowMs).catch(() => undefined);
    }
    return { replayOf: null, durable };
  }

  /** Load the replay record from the store (once; a device may call this at start). */
  loadCalls(): Promise<Map<string, SeenCall>> {
    this.seenCalls ??= this.serializedCalls(async () => {
      const seen = new Map<string, SeenCall>();
      for (const [key, value] of await this.storedCalls()) {
        seen.set(key, { message_id: String(value.message_id ?? ""), expires_at_ms: value.expires_at_ms ?? 0 });
      }
      return seen;
    });
    this.seenCalls.catch(() => (this.seenCalls = undefined)); // a store that failed is asked again next time
    return this.seenCalls;
  }

  private sweepCalls(seen: Map<string, SeenCall>, nowMs: number): Promise<void> {
    for (const [key, record] of seen) if (record.expires_at_ms < nowMs) seen.delete(key);
    return this.serializedCalls(async () => {
      for (const [key, stored] of await this.storedCalls()) if ((stored.expires_at_ms ?? 0) < nowMs) await this.store.delete(key);
    });
  }

  private async storedCalls(): Promise<[string, Partial<SeenCall>][]> {
    if (this.store.entries) return (await this.store.entries(CALLS)) as [string, Partial<SeenCall>][];
    const found: [string, Partial<SeenCall>][] = [];
    for (const key of await this.store.keys(CALLS)) {
      const value = (await this.store.get(key)) as Partial<SeenCall> | undefined;
      if (value !== undefined) found.push([key, value]);
    }
    return found;
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

  /** The agent a relation was first seen with (pinned with its identity), or null. */
  async pinnedAgent(relationId: string): Promise<string | null> {
    const value = (await this.store.get(`identity/${part(relationId)}`)) as { agent_id?: string } | undefined;
    return value?.agent_id ?? null;
  }

  // --- tombstones: keys and relations never trusted again ---------------------------

  async tombstoned(relationId: string, party: Party): Promise<Set<string>> {
    return new Set(((await this.store.get(`dead/${part(relationId)}/${party}`)) as string[] | undefined) ?? []);
  }

  tombstone(relationId: string, party: Party, keyIds: Iterable<string>): Promise<void> {
    return this.serialized(async () => {
      const dead = await this.tombstoned(relationId, party);
      for (const keyId of keyIds) {
        dead.add(keyId);
        await this.store.delete(`pins/${part(relationId)}/${party}/${keyId}`);
      }
      await this.store.set(`dead/${part(relationId)}/${party}`, [...dead].sort());
    });
  }

  async tombstoneRelation(relationId: string): Promise<void> {
    await this.store.set(`revoked/${part(relationId)}`, true);
  }

  async relationTombstoned(relationId: string): Promise<boolean> {
    return (await this.store.get(`revoked/${part(relationId)}`)) === true;
  }

  // --- the user's root device ---------------------------------------------------------

  /** An agent runtime's root of the user, pinned at the relation's first look. */
  async pinnedRoot(relationId: string): Promise<PublicKeys | null> {
    return keysOf(await this.store.get(`root/${part(relationId)}`));
  }

  async pinRoot(relationId: string, keys: PublicKeys): Promise<void> {
    await this.store.set(`root/${part(relationId)}`, keysJson(keys));
  }

  /** The root a user's device is approved through (itself for the first device). */
  async deviceRoot(deviceKeyId: string): Promise<PublicKeys | null> {
    return keysOf(await this.store.get(`device-root/${part(deviceKeyId)}`));
  }

  async setDeviceRoot(deviceKeyId: string, keys: PublicKeys): Promise<void> {
    await this.store.set(`device-root/${part(deviceKeyId)}`, keysJson(keys));
  }

  // --- runtime keys of agents without identity: one agent per key ---------------------

  async agentKeyOwner(keyId: string): Promise<string | null> {
    return ((await this.store.get(`agent-key/${part(keyId)}`)) as string | undefined) ?? null;
  }

  async agentKeysOf(agentId: string): Promise<Set<string>> {
    const found = new Set<string>();
    for (const key of await this.store.keys("agent-key/")) {
      if ((await this.store.get(key)) === agentId) found.add(decodeURIComponent(key.slice("agent-key/".length)));
    }
    return found;
  }

  async ownAgentKeys(agentId: string, keyIds: Iterable<string>): Promise<void> {
    for (const keyId of keyIds) {
      if ((await this.agentKeyOwner(keyId)) === null) await this.store.set(`agent-key/${part(keyId)}`, agentId);
    }
  }

  // --- consent statements (SPEC §9.6) ---------------------------------------------------

  async newestConsent(relationId: string): Promise<{ statement: JsonObject; signature: string } | null> {
    return ((await this.store.get(`consent/${part(relationId)}`)) as { statement: JsonObject; signature: string } | undefined) ?? null;
  }

  /** Keep `signed` if its seq is higher than the one kept; true when kept. */
  rememberConsent(relationId: string, signed: { statement: JsonObject; signature: string }): Promise<boolean> {
    return this.serialized(async () => {
      const kept = await this.newestConsent(relationId);
      const seq = Number(signed.statement["seq"]);
      if (kept !== null && Number(kept.statement["seq"]) >= seq) return false;
      await this.store.set(`consent/${part(relationId)}`, signed as unknown as Json);
      const who = `consent-seq/${part(String(signed.statement["agent_id"]))}/${part(String(signed.statement["user_id"]))}`;
      if (Number((await this.store.get(who)) ?? 0) < seq) await this.store.set(who, seq);
      return true;
    });
  }

  async highestConsentSeq(agentId: string, userId: string): Promise<number> {
    return Number((await this.store.get(`consent-seq/${part(agentId)}/${part(userId)}`)) ?? 0);
  }

  // --- grant options: once grants used, and when a grant was last used (issue 26) ---------

  /** scope → the highest statement seq (0: unsigned consent) whose `once` grant of it was used here.
   * From memory once read; `fresh` reads the store again (another process may have used one). */
  async onceUsed(relationId: string, fresh = false): Promise<Map<string, number>> {
    let used = this.usedOnce.get(relationId);
    if (used === undefined || fresh) {
      const prefix = `once/${part(relationId)}/`;
      used = new Map<string, number>();
      for (const key of await this.store.keys(prefix)) used.set(decodeURIComponent(key.slice(prefix.length)), Number(await this.store.get(key)));
      this.usedOnce.set(relationId, used);
    }
    return new Map(used);
  }

  /** Take the `once` grant of `scope` under the statement of `seq`: true, durably recorded,
   * when it was not taken before (in this process or an earlier one); false when it was. */
  useOnce(relationId: string, scope: string, seq: number): Promise<boolean> {
    return this.serialized(async () => {
      const key = `once/${part(relationId)}/${part(scope)}`;
      const taken = await this.store.get(key);
      if (taken !== undefined && Number(taken) >= seq) return false;
      await this.store.set(key, seq);
      this.usedOnce.get(relationId)?.set(scope, seq);
      return true;
    });
  }

  /** The scopes granted now: one not noted before is granted since `sinceMs`; the others are forgotten. */
  noteGrants(relationId: string, granted: Iterable<string>, sinceMs: number): Promise<void> {
    return this.serialized(async () => {
      const prefix = `grant-use/${part(relationId)}/`;
      const scopes = new Set([...granted].map(part));
      const known = new Set((await this.store.keys(prefix)).map((key) => key.slice(prefix.length)));
      for (const scope of scopes) if (!known.has(scope)) await this.store.set(prefix + scope, sinceMs);
      for (const scope of known) if (!scopes.has(scope)) await this.store.delete(prefix + scope);
    });
  }

  /** When this device last answered a call of `scope`, or first saw it granted (epoch ms; null: neither). */
  async grantUsedAt(relationId: string, scope: string): Promise<number | null> {
    const value = await this.store.get(`grant-use/${part(relationId)}/${part(scope)}`);
    return typeof value === "number" ? value : null;
  }

  recordGrantUse(relationId: string, scope: string, atMs: number): Promise<void> {
    return this.serialized(() => this.store.set(`grant-use/${part(relationId)}/${part(scope)}`, atMs));
  }

  /** Unsigned once grants (seq 0) of scopes seen withdrawn: a later unsigned grant is a new one. */
  forgetUnsignedOnce(relationId: string, scopes: Iterable<string>): Promise<void> {
    return this.serialized(async () => {
      for (const scope of scopes) {
        const key = `once/${part(relationId)}/${part(scope)}`;
        if ((await this.store.get(key)) !== 0) continue;
        await this.store.delete(key);
        this.usedOnce.get(relationId)?.delete(scope);
      }
    });
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

function keysJson(keys: PublicKeys): Json {
  return { x25519: b64encode(keys.x25519), ed25519: b64encode(keys.ed25519) };
}

function keysOf(value: Json | undefined): PublicKeys | null {
  if (value === undefined || value === null) return null;
  const { x25519, ed25519 } = value as { x25519: string; ed25519: string };
  return PublicKeys.fromRaw(b64decode(x25519), b64decode(ed25519));
}
