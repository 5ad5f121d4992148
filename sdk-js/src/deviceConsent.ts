/**
 * The consent half of a user's {@link Device} (sdk/hashee_sdk/device_consent.py): what the user
 * consents to, signed on this device (SPEC §9.6) — grants, re-consents, withdrawals and
 * revocations — and the care of grant options the device alone can take (SPEC §5.2 v1.2, issue
 * 26): a once grant taken before its call runs and withdrawn after the answer, and the 90-day
 * notice of high grants nobody uses. The device's state it works on is its host's.
 */
import type { AuditLog } from "./audit.js";
import type { JsonObject } from "./canonical.js";
import { signConsent, type SignedConsent } from "./consentStatements.js";
import type { KeyPair } from "./crypto.js";
import { ApiError, ManifestUnverified } from "./errors.js";
import { grantOptionsOf, type CompiledGrant, type GrantOptions } from "./grants.js";
import type { KeyDirectory } from "./keys.js";
import type { LocalState } from "./localState.js";
import type { SensitivityPolicy } from "./policy.js";
import { callApi, type Transport } from "./rest.js";
import { publicIdentity, type VerifiedManifest } from "./trust.js";
import type { RelationView, RelationViews } from "./views.js";

/** A granted scope of high sensitivity this device has not used for a while (Android's auto-reset). */
export interface UnusedGrant {
  readonly relationId: string;
  readonly agentId: string;
  readonly agentName: string;
  readonly scope: string;
  /** epoch ms: the last call of the scope this device answered, or when it saw the grant first */
  readonly since: number;
}

export const UNUSED_GRANT_DAYS = 90;
const DAY_MS = 24 * 3600 * 1000;
const WITHDRAW_FAILED = "withdraw_failed";

/** What the consent half tells the user of, beside a refused call (the device's `call_refused`). */
export type ConsentNoticeKind = "once_not_withdrawn" | "unused_grant";

/** The device whose consent this is: its state, its verified views, and how it tells its user. */
export interface ConsentHost {
  readonly transport: Transport;
  readonly state: LocalState;
  readonly audit: AuditLog;
  readonly policy: SensitivityPolicy;
  /** The device's keys, its key directory and its verified views: made when it loaded its keys. */
  keys(): KeyPair;
  keydir(): KeyDirectory;
  views(): RelationViews;
  clock(): number;
  /** The verified view of a relation (cached unless `refresh`). */
  relation(relationId: string, refresh: boolean): Promise<RelationView>;
  /** Drop cached views: what the user signed changed them. */
  invalidate(...relationIds: string[]): void;
  /** The agent of a relation whose view is cached, or "". */
  agentOf(relationId: string): string;
  /** Tell the user, once per relation, kind and scope. */
  notice(kind: ConsentNoticeKind, relationId: string, agentId: string, scope: string, text: string): void;
}

export class DeviceConsent {
  private readonly host: ConsentHost;
  /** `relation\nscope` of once grants used, to withdraw after the answer. */
  private readonly withdrawals = new Set<string>();

  constructor(host: ConsentHost) {
    this.host = host;
  }

  /** Take a `once` grant, durably, before the call runs: a second call (another process's
   * too) finds it used. The scope is then withdrawn with a signed PATCH, after the answer. */
  async takeOnce(view: RelationView, scope: string): Promise<boolean> {
    if (!(await this.host.state.useOnce(view.relationId, scope, view.consentSeq))) return false;
    this.withdrawals.add(`${view.relationId}\n${scope}`);
    return true;
  }


  /** Connect to an agent with a consent statement signed here for its current verified manifest;
   * `grantOptions` (SPEC §5.2 v1.2: once, until, arguments per scope) are signed with it. */
  async grant(agentId: string, scopes: Iterable<string>, options: { userId?: string; grantOptions?: GrantOptions | JsonObject } = {}): Promise<any> {
    const granted = [...new Set(scopes)].sort();
    const agent = await callApi(this.host.transport, "GET", `/agents/${agentId}`);
    const served = await this.host.keydir().servedIdentity(agentId);
    const current = this.host.views().current(agentId, agent, publicIdentity(served));
    const userId = options.userId ?? (await this.userId());
    const grantOptions = grantOptionsOf(options.grantOptions, granted);
    const signed = await this.sign(agentId, userId, granted, current, false, grantOptions);
    const relation = await callApi(this.host.transport, "POST", "/h2a/relations", { json: { agent_id: agentId, granted_scopes: granted,
      ...optionsField(grantOptions), consent_statement: signed } });
    const relationId = String(relation.relation_id);
    await this.host.keydir().pins.identity(relationId, agentId, served); // what the user consented under
    await this.signed(relationId, signed);
    return relation;
  }

  /** Change the grants, or consent again to the current verified manifest, signed here. A
   * `once` grant this device used and could not withdraw yet is left out. */
  async reconsent(relationId: string, scopes: Iterable<string>, options: { grantOptions?: GrantOptions | JsonObject } = {}): Promise<any> {
    const used = await this.usedOnce(relationId);
    const granted = [...new Set(scopes)].filter((s) => !used.has(s)).sort();
    const [relation, current] = await this.verifiedCurrent(relationId);
    const grantOptions = grantOptionsOf(options.grantOptions, granted);
    const signed = await this.sign(String(relation.agent_id), String(relation.user), granted, current, false, grantOptions);
    const updated = await callApi(this.host.transport, "PATCH", `/h2a/relations/${relationId}`, { json: { granted_scopes: granted,
      ...optionsField(grantOptions), acknowledged_manifest_version: current.version, acknowledged_manifest_hash: current.hash,
      consent_statement: signed } });
    await this.signed(relationId, signed);
    return updated;
  }

  /** Withdraw one scope with a signed PATCH that keeps everything else the user consented to
   * (the version they acknowledged, the other grants and their options); throws ApiError. */
  async withdraw(relationId: string, scope: string): Promise<any> {
    return this.withdrawSigned(relationId, new Set([scope]));
  }

  private async withdrawSigned(relationId: string, scopes: ReadonlySet<string>): Promise<any> {
    const view = await this.host.relation(relationId, true);
    if (view.consented === null) throw new ManifestUnverified(`relation ${relationId}: ${view.unverified}`);
    const relation = await callApi(this.host.transport, "GET", `/h2a/relations/${relationId}`);
    const newest = await this.host.views().consents.newest(relationId);
    const used = await this.usedOnce(relationId);
    const nowMs = this.host.clock();
    const before = newest !== null ? ((newest["granted_scopes"] as string[]) ?? []) : [...view.granted];
    const granted = before.filter((s) => !scopes.has(s) && !used.has(s) && !expired(view.grants.get(s), nowMs)).sort();
    const grantOptions = grantOptionsOf(view.grantOptions, granted);
    const signed = await this.sign(view.agentId, String(relation.user), granted, view.consented, false, grantOptions);
    const updated = await callApi(this.host.transport, "PATCH", `/h2a/relations/${relationId}`, { json: { granted_scopes: granted,
      ...optionsField(grantOptions), acknowledged_manifest_version: view.consented.version,
      acknowledged_manifest_hash: view.consented.hash, consent_statement: signed } });
    await this.signed(relationId, signed);
    return updated;
  }

  /** Withdraw the once grants used in `relationId`; when that fails (offline, a new version out)
   * they stay refused here, are left out of the next consent signed here, and the user is told. */
  async withdrawUsedOnce(relationId: string): Promise<void> {
    const scopes = new Set([...this.withdrawals].filter((k) => k.startsWith(`${relationId}\n`)).map((k) => k.slice(relationId.length + 1)));
    if (scopes.size === 0) return;
    for (const scope of scopes) this.withdrawals.delete(`${relationId}\n${scope}`);
    try {
      await this.withdrawSigned(relationId, scopes);
    } catch (error) {
      const code = error instanceof ApiError ? error.code : error instanceof ManifestUnverified ? "manifest_unverified" : "SERVICE_UNAVAILABLE";
      if (!(error instanceof ApiError || error instanceof ManifestUnverified || error instanceof TypeError)) throw error;
      console.warn(`hashee device: the once grant of ${[...scopes].join(", ")} in relation ${relationId} was used; `
        + `withdrawing it failed (${code}): it stays refused on this device`);
      for (const scope of scopes) {
        this.host.notice("once_not_withdrawn", relationId, this.host.agentOf(relationId), scope, `${scope} was granted `
          + `only this time and has been used: this device refuses it from now on, but the server did not take its withdrawal `
          + `(${code}). Your next consent leaves it out.`);
        await this.host.audit.record({ call_id: `withdraw:${relationId}`.slice(0, 160), agent_id: this.host.agentOf(relationId),
          tool_name: "", scope, arguments: null, status: WITHDRAW_FAILED, reason: code, nowMs: this.host.clock() });
      }
    }
  }

  /** The user keeps a grant reported unused: the 90 days start again from now. */
  async keepGrant(relationId: string, scope: string): Promise<void> {
    await this.host.state.recordGrantUse(relationId, scope, this.host.clock());
  }

  /** The once grants used here under the newest statement (or the unsigned consent): not
   * withdrawn by a statement signed since. */
  private async usedOnce(relationId: string): Promise<Set<string>> {
    const seq = Number((await this.host.views().consents.newest(relationId))?.["seq"] ?? 0);
    return new Set([...await this.host.state.onceUsed(relationId)].filter(([, used]) => used >= seq).map(([scope]) => scope));
  }

  /** The scopes whose once grant is spent: used under the consent in force, or under an
   * earlier one and not granted again since. Refused whatever the server says. */
  async spent(view: RelationView): Promise<Set<string>> {
    const given = view.signedScopes ?? view.granted;
    return new Set([...await this.host.state.onceUsed(view.relationId)]
      .filter(([scope, used]) => used >= view.consentSeq || !given.has(scope)).map(([scope]) => scope));
  }

  /** When each grant was first seen (the 90-day notice counts from it when it is never used), and the once
   * grants used, read again from the store with each view the device fetches. */
  async noteGrants(view: RelationView): Promise<void> {
    const used = await this.host.state.onceUsed(view.relationId, true); // read again with the view: calls read it from memory
    if (view.manifestVersion === null) return;
    await this.host.state.noteGrants(view.relationId, view.signedScopes ?? view.granted, view.consentTs ?? this.host.clock());
    if (view.signedScopes === null) {
      await this.host.state.forgetUnsignedOnce(view.relationId, [...used.keys()].filter((s) => !view.granted.has(s)));
    }
  }

  /** The granted scopes of high sensitivity this device has not used for `days` (90): neither
   * answered a call of since, nor seen granted first since — offered to the user to withdraw. */
  async unusedGrants(options: { days?: number; now?: number } = {}): Promise<UnusedGrant[]> {
    const nowMs = options.now ?? this.host.clock();
    const limitMs = (options.days ?? UNUSED_GRANT_DAYS) * DAY_MS;
    const page = await callApi(this.host.transport, "GET", "/h2a/relations?page_size=100");
    const found: UnusedGrant[] = [];
    for (const relation of Array.isArray(page?.results) ? page.results : []) {
      if (relation?.status === "revoked" || typeof relation?.relation_id !== "string") continue;
      const view = await this.host.relation(relation.relation_id, true);
      for (const scope of [...view.granted].sort()) {
        if (view.unbacked.has(scope) || view.pending.has(scope) || !highScope(view, scope)) continue;
        const since = await this.host.state.grantUsedAt(view.relationId, scope); // noted when the view was read
        if (since !== null && nowMs - since >= limitMs) {
          found.push({ relationId: view.relationId, agentId: view.agentId, agentName: view.agentName, scope, since });
        }
      }
    }
    for (const unused of found) {
      const days = Math.floor((nowMs - unused.since) / DAY_MS);
      this.host.notice("unused_grant", unused.relationId, unused.agentId, unused.scope, `${unused.agentName || `agent ${unused.agentId}`} `
        + `has not used ${unused.scope} for ${days} days. You can withdraw it: it is asked again if the agent needs it later.`);
    }
    return found;
  }

  /** Revoke with a signed revocation: revoked for this device at once, whatever the server says later. */
  async revoke(relationId: string): Promise<any> {
    await this.host.state.tombstoneRelation(relationId);
    this.host.invalidate(relationId);
    const [relation, current] = await this.verifiedCurrent(relationId);
    const signed = await this.sign(String(relation.agent_id), String(relation.user), [], current, true);
    const revoked = await callApi(this.host.transport, "DELETE", `/h2a/relations/${relationId}`, { json: { consent_statement: signed } });
    await this.signed(relationId, signed);
    return revoked;
  }

  private async verifiedCurrent(relationId: string): Promise<[any, VerifiedManifest]> {
    const relation = await callApi(this.host.transport, "GET", `/h2a/relations/${relationId}`);
    const agentId = String(relation.agent_id);
    const agent = await callApi(this.host.transport, "GET", `/agents/${agentId}`);
    return [relation, this.host.views().current(agentId, agent, await this.host.keydir().identity(relationId, agentId))];
  }

  private async userId(): Promise<string> {
    const page = await callApi(this.host.transport, "GET", "/h2a/relations");
    const users = new Set((page?.results ?? []).map((r: any) => r?.user));
    const [only] = users;
    if (users.size !== 1 || typeof only !== "string") throw new Error("the user's id is not known from their relations: pass userId");
    return only;
  }

  private async sign(agentId: string, userId: string, granted: string[], current: { version: number; hash: string },
    revoked = false, grantOptions: JsonObject = {}): Promise<SignedConsent> {
    const nowMs = this.host.clock();
    return signConsent(this.host.keys(), { agentId, userId, grantedScopes: granted, acknowledgedManifestVersion: current.version,
      acknowledgedManifestHash: current.hash, seq: await this.host.views().consents.nextSeq(agentId, userId, nowMs), ts: nowMs, revoked,
      grantOptions });
  }

  /** The server accepted a statement signed here: it is the newest verified one. */
  private async signed(relationId: string, signed: SignedConsent): Promise<void> {
    await this.host.views().consents.remember(relationId, signed as unknown as { statement: JsonObject; signature: string });
    if (signed.statement.revoked) await this.host.state.tombstoneRelation(relationId);
    else await this.host.state.confirmGrants(relationId, signed.statement.granted_scopes);
    this.host.invalidate(relationId);
    this.host.policy.forget(signed.statement.agent_id);
  }
}

/** The request's `grant_options` member: absent when there are none (a server of before v1.2 reads the same). */
function optionsField(grantOptions: JsonObject): { grant_options?: JsonObject } {
  return Object.keys(grantOptions).length > 0 ? { grant_options: grantOptions } : {};
}

function expired(grant: CompiledGrant | undefined, nowMs: number): boolean {
  return grant?.untilMs != null && nowMs >= grant.untilMs;
}

function highScope(view: RelationView, scope: string): boolean {
  return [...view.manifest.tools.values()].some((tool) => tool.scope === scope && tool.sensitivity === "high");
}
