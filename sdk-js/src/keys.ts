/**
 * The key directory as the SDK reads and writes it (public keys only; sdk/hashee_sdk/keys.py).
 * Each side keeps only the other party's keys that {@link KeyPins} trusts: an identified
 * agent's runtime keys vouched for by its pinned identity, the user's devices reached by
 * approvals from the one root — so a key the server adds is never encrypted to nor believed.
 */
import { PublicKeys, type KeyPair } from "./crypto.js";
import { AmbiguousRoot, AnswerInvalid, ApiError, InvalidPublicKey } from "./errors.js";
import type { PublicJwk } from "./jose.js";
import { callApi, type Transport } from "./rest.js";
import { approveDevice, deviceApprovalValid, runtimeKeyVouched } from "./statements.js";
import { AGENT, KeyPins, USER } from "./trust.js";
import type { Party } from "./localState.js";

export const KEYS_TTL_MS = 60_000;

export interface DeviceKey {
  readonly deviceId: string;
  readonly keys: PublicKeys;
  /** null: the user's first device (trusted on first use). */
  readonly approvedByKeyId: string | null;
  readonly approval: string | null;
  /** As listed; a device in any other state than approved is not trusted. */
  readonly status: string;
}

export interface RelationKeys {
  readonly relationId: string;
  readonly agentId: string;
  readonly userDevices: readonly DeviceKey[];
  readonly agentKeys: readonly PublicKeys[];
  readonly fetchedAt: number;
  /** Key ids the directory lists that are not trusted. */
  readonly refused: readonly string[];
  readonly identitySignatures: ReadonlyMap<string, string>;
}

export const userKeys = (keys: RelationKeys): Map<string, PublicKeys> => new Map(keys.userDevices.map((d) => [d.keys.keyId, d.keys]));
export const agentKeysById = (keys: RelationKeys): Map<string, PublicKeys> => new Map(keys.agentKeys.map((k) => [k.keyId, k]));

const text = (value: unknown): string | null => (typeof value === "string" && value !== "" ? value : null);

function parsed(data: unknown): PublicKeys | null {
  try {
    return PublicKeys.fromApi(data);
  } catch (error) {
    if (error instanceof InvalidPublicKey) return null;
    throw error;
  }
}

/** Parse `GET /h2a/relations/{id}/keys` (about `relationId`, when given); a key that does not
 * parse is left out. Throws AnswerInvalid for a listing of another shape. */
export function relationKeysFrom(body: unknown, nowMs: number, relationId: string | null = null): RelationKeys {
  const user = member(body, "user", "object");
  const agent = member(body, "agent", "object");
  const listedRelation = member(body, "relation_id", "string") as string;
  const agentId = member(agent, "agent_id", "string") as string;
  if (relationId !== null && listedRelation !== relationId) {
    throw new AnswerInvalid(`asked for the keys of relation ${relationId}, the server listed another's`);
  }
  const devices: DeviceKey[] = [];
  for (const d of member(user, "devices", "array") as unknown[]) {
    if (!isRecord(d) || typeof d["device_id"] !== "string") continue;
    const keys = parsed(d);
    if (keys === null) continue;
    devices.push({ deviceId: d["device_id"], keys, approvedByKeyId: text(d["approved_by_key_id"]), approval: text(d["approval"]),
      status: d["revoked_at"] === null || d["revoked_at"] === undefined ? String(d["status"] || "approved") : "revoked" });
  }
  const agentKeys: PublicKeys[] = [];
  const signatures = new Map<string, string>();
  for (const k of member(agent, "keys", "array") as unknown[]) {
    const keys = isRecord(k) ? parsed(k) : null;
    if (keys === null || !isRecord(k)) continue;
    agentKeys.push(keys);
    if (typeof k["identity_signature"] === "string") signatures.set(keys.keyId, k["identity_signature"]);
  }
  return { relationId: listedRelation, agentId, userDevices: devices, agentKeys, fetchedAt: nowMs, refused: [], identitySignatures: signatures };
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** `body[name]` if `body` is an object and the member is of `kind`; else AnswerInvalid. */
function member(body: unknown, name: string, kind: "object" | "array" | "string"): unknown {
  const value = isRecord(body) ? body[name] : undefined;
  const fits = kind === "array" ? Array.isArray(value) : kind === "object" ? isRecord(value) : typeof value === "string";
  if (!fits) throw new AnswerInvalid(`the server's key listing has no valid ${JSON.stringify(name)}`);
  return value;
}

function approvalValid(device: DeviceKey, approver: PublicKeys): boolean {
  return device.approval !== null && deviceApprovalValid(device.approval, approver, { deviceId: device.deviceId, keyId: device.keys.keyId });
}

/** An agent runtime's root at its first look: the one live device approved by no other.
 * Raises AmbiguousRoot when several are listed (the others were slipped in). */
export function listedRoot(keys: RelationKeys): PublicKeys | null {
  const roots = keys.userDevices.filter((d) => d.approvedByKeyId === null && d.status === "approved");
  if (roots.length > 1) {
    throw new AmbiguousRoot(`the user of relation ${keys.relationId} is listed with ${roots.length} first devices: a user has one; no device is trusted`);
  }
  return roots[0]?.keys ?? null;
}

/** The root a device's own key is approved through, each listed approval checked; null when the chain breaks. */
export function chainedRoot(own: PublicKeys, keys: RelationKeys): PublicKeys | null {
  const byKey = new Map(keys.userDevices.filter((d) => d.status === "approved").map((d) => [d.keys.keyId, d]));
  let current = byKey.get(own.keyId);
  const seen = new Set<string>();
  while (current !== undefined && !seen.has(current.keys.keyId)) {
    if (current.approvedByKeyId === null) return current.keys;
    seen.add(current.keys.keyId);
    const approver = byKey.get(current.approvedByKeyId);
    if (approver === undefined || !approvalValid(current, approver.keys)) return null;
    current = approver;
  }
  return null;
}

/** Reads relation keys through a transport, cached for `ttlMs`. `verify` names the party whose
 * keys this side relies on ("agent" on a user's device, "user" on an agent runtime). On a
 * device, `device` (its own public keys) lets the user's own devices be verified too. */
export class KeyDirectory {
  private readonly cache = new Map<string, RelationKeys>();
  private readonly listings = new Map<string, RelationKeys>();

  constructor(readonly transport: Transport, readonly pins: KeyPins, readonly verify: Party,
    readonly device: PublicKeys | null = null, readonly clock: () => number = Date.now, readonly ttlMs = KEYS_TTL_MS) {}

  async relation(relationId: string, refresh = false): Promise<RelationKeys> {
    const cached = this.cache.get(relationId);
    if (cached !== undefined && !refresh && this.clock() - cached.fetchedAt < this.ttlMs) return cached;
    const listed = await this.listing(relationId, true);
    const keys = this.verify === AGENT
      ? await this.trustedAgentKeys(listed, await this.identity(listed.relationId, listed.agentId))
      : await this.trustedDevices(listed, (await this.pins.firstLook(listed.relationId, USER)) ? listedRoot(listed) : null);
    this.cache.set(relationId, keys);
    return keys;
  }

  /** On a user's device, after relation() refused `keyId`: the key, when the directory lists it for the relation's
   * agent and it is refused only for coming after the keys pinned here — the agent has no identity that could vouch
   * for it, and the key was neither revoked here nor trusted for another agent. Else null (sdk/hashee_sdk/keys.py). */
  async unpinnedRuntimeKey(relationId: string, keyId: string): Promise<PublicKeys | null> {
    const listed = this.listings.get(relationId);
    const state = this.pins.state;
    const [pinnedIdentity, identity] = await state.pinnedIdentity(relationId);
    const key = listed?.agentKeys.find((k) => k.keyId === keyId);
    if (listed === undefined || key === undefined || !pinnedIdentity || identity !== null) return null;
    if ((await state.pinned(relationId, AGENT)).size === 0 || (await state.tombstoned(relationId, AGENT)).has(keyId)) return null;
    const owner = await state.agentKeyOwner(keyId);
    return owner === null || owner === listed.agentId ? key : null;
  }

  /** `GET …/keys` parsed; on a user's device, with the user's devices verified. */
  private async listing(relationId: string, refresh = false): Promise<RelationKeys> {
    const cached = this.listings.get(relationId);
    if (cached !== undefined && !refresh && this.clock() - cached.fetchedAt < this.ttlMs) return cached;
    let listed = relationKeysFrom(await callApi(this.transport, "GET", `/h2a/relations/${relationId}/keys`), this.clock(), relationId);
    if (this.verify === AGENT && this.device !== null) listed = await this.trustedDevices(listed, await this.deviceRootOf(listed));
    this.listings.set(relationId, listed);
    return listed;
  }

  /** An identified agent's runtime keys are trusted only when its pinned identity vouches for
   * them; an agent without one has its first keys pinned on first sight. */
  private async trustedAgentKeys(keys: RelationKeys, identity: PublicJwk | null): Promise<RelationKeys> {
    const vouched = (candidate: PublicKeys): boolean => identity !== null
      && runtimeKeyVouched(keys.identitySignatures.get(candidate.keyId), identity, { agentId: keys.agentId, keyId: candidate.keyId });
    const [listed, foreign] = identity !== null ? [keys.agentKeys, []] : await this.speakingFor(keys);
    let [trusted, refused] = await this.pins.filter(keys.relationId, AGENT, listed, vouched, identity === null);
    if (identity !== null) trusted = trusted.filter((k) => vouched(k)); // what it vouches for now
    else await this.pins.state.ownAgentKeys(keys.agentId, trusted.map((k) => k.keyId));
    return { ...keys, agentKeys: trusted, refused: [...keys.refused, ...foreign, ...refused] };
  }

  /** A runtime key trusted for one agent never speaks for another; once this device trusts
   * keys for an agent, a relation first seen with that agent trusts only those. */
  private async speakingFor(keys: RelationKeys): Promise<[PublicKeys[], string[]]> {
    const state = this.pins.state;
    const known = (await this.pins.firstLook(keys.relationId, AGENT)) ? await state.agentKeysOf(keys.agentId) : new Set<string>();
    const ok: PublicKeys[] = [];
    const refused: string[] = [];
    for (const k of keys.agentKeys) {
      const owner = await state.agentKeyOwner(k.keyId);
      if ((owner === null || owner === keys.agentId) && (known.size === 0 || known.has(k.keyId))) ok.push(k);
      else refused.push(k.keyId);
    }
    return [ok, refused];
  }

  /** The user's devices trusted here: `root` (pinned at the first look, never replaced) and any
   * device a chain of valid approvals leads to from it; one listed in another state is dropped. */
  private async trustedDevices(keys: RelationKeys, root: PublicKeys | null): Promise<RelationKeys> {
    const live = keys.userDevices.filter((d) => d.status === "approved");
    const byKey = new Map(live.map((d) => [d.keys.keyId, d]));
    if (root !== null && (await this.pins.firstLook(keys.relationId, USER))) {
      await this.pins.state.pinRoot(keys.relationId, root);
      await this.pins.state.pin(keys.relationId, USER, [root]);
    }
    const approved = (candidate: PublicKeys, trusted: ReadonlyMap<string, PublicKeys>): boolean => {
      const device = byKey.get(candidate.keyId)!;
      const approver = trusted.get(device.approvedByKeyId ?? "");
      return approver !== undefined && approvalValid(device, approver);
    };
    const [kept, refused] = await this.pins.filter(keys.relationId, USER, live.map((d) => d.keys), approved, false);
    const ids = new Set(kept.map((k) => k.keyId));
    return { ...keys, userDevices: live.filter((d) => ids.has(d.keys.keyId)), refused: [...keys.refused, ...refused] };
  }

  /** The root this device knows: remembered, or the one its own key is approved through. */
  private async deviceRootOf(listed: RelationKeys): Promise<PublicKeys | null> {
    const own = this.device!;
    const known = await this.pins.state.deviceRoot(own.keyId);
    if (known !== null) return known;
    const root = chainedRoot(own, listed);
    if (root !== null) await this.pins.state.setDeviceRoot(own.keyId, root);
    return root;
  }

  /** On a user's device: the user's devices it trusts, and always itself. Consent statements verify against exactly this set. */
  async trustedUserDevices(relationId: string): Promise<Map<string, PublicKeys>> {
    const listed = await this.listing(relationId);
    return new Map([...userKeys(listed), [this.device!.keyId, this.device!]]);
  }

  /** The user's root device as this side knows it (the user's half of a safety number). */
  async root(relationId: string): Promise<PublicKeys | null> {
    if (this.verify === USER) {
      await this.relation(relationId);
      return this.pins.state.pinnedRoot(relationId);
    }
    const listed = await this.listing(relationId);
    return this.device !== null ? this.deviceRootOf(listed) : null;
  }

  /** The agent's identity as pinned for this relation (pinned on first sight); raises IdentityChanged. */
  async identity(relationId: string, agentId: string): Promise<PublicJwk | null> {
    return this.pins.identity(relationId, agentId, await this.servedIdentity(agentId));
  }

  /** The identity JWK the server serves now (null: none). */
  async servedIdentity(agentId: string): Promise<unknown> {
    try {
      const body = await callApi(this.transport, "GET", `/agents/${agentId}/identity`);
      return typeof body?.jwk === "object" && body.jwk !== null ? body.jwk : null;
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return null;
      throw error;
    }
  }

  forget(relationId?: string): void {
    if (relationId === undefined) {
      this.cache.clear();
      this.listings.clear();
    } else {
      this.cache.delete(relationId);
      this.listings.delete(relationId);
    }
  }

  /** Publish a device's keys; the user's first device is trusted on first use, another waits for an approval. */
  async registerDevice(deviceId: string, keys: PublicKeys, options: { approver?: KeyPair; reset?: boolean } = {}): Promise<any> {
    const json: Record<string, unknown> = { device_id: deviceId, ...keys.asApi() };
    if (options.approver) json["approval"] = approvalBody(options.approver, deviceId, keys.keyId);
    if (options.reset) json["reset"] = true;
    return callApi(this.transport, "POST", "/keys/devices", { json });
  }

  /** Approve another device of the same user, after the user compared its key id on both screens. */
  async approveDevice(deviceId: string, keyId: string, approver: KeyPair): Promise<any> {
    return callApi(this.transport, "POST", `/keys/devices/${deviceId}/approve`, { json: approvalBody(approver, deviceId, keyId) });
  }

  async registerAgentKey(agentId: string, keys: PublicKeys, identitySignature?: string): Promise<any> {
    const json: Record<string, unknown> = { ...keys.asApi() };
    if (identitySignature !== undefined) json["identity_signature"] = identitySignature;
    return callApi(this.transport, "POST", `/agents/${agentId}/keys`, { json });
  }
}

function approvalBody(approver: KeyPair, deviceId: string, keyId: string): Record<string, string> {
  return { approver_key_id: approver.keyId, signature: approveDevice(approver, { deviceId, keyId }) };
}
