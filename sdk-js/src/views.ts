/**
 * What a user's device believes of one relation (SPEC §9.1–§9.3, §9.6; sdk/hashee_sdk/views.py,
 * consent.py, consent_memory.py): grants, the verified manifest, the version the user
 * consented to and the safety number — fetched from the server and verified here.
 *
 * Pending re-consent: the diff engine is not ported to TypeScript yet. Until it is, a scope
 * is pending when ANY tool of that scope, or the scope's own entry, differs between the
 * acknowledged and the current verified manifest (canonical JSON compare) — stricter than
 * the server's rule table, never looser — plus the server's `pending_scopes`.
 */
import { canonicalText, isJsonObject, type Json, type JsonObject } from "./canonical.js";
import { compileManifest, type CompiledManifest } from "./contract.js";
import { compileGrants, grantOptionsOf, sameGrantOptions, type CompiledGrant } from "./grants.js";
import type { PublicKeys } from "./crypto.js";
import { verifyConsent } from "./consentStatements.js";
import { b64urlDecode } from "./encoding.js";
import { AgentChanged, AnswerInvalid, ApiError, ConsentInvalid, ManifestUnverified, SafetyNumberMismatch } from "./errors.js";
import { jwkThumbprint, type PublicJwk } from "./jose.js";
import { relationKeysFrom, type KeyDirectory } from "./keys.js";
import type { LocalState } from "./localState.js";
import { callApi, type Transport } from "./rest.js";
import { safetyNumber } from "./statements.js";
import { ManifestVerifier, publicIdentity, type VerifiedManifest } from "./trust.js";

const EMPTY = compileManifest({ tools: [], permission_scopes: [] });
const HEX64 = /^[0-9a-f]{64}$/;
/** A relation's status (SPEC §5.2). */
const STATUSES: readonly string[] = ["active", "reauth_required", "revoked"];

// --- pending re-consent (the stricter stand-in for the diff engine) -------------------------

/** The scopes whose tools or own entry differ between two manifests (canonical compare). */
export function changedScopes(before: JsonObject, after: JsonObject): Set<string> {
  const [a, b] = [scopeShapes(before), scopeShapes(after)];
  const changed = new Set<string>();
  for (const scope of new Set([...a.keys(), ...b.keys()])) {
    if (a.get(scope) !== b.get(scope)) changed.add(scope);
  }
  return changed;
}

function scopeShapes(manifest: JsonObject): Map<string, string> {
  const entries = new Map<string, Json>();
  const tools = new Map<string, Json[]>();
  for (const scope of Array.isArray(manifest["permission_scopes"]) ? manifest["permission_scopes"] : []) {
    if (isJsonObject(scope)) entries.set(String(scope["id"]), scope);
  }
  for (const tool of Array.isArray(manifest["tools"]) ? manifest["tools"] : []) {
    if (!isJsonObject(tool)) continue;
    const scope = String(tool["permission_scope"]);
    tools.set(scope, [...(tools.get(scope) ?? []), tool]);
  }
  const shapes = new Map<string, string>();
  for (const scope of new Set([...entries.keys(), ...tools.keys()])) {
    const listed = (tools.get(scope) ?? []).map((t) => canonicalText(t)).sort();
    shapes.set(scope, canonicalText({ entry: entries.get(scope) ?? null, tools: listed }));
  }
  return shapes;
}

// --- consent statements this side verified (SPEC §9.6) --------------------------------------

export interface Believed {
  /** The newest verified statement (null: never signed). */
  readonly statement: JsonObject | null;
  /** Why the statement served now was ignored ("": nothing to report). */
  readonly problem: string;
}

/** Per relation, the newest consent statement this side verified. */
export class ConsentMemory {
  constructor(readonly state: LocalState) {}

  async newest(relationId: string): Promise<JsonObject | null> {
    return (await this.state.newestConsent(relationId))?.statement ?? null;
  }

  async remember(relationId: string, signed: { statement: JsonObject; signature: string }): Promise<void> {
    await this.state.rememberConsent(relationId, signed);
  }

  async nextSeq(agentId: string, userId: string, nowMs: number): Promise<number> {
    return Math.max((await this.state.highestConsentSeq(agentId, userId)) + 1, nowMs);
  }

  /** Verify the statement the server serves (null: none) and keep it if it is the newest. */
  async believe(relationId: string, served: unknown, devices: ReadonlyMap<string, PublicKeys>, agentId: string,
    userId: unknown): Promise<Believed> {
    let problem = "";
    if (served !== null && served !== undefined) {
      try {
        const statement = verifyConsent(served, devices) as unknown as JsonObject;
        if (statement["agent_id"] !== agentId || statement["user_id"] !== userId) {
          throw new ConsentInvalid("the consent statement is for another agent or user");
        }
        await this.state.rememberConsent(relationId, { statement, signature: String((served as JsonObject)["signature"]) });
      } catch (error) {
        if (!(error instanceof ConsentInvalid)) throw error;
        problem = error.message;
      }
    }
    return { statement: await this.newest(relationId), problem };
  }
}

/** The grant options the device enforces: the newest verified statement's (the server's field
 * cannot widen, drop or swap them: a difference is only reported), else the server's. */
export function grantOptionsBelieved(statement: JsonObject | null, relation: any, granted: ReadonlySet<string>):
{ effective: JsonObject; problem: string } {
  const served = isJsonObject(relation?.grant_options) ? relation.grant_options : {};
  if (statement === null) return { effective: grantOptionsOf(served, granted), problem: "" };
  const signedScopes = (statement["granted_scopes"] as string[]) ?? [];
  const effective = grantOptionsOf(statement["grant_options"], signedScopes);
  const both = signedScopes.filter((s) => granted.has(s));
  const problem = sameGrantOptions(served, effective, both) ? ""
    : "the relation's grant_options are not those of the newest consent statement verified";
  return { effective, problem };
}

export const acknowledgementOf = (statement: JsonObject): [number, string] =>
  [Number(statement["acknowledged_manifest_version"]), String(statement["acknowledged_manifest_hash"])];

// --- the view ---------------------------------------------------------------------------

export interface RelationView {
  readonly relationId: string;
  readonly agentId: string;
  readonly agentName: string;
  readonly granted: ReadonlySet<string>;
  readonly revoked: boolean;
  readonly manifest: CompiledManifest;
  /** null: the manifest did not verify (nothing runs). */
  readonly manifestVersion: number | null;
  readonly pending: ReadonlySet<string>;
  /** Granted by the server's word only: the first call is prompted whatever its level. */
  readonly unconfirmed: ReadonlySet<string>;
  readonly unverified: string;
  readonly safetyNumber: string | null;
  readonly unbacked: ReadonlySet<string>;
  readonly consentRevoked: boolean;
  readonly consentProblem: string;
  /** The grant options the device enforces (SPEC §5.2 v1.2): the newest verified statement's,
   * or the server's when there is none (they can only narrow), for the granted scopes. */
  readonly grantOptions: JsonObject;
  readonly grants: ReadonlyMap<string, CompiledGrant>;
  /** The newest verified statement's seq, ts and scopes (0, null, null: never signed). */
  readonly consentSeq: number;
  readonly signedScopes: ReadonlySet<string> | null;
  readonly consentTs: number | null;
  /** The version and hash the user last consented to (what a withdrawal acknowledges again). */
  readonly consented: { readonly version: number; readonly hash: string } | null;
}

const NO_GRANTS = { grantOptions: {}, grants: new Map<string, CompiledGrant>(), consented: null };

/** Whether the call runs under the view's verified manifest. */
export function viewNames(view: RelationView, call: JsonObject): boolean {
  return view.manifestVersion !== null && call["manifest_version"] === view.manifestVersion
    && call["manifest_hash"] === view.manifest.hash;
}

type Pair = [number, string];
const pairKey = ([v, h]: Pair): string => `${v}:${h}`;

/** Fetches and verifies relation views for one device (it remembers manifest versions). */
export class RelationViews {
  readonly verifier = new ManifestVerifier();
  readonly consents: ConsentMemory;

  constructor(readonly keydir: KeyDirectory, readonly clock: () => number = Date.now) {
    this.consents = new ConsentMemory(keydir.pins.state);
  }

  private get state(): LocalState {
    return this.keydir.pins.state;
  }

  /** The relation as the server states it, verified: a manifest that does not verify
   * (IdentityChanged included) gives a view that runs nothing. */
  async fetch(transport: Transport, relationId: string): Promise<RelationView> {
    let relation: any;
    let agent: any;
    try {
      [relation, agent] = await this.served(transport, relationId);
    } catch (error) { // AnswerInvalid, AgentChanged, a refusal to answer: nothing of it is believed
      if (!(error instanceof ManifestUnverified || error instanceof AgentChanged || error instanceof ApiError)) throw error;
      console.warn(`hashee: relation ${relationId}: the server's answer is not believed: ${error.message}`);
      return { relationId, agentId: (await this.state.pinnedAgent(relationId)) ?? "", agentName: "", granted: new Set(), revoked: false,
        manifest: EMPTY, manifestVersion: null, pending: new Set(), unconfirmed: new Set(), unverified: error.message, safetyNumber: null,
        unbacked: new Set(), consentRevoked: false, consentProblem: "", ...NO_GRANTS, consentSeq: 0, consentTs: null, signedScopes: null };
    }
    const agentId: string = relation.agent_id;
    const believed = await this.believe(relationId, agentId, relation);
    const granted = new Set<string>(Array.isArray(relation.granted_scopes) ? relation.granted_scopes.map(String) : []);
    const options = grantOptionsBelieved(believed.statement, relation, granted);
    const base = {
      relationId, agentId, agentName: String(agent?.name ?? ""), granted, ...(await this.revocation(relationId, relation, believed.statement)),
      consentProblem: believed.problem || options.problem, consentSeq: Number(believed.statement?.["seq"] ?? 0),
      consentTs: believed.statement === null ? null : Number(believed.statement["ts"]),
      signedScopes: believed.statement === null ? null : new Set((believed.statement["granted_scopes"] as string[]) ?? []),
    };
    let identity: PublicJwk | null;
    let current: VerifiedManifest;
    let acknowledged: VerifiedManifest;
    let signed: VerifiedManifest | null = null;
    try {
      identity = await this.keydir.identity(relationId, agentId);
      current = this.current(agentId, agent, identity);
      const backed = await this.backed(relationId, believed.statement);
      acknowledged = await this.acknowledged(transport, agentId, relation, current, identity, backed,
        await this.state.pinnedAcknowledgement(relationId));
      if (believed.statement !== null) signed = await this.versionOrCurrent(transport, agentId, believed.statement, current, identity, backed);
      await this.followAcknowledgement(transport, relationId, agentId, acknowledged, identity, backed);
    } catch (error) {
      if (!(error instanceof ManifestUnverified)) throw error;
      return { ...base, manifest: EMPTY, manifestVersion: null, pending: new Set(), unconfirmed: new Set(), unverified: error.message,
        safetyNumber: null, unbacked: new Set(), ...NO_GRANTS };
    }
    const consented = believed.statement !== null ? signed! : acknowledged;
    const serverPending = Array.isArray(relation.pending_scopes) ? relation.pending_scopes.map(String) : [];
    const pending = new Set([...changedScopes(consented.manifest, current.manifest), ...serverPending]);
    const [unbacked, unconfirmed] = await this.backing(relationId, granted, believed.statement, pending, acknowledged, signed);
    return {
      ...base, manifest: compileManifest(current.manifest, consented.manifest), manifestVersion: current.version,
      pending: new Set([...pending].filter((s) => !unbacked.has(s))), unconfirmed, unbacked, unverified: "",
      safetyNumber: await this.safetyNumber(relationId, agentId, identity), grantOptions: options.effective,
      grants: compileGrants(options.effective), consented: { version: consented.version, hash: consented.hash },
    };
  }

  /** The relation and its agent as the server serves them, of the documented shape; throws
   * AnswerInvalid, AgentChanged (another agent than the one first seen) or ApiError. */
  private async served(transport: Transport, relationId: string): Promise<[Record<string, any>, Record<string, unknown>]> {
    const relation = await callApi(transport, "GET", `/h2a/relations/${relationId}`);
    const scopes = (name: string): boolean => Array.isArray(relation[name]) && relation[name].every((s: unknown) => typeof s === "string");
    if (!isJsonObject(relation) || typeof relation["agent_id"] !== "string" || !STATUSES.includes(relation["status"] as string)
      || !scopes("granted_scopes") || !scopes("pending_scopes")) {
      throw new AnswerInvalid(`relation ${relationId} is not served as the API documents it`);
    }
    await this.keydir.pins.checkAgent(relationId, relation["agent_id"]);
    const agent = await callApi(transport, "GET", `/agents/${relation["agent_id"]}`);
    if (!isJsonObject(agent)) throw new AnswerInvalid(`agent ${relation["agent_id"]} is not served as the API documents it`);
    return [relation, agent];
  }

  /** SPEC §9.6: the newest statement verified for this relation, the one served now included. */
  async believe(relationId: string, agentId: string, relation: any): Promise<Believed> {
    const served = relation?.consent_statement ?? null;
    const devices = served !== null ? await this.keydir.trustedUserDevices(relationId) : new Map<string, PublicKeys>();
    return this.consents.believe(relationId, served, devices, agentId, relation?.user);
  }

  /** A relation seen revoked (by the server, or a verified statement) stays revoked here. */
  private async revocation(relationId: string, relation: any, statement: JsonObject | null): Promise<{ revoked: boolean; consentRevoked: boolean }> {
    const revoked = relation.status === "revoked";
    if (revoked || statement?.["revoked"] === true) await this.state.tombstoneRelation(relationId);
    return { revoked, consentRevoked: !revoked && (await this.state.relationTombstoned(relationId)) };
  }

  /** The agent's current manifest as `GET /agents/{id}` serves it, verified. */
  current(agentId: string, agent: any, identity: PublicJwk | null): VerifiedManifest {
    return this.verifier.verify({ agentId, version: agent?.capability_manifest_version, manifest: agent?.capability_manifest,
      statedHash: agent?.capability_manifest_hash, signature: agent?.capability_manifest_signature, identity });
  }

  /** The (version, hash) pairs believed without the identity's signature: the pinned
   * acknowledgement and the newest verified statement's. */
  private async backed(relationId: string, statement: JsonObject | null): Promise<Set<string>> {
    const pinned = await this.state.pinnedAcknowledgement(relationId);
    const found = new Set<string>();
    if (pinned !== null) found.add(pairKey([pinned.version, pinned.hash]));
    if (statement !== null) found.add(pairKey(acknowledgementOf(statement)));
    return found;
  }

  private async versionOrCurrent(transport: Transport, agentId: string, statement: JsonObject, current: VerifiedManifest,
    identity: PublicJwk | null, backed: Set<string>): Promise<VerifiedManifest> {
    const [version, digest] = acknowledgementOf(statement);
    const found = version === current.version ? current
      : version < current.version ? await this.version(transport, agentId, version, identity, backed) : null;
    if (found === null || found.hash !== digest) {
      throw new ManifestUnverified(`version ${version}, which the user signed for, is not served as they saw it`);
    }
    return found;
  }

  /** [unbacked, unconfirmed]: signed — the grants the statement does not give, plus the pending
   * scopes when the relation claims another acknowledgement; never signed — §9.6 bullet 4. */
  private async backing(relationId: string, granted: ReadonlySet<string>, statement: JsonObject | null, pending: ReadonlySet<string>,
    acknowledged: VerifiedManifest, signed: VerifiedManifest | null): Promise<[Set<string>, Set<string>]> {
    if (statement === null) return [new Set(), await this.unconfirmed(relationId, granted)];
    const given = new Set((statement["granted_scopes"] as string[]) ?? []);
    const unbacked = new Set([...granted].filter((s) => !given.has(s)));
    if (signed === null || acknowledged.version !== signed.version || acknowledged.hash !== signed.hash) {
      for (const scope of pending) unbacked.add(scope);
    }
    return [unbacked, new Set()];
  }

  /** A re-consent the device did not see moves the acknowledged version: the scopes changed
   * since the version this device last took into account are asked once more on it. */
  private async followAcknowledgement(transport: Transport, relationId: string, agentId: string, acknowledged: VerifiedManifest,
    identity: PublicJwk | null, backed: Set<string>): Promise<void> {
    const pinned = await this.state.pinnedAcknowledgement(relationId);
    if (pinned !== null && (pinned.version !== acknowledged.version || pinned.hash !== acknowledged.hash)) {
      const before = await this.version(transport, agentId, pinned.version, identity, backed);
      if (before.hash !== pinned.hash) throw new ManifestUnverified(`version ${pinned.version} is served with another hash than this device saw`);
      await this.state.unconfirmGrants(relationId, changedScopes(before.manifest, acknowledged.manifest));
    }
    await this.state.pinAcknowledgement(relationId, acknowledged.version, acknowledged.hash);
  }

  /** The grants first seen are trusted; a scope granted later is the server's word until the
   * user confirms it on this device; one withdrawn loses its confirmation. */
  private async unconfirmed(relationId: string, granted: ReadonlySet<string>): Promise<Set<string>> {
    const confirmed = await this.state.confirmedGrants(relationId);
    if (confirmed === null) {
      await this.state.confirmGrants(relationId, granted);
      return new Set();
    }
    await this.state.unconfirmGrants(relationId, [...confirmed].filter((s) => !granted.has(s)));
    return new Set([...granted].filter((s) => !confirmed.has(s)));
  }

  /** The version the relation says the user consented to, verified. 0, null, a missing field,
   * a version older than pinned or a hash that is not 64 hex digits are lies, never "not acknowledged". */
  private async acknowledged(transport: Transport, agentId: string, relation: any, current: VerifiedManifest,
    identity: PublicJwk | null, backed: Set<string>, pinned: { version: number; hash: string } | null): Promise<VerifiedManifest> {
    const version = relation.acknowledged_manifest_version;
    const stated = relation.acknowledged_manifest_hash;
    if (!Number.isSafeInteger(version) || version <= 0 || version > current.version) {
      throw new ManifestUnverified(`the relation names no acknowledged version from 1 to ${current.version}`);
    }
    if (stated !== null && stated !== undefined && !(typeof stated === "string" && HEX64.test(stated))) {
      throw new ManifestUnverified("the relation's acknowledged hash is not a SHA-256 digest");
    }
    if (pinned !== null && version < pinned.version) {
      throw new ManifestUnverified(`the relation names version ${version}; this device saw version ${pinned.version} acknowledged`);
    }
    const found = version === current.version ? current : await this.version(transport, agentId, version, identity, backed);
    if (stated !== null && stated !== undefined && stated !== found.hash) throw new ManifestUnverified(`the acknowledged hash is not version ${version}'s`);
    return found;
  }

  /** An earlier version, verified: an identified agent's carries the pinned identity's
   * signature unless this device has other backing for its hash. */
  private async version(transport: Transport, agentId: string, version: number, identity: PublicJwk | null,
    backed: Set<string>): Promise<VerifiedManifest> {
    let found: any;
    try {
      found = await callApi(transport, "GET", `/agents/${agentId}/manifest/versions/${version}`);
    } catch (error) {
      if (error instanceof ApiError) throw new ManifestUnverified(`the acknowledged version ${version} is not available (${error.code})`);
      throw error;
    }
    if (found?.version !== version) throw new ManifestUnverified(`asked for version ${version}, the server sent another`);
    const known = backed.has(pairKey([version, String(found.hash)]));
    return this.verifier.verify({ agentId, version, manifest: found.manifest, statedHash: found.hash,
      signature: found.capability_manifest_signature, identity: known ? null : identity });
  }

  /** SPEC §9.2: the pinned identity's and the user's root's fingerprints — the root this device knows. */
  async safetyNumber(relationId: string, agentId: string, identity: PublicJwk | null): Promise<string | null> {
    if (identity === null) return null;
    const root = await this.keydir.root(relationId);
    return root === null ? null : safetyNumber({ agentId, agentIdentity: b64urlDecode(identity.x), userRootDevice: root.ed25519 });
  }

  /** The safety number with the identity the server serves now (to compare after a change). */
  async pendingSafetyNumber(transport: Transport, relationId: string): Promise<string | null> {
    const keys = relationKeysFrom(await callApi(transport, "GET", `/h2a/relations/${relationId}/keys`), this.clock(), relationId);
    const served = publicIdentity(await this.keydir.servedIdentity(keys.agentId));
    return this.safetyNumber(relationId, keys.agentId, served);
  }

  /** Pin the identity served now — only if it is the one the user compared (its safety number or kid). */
  async acceptIdentity(transport: Transport, relationId: string, compared: { safetyNumber?: string; kid?: string }): Promise<string> {
    if ((compared.safetyNumber === undefined) === (compared.kid === undefined)) throw new Error("name what the user compared: safetyNumber or kid");
    const keys = relationKeysFrom(await callApi(transport, "GET", `/h2a/relations/${relationId}/keys`), this.clock(), relationId);
    const served = await this.keydir.servedIdentity(keys.agentId); // read once: what is compared is what is pinned
    const pub = publicIdentity(served);
    const number = await this.safetyNumber(relationId, keys.agentId, pub);
    const digits = (s: string): string => s.replace(/\D/g, "");
    const ok = pub !== null && number !== null && (compared.kid !== undefined ? compared.kid === jwkThumbprint(pub)
      : digits(compared.safetyNumber!) === digits(number));
    if (!ok) throw new SafetyNumberMismatch(`relation ${relationId}: the identity served now is not the one the user compared`);
    await this.keydir.pins.acceptIdentity(relationId, keys.agentId, served);
    this.keydir.forget(relationId);
    return number!;
  }
}
