/**
 * The agent runtime (sdk/hashee_sdk/agent.py's AgentRuntime, named `Agent` as SPEC §12.3 asks):
 * `callTool` validates the arguments against the agent's own manifest, checks that manifest is
 * the published one (the call names its version and hash, SPEC §9.3) and that the newest
 * verified consent statement gives the scope (SPEC §9.6), then seals one envelope with a copy
 * for every trusted device of the user, carrying a fresh reply key and `expires_at`, and
 * resolves with the first answer sealed to that reply key by one of those devices. The reply
 * key's private half is dropped when the call ends.
 */
import { canonicalHash, canonicalize, isJsonObject, type Json, type JsonObject } from "./canonical.js";
import { compileManifest, type CompiledManifest, type CompiledTool } from "./contract.js";
import type { KeyPair, PublicKeys } from "./crypto.js";
import { b64encode, b64urlDecode } from "./encoding.js";
import { MAX_COPIES, openCopy, Recipient, seal, senderKeyId } from "./envelope.js";
import {
  ApiError, ArgumentsInvalid, ConsentUnverified, EnvelopeError, ManifestNotPublished, NoRecipientKey, ResultInvalid, SafetyNumberMismatch,
  ToolCallTimeout, ToolNotDeclared, denialReason, type ErrorDetail,
} from "./errors.js";
import { frameParts, listen, type WebSocketConstructor } from "./events.js";
import { grantOptionsOf } from "./grants.js";
import { KeyDirectory, listedRoot, relationKeysFrom, userKeys } from "./keys.js";
import { LocalState } from "./localState.js";
import { ed25519PublicJwk, type PrivateJwk } from "./jose.js";
import { HIGH_PROMPT_TIMEOUT_MS } from "./policy.js";
import { callApi, FetchTransport, sendMessage, TokenSource, type CredentialInput, type EventFrame, type Transport } from "./rest.js";
import { safetyNumber, sameSafetyNumber, signRuntimeKey } from "./statements.js";
import type { Store } from "./store.js";
import { KeyPins, publicIdentity, USER } from "./trust.js";
import { acknowledgementOf, changedScopes, ConsentMemory } from "./views.js";
import { AGENT_TO_USER, replyKeyId, USER_TO_AGENT } from "./wire.js";
import nacl from "tweetnacl";

export const NETWORK_ALLOWANCE_MS = 10_000;
export const EXPIRY_SLACK_MS = 60_000;
export const PUBLISHED_TTL_MS = 60_000;
const CURSOR = "agent-events";

export type ToolAnswer =
  | { readonly status: "ok"; readonly result: Json }
  | { readonly status: "denied" | "error"; readonly reason: string; readonly details?: readonly unknown[] };

export interface AgentOptions {
  readonly url: string;
  readonly credential: CredentialInput;
  readonly agentId: string;
  readonly store: Store;
  /** The manifest this runtime calls under; by default the one the agent publishes when it starts. */
  readonly manifest?: JsonObject;
  /** The agent's private identity JWK, where the runtime may hold it: signs its runtime key. */
  readonly identityKey?: PrivateJwk;
  /** A signature of the runtime key made where the identity key is kept. */
  readonly identitySignature?: string;
  readonly transport?: Transport;
  readonly clock?: () => number;
  readonly webSocket?: WebSocketConstructor | null;
}

interface Pending {
  readonly callId: string;
  readonly relationId: string;
  readonly tool: CompiledTool;
  readonly devices: Map<string, PublicKeys>;
  replySecret: Uint8Array | null;
  readonly resolve: (answer: ToolAnswer) => void;
  readonly reject: (error: Error) => void;
  done: boolean;
}

/** Read a tool_response; a malformed one reads as `error: TOOL_PLATFORM_ERROR`. */
export function toolAnswerFrom(artifact: JsonObject): ToolAnswer {
  const status = artifact["status"];
  if (artifact["subtype"] !== "tool_response" || !["ok", "error", "denied"].includes(String(status))) {
    return { status: "error", reason: "TOOL_PLATFORM_ERROR" };
  }
  if (status === "ok") return { status: "ok", result: artifact["result"] ?? null };
  const reason = denialReason(artifact["reason"]) ?? String(artifact["reason"] ?? "");
  const details = artifact["details"];
  return Array.isArray(details) ? { status: status as "denied" | "error", reason, details } : { status: status as "denied" | "error", reason };
}

/** One agent runtime process (SPEC §12.3). */
export class Agent {
  readonly agentId: string;
  readonly transport: Transport;
  readonly state: LocalState;
  readonly keydir: KeyDirectory;
  readonly consents: ConsentMemory;
  keys!: KeyPair;
  manifest: CompiledManifest | null = null;
  private source: JsonObject | null;
  private readonly options: AgentOptions;
  private readonly clock: () => number;
  private readonly pending = new Map<string, Pending>(); // by reply key id
  private published: { version: number; at: number } | null = null;
  private ready: Promise<void> | null = null;
  private controller: AbortController | null = null;
  private listening: Promise<void> | null = null;

  constructor(options: AgentOptions) {
    this.options = options;
    this.agentId = options.agentId;
    this.transport = options.transport ?? new FetchTransport(options.url, options.credential);
    this.state = new LocalState(options.store);
    this.clock = options.clock ?? Date.now;
    this.keydir = new KeyDirectory(this.transport, new KeyPins(this.state), USER, null, this.clock);
    this.consents = new ConsentMemory(this.state);
    this.source = options.manifest ?? null;
  }

  get pendingCalls(): number {
    return this.pending.size;
  }

  init(): Promise<void> {
    this.ready ??= (async () => {
      this.keys = await this.state.keyPair();
      if (this.source === null) {
        const agent = await callApi(this.transport, "GET", `/agents/${this.agentId}`);
        this.source = agent.capability_manifest as JsonObject;
      }
      this.manifest = compileManifest(this.source);
    })();
    return this.ready;
  }

  /** Publish the runtime key (once per key pair), then listen for answers until {@link stop}. */
  async start(): Promise<void> {
    await this.init();
    await this.publishKey();
    this.controller = new AbortController();
    const credential = this.transport instanceof FetchTransport ? this.transport.credential : null;
    if (credential === null) return;
    this.listening = listen({
      baseUrl: this.options.url, path: "/ws/agent", credential, transport: this.transport, signal: this.controller.signal,
      since: await this.state.cursor(CURSOR), onCursor: (last) => this.state.setCursor(CURSOR, last),
      onFrame: (frame) => this.handleFrame(frame).catch(() => undefined),
      ...(this.options.webSocket !== undefined ? { webSocket: this.options.webSocket } : {}),
    }).catch((error: unknown) => console.warn(`hashee agent: listening ended: ${(error as Error).name}`));
  }

  async stop(): Promise<void> {
    this.controller?.abort();
    await this.listening;
    this.listening = null;
    for (const pending of this.pending.values()) pending.reject(new ToolCallTimeout(pending.callId, 0));
  }

  /** `POST /agents/{id}/keys`, vouched for by the identity when there is one. A `hat_` token may
   * not publish keys: with a `hak_` credential the long-lived key does it. */
  async publishKey(): Promise<void> {
    await this.init();
    if ((await this.state.store.get("published/agent")) === this.keys.keyId) return;
    const signature = this.options.identitySignature
      ?? (this.options.identityKey ? signRuntimeKey(this.options.identityKey, { agentId: this.agentId, keyId: this.keys.keyId }) : undefined);
    const credential = this.transport instanceof FetchTransport ? this.transport.credential : null;
    const keydir = credential instanceof TokenSource && credential.agentKey !== null
      ? new KeyDirectory(new FetchTransport(this.options.url, staticKey(credential.agentKey)), this.keydir.pins, USER)
      : this.keydir;
    await keydir.registerAgentKey(this.agentId, this.keys.public, signature);
    await this.state.store.set("published/agent", this.keys.keyId);
  }

  /** The declared tool; raises ToolNotDeclared or ArgumentsInvalid (with details). */
  validate(name: string, args: unknown): CompiledTool {
    const tool = this.manifest?.tools.get(name);
    if (tool === undefined) throw new ToolNotDeclared(`${JSON.stringify(name)} is not declared in this agent's manifest`);
    if (tool.input === null || !tool.input.isValid(args)) throw new ArgumentsInvalid(name, tool.input?.details(args) ?? []);
    try {
      canonicalize(args);
    } catch (error) {
      throw new ArgumentsInvalid(name, [{ path: "/arguments", code: "NOT_CANONICALIZABLE", message: (error as Error).message }]);
    }
    return tool;
  }

  /** The version under which the agent publishes this runtime's manifest (checked at most once a minute). */
  async publishedVersion(refresh = false): Promise<number> {
    if (this.published !== null && !refresh && this.clock() - this.published.at < PUBLISHED_TTL_MS) return this.published.version;
    this.published = null;
    const agent = await callApi(this.transport, "GET", `/agents/${this.agentId}`);
    const version = agent?.capability_manifest_version;
    if (!Number.isSafeInteger(version) || agent?.capability_manifest_hash !== this.manifest!.hash) {
      throw new ManifestNotPublished(`agent ${this.agentId} publishes another manifest than this runtime's: publish it before calling tools`);
    }
    this.published = { version, at: this.clock() };
    return version;
  }

  /** Call a tool on the user's devices; the first verified answer. Raises ToolNotDeclared,
   * ArgumentsInvalid, ManifestNotPublished, ConsentUnverified, NoRecipientKey, ApiError (429:
   * `retryAfter`), ToolCallTimeout, ResultInvalid. */
  async callTool(relationId: string, name: string, args: JsonObject, options: { timeoutMs?: number; deviceId?: string } = {}): Promise<ToolAnswer> {
    await this.init();
    const tool = this.validate(name, args);
    const version = await this.publishedVersion();
    await this.checkConsent(relationId, tool.scope, version);
    const devices = await this.recipients(relationId, options.deviceId);
    const wait = Math.min(options.timeoutMs ?? tool.timeoutMs + HIGH_PROMPT_TIMEOUT_MS + NETWORK_ALLOWANCE_MS, tool.timeoutMs + EXPIRY_SLACK_MS);
    const nowMs = this.clock();
    const reply = nacl.box.keyPair();
    const callId = `call_${Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("")}`;
    const call: JsonObject = { subtype: "tool_call", call_id: callId, tool_name: name, arguments: args, permission_scope: tool.scope,
      timeout_ms: tool.timeoutMs, manifest_version: version, manifest_hash: this.manifest!.hash,
      reply_key: b64encode(reply.publicKey), expires_at: nowMs + wait };
    const sealed = seal(call, { sender: this.keys, recipients: devices.map((d) => Recipient.of(d)), relationId, direction: AGENT_TO_USER, nowMs });
    const replyId = replyKeyId(reply.publicKey);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const answer = new Promise<ToolAnswer>((resolve, reject) => {
      this.pending.set(replyId, { callId, relationId, tool, devices: new Map(devices.map((d) => [d.keyId, d])), replySecret: reply.secretKey,
        resolve, reject, done: false });
      timer = setTimeout(() => reject(new ToolCallTimeout(callId, wait)), wait);
    });
    try {
      await sendMessage(this.transport, relationId, "artifact_tool_call", sealed as unknown as JsonObject);
      return await answer;
    } finally {
      clearTimeout(timer);
      const pending = this.pending.get(replyId);
      if (pending) pending.replySecret?.fill(0); // the only copy of the reply key's private half
      this.pending.delete(replyId);
    }
  }

  /** SPEC §9.6: raises ConsentUnverified when the newest verified statement does not give `scope`
   * (or gave it until a time now past, SPEC §5.2; a once grant's use and a narrowing only the
   * device can judge). */
  async checkConsent(relationId: string, scope: string, version: number): Promise<void> {
    const statement = await this.consents.newest(relationId);
    if (statement === null) return; // never signed: the devices decide
    if (statement["revoked"] === true) throw new ConsentUnverified(`relation ${relationId}: the user revoked it (signed)`);
    if (!(statement["granted_scopes"] as string[]).includes(scope)) {
      throw new ConsentUnverified(`relation ${relationId}: the user's signed consent does not grant ${scope}`);
    }
    const until = grantOptionsOf(statement["grant_options"], [scope])[scope];
    if (isJsonObject(until) && Number.isSafeInteger(until["until"]) && this.clock() >= (until["until"] as number)) {
      throw new ConsentUnverified(`relation ${relationId}: the user granted ${scope} until a time now past`); // SPEC §5.2
    }
    if ((await this.changedSince(acknowledgementOf(statement), version)).has(scope)) {
      throw new ConsentUnverified(`relation ${relationId}: ${scope} changed since the version the user signed for`);
    }
  }

  /** The scopes changed between the acknowledged version (served as signed) and this runtime's
   * manifest — every scope when that version cannot be read as signed. */
  private async changedSince([number, digest]: [number, string], version: number): Promise<Set<string>> {
    if (number === version && digest === this.manifest!.hash) return new Set();
    const everything = new Set([...this.manifest!.tools.values()].map((t) => t.scope));
    const before = number > 0 && number < version ? await this.servedVersion(number, digest) : null;
    return before === null ? everything : changedScopes(before, this.source!);
  }

  private async servedVersion(version: number, digest: string): Promise<JsonObject | null> {
    try {
      const body = await callApi(this.transport, "GET", `/agents/${this.agentId}/manifest/versions/${version}`);
      return body?.manifest && canonicalHash(body.manifest) === digest ? body.manifest : null;
    } catch (error) {
      if (error instanceof ApiError) return null;
      throw error;
    }
  }

  private async recipients(relationId: string, deviceId?: string): Promise<PublicKeys[]> {
    for (const refresh of [false, true]) {
      const keys = await this.keydir.relation(relationId, refresh);
      const devices = keys.userDevices.filter((d) => deviceId === undefined || d.deviceId === deviceId).map((d) => d.keys);
      if (devices.length > 0) return devices.slice(-MAX_COPIES);
    }
    throw new NoRecipientKey(`the user of relation ${relationId} has no trusted device key`);
  }

  // --- the user's root and the safety number (SPEC §9.2; a user's reset, docs/wire-spec.md §3) ---

  /** The relation's safety number as this side sees it: the agent's identity and the user's
   * root this runtime pinned at its first look, for the owner to compare with the user's; null
   * when the agent has no identity key. Raises AmbiguousRoot. */
  async safetyNumber(relationId: string): Promise<string | null> {
    return this.numberWith(await this.keydir.root(relationId));
  }

  /** After the user reset their devices (`keys.device_reset`): the safety number with the root
   * the server lists now — not trusted — for the owner to compare with the one the user's new
   * device shows, before {@link acceptUserReset}. Raises AmbiguousRoot, AnswerInvalid. */
  async pendingSafetyNumber(relationId: string): Promise<string | null> {
    return this.numberWith(await this.listedUserRoot(relationId));
  }

  /** Trust the user's new root — only the one whose safety number (or, for an agent without an
   * identity key, whose key id) was compared out of band: the listing is read once, and what it
   * names must be exactly that. Every device trusted before is tombstoned. Returns the new
   * safety number; raises SafetyNumberMismatch (nothing changed), AmbiguousRoot. */
  async acceptUserReset(relationId: string, compared: { safetyNumber?: string; rootKeyId?: string }): Promise<string | null> {
    if ((compared.safetyNumber === undefined) === (compared.rootKeyId === undefined)) {
      throw new Error("name what was compared: safetyNumber or rootKeyId");
    }
    const root = await this.listedUserRoot(relationId);
    const number = await this.numberWith(root);
    const same = compared.safetyNumber !== undefined ? number !== null && sameSafetyNumber(number, compared.safetyNumber)
      : root?.keyId === compared.rootKeyId;
    if (root === null || !same) {
      console.warn(`hashee agent: relation ${relationId}: the user's root listed now is not the one compared: nothing accepted`);
      throw new SafetyNumberMismatch(relationId);
    }
    const state = this.keydir.pins.state;
    await state.tombstone(relationId, USER, (await state.pinned(relationId, USER)).keys());
    await state.pinRoot(relationId, root);
    await state.pin(relationId, USER, [root]);
    this.keydir.forget(relationId);
    return number;
  }

  private async listedUserRoot(relationId: string): Promise<PublicKeys | null> {
    return listedRoot(relationKeysFrom(await callApi(this.transport, "GET", `/h2a/relations/${relationId}/keys`), this.clock(), relationId));
  }

  private async numberWith(root: PublicKeys | null): Promise<string | null> {
    const own = this.options.identityKey;
    const identity = own !== undefined ? ed25519PublicJwk({ kty: own.kty, crv: own.crv, x: own.x })
      : publicIdentity(await this.keydir.servedIdentity(this.agentId));
    if (identity === null || root === null) return null;
    return safetyNumber({ agentId: this.agentId, agentIdentity: b64urlDecode(identity.x), userRootDevice: root.ed25519 });
  }

  /** Verify and keep the consent statement a relation event carries (SPEC §9.6). */
  async observeRelation(relation: any): Promise<void> {
    if (relation?.consent_statement === null || relation?.consent_statement === undefined) return;
    const relationId = String(relation.relation_id);
    try {
      const devices = userKeys(await this.keydir.relation(relationId)); // the trusted ones only
      await this.consents.believe(relationId, relation.consent_statement, devices, this.agentId, relation.user);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
    }
  }

  /** Act on one event frame (socket or poll). */
  async handleFrame(frame: EventFrame): Promise<void> {
    await this.init();
    const [type, data] = frameParts(frame); // a frame of another shape is read as an empty one, never thrown on
    const kind = typeof type === "string" ? type : "";
    if (kind.startsWith("h2a.relation_")) await this.observeRelation(data.relation ?? {});
    if (kind === "message.new") await this.onMessage(String(data.relation_id), data.message ?? {});
    else if (kind === "h2a.relation_revoked") {
      const relationId = String(data.relation?.relation_id);
      for (const p of this.pending.values()) if (p.relationId === relationId) p.resolve({ status: "denied", reason: "permission_revoked" });
    } else if (kind === "h2a.reauth_required" || kind === "agent.manifest_updated") this.published = null;
    else if (kind.startsWith("keys.device_")) {
      const relationId = String(data.relation_id ?? "");
      const keyId = data.device?.key_id;
      if (kind === "keys.device_revoked" && relationId && typeof keyId === "string") {
        await this.keydir.pins.state.tombstone(relationId, USER, [keyId]); // believing the server here only takes trust away
      }
      if (kind === "keys.device_reset") { // its revocations came as keys.device_revoked: nothing is trusted
        console.warn(`hashee agent: relation ${relationId}: the user reset their devices; calls wait until the new safety number`
          + " is compared and accepted (acceptUserReset)");
      }
      this.keydir.forget(relationId || undefined);
    } else if (kind === "resync_required") {
      this.published = null;
      this.keydir.forget();
    }
  }

  private async onMessage(relationId: string, message: any): Promise<void> {
    if (message?.msg_subtype !== "artifact_response" || message?.sender !== "user") return;
    const payload = message.payload;
    try {
      senderKeyId(payload); // the shape, before looking inside
    } catch {
      return;
    }
    const copy = (payload.copies as { recipient_key_id: string }[]).find((c) => this.pending.has(c.recipient_key_id));
    const pending = copy && this.pending.get(copy.recipient_key_id);
    if (!copy || !pending || pending.done || pending.replySecret === null) return; // nothing waits on it, or the first answer won
    let opened;
    try {
      opened = openCopy(payload, { recipientKeyId: copy.recipient_key_id, recipientX25519: pending.replySecret, senders: pending.devices,
        relationId: pending.relationId, direction: USER_TO_AGENT });
    } catch (error) {
      if (error instanceof EnvelopeError) return;
      throw error;
    }
    if (relationId !== pending.relationId || opened.artifact["call_id"] !== pending.callId) return;
    const answer = toolAnswerFrom(opened.artifact);
    pending.done = true;
    const output = pending.tool.output;
    if (answer.status === "ok" && output !== null && !output.isValid(answer.result)) {
      pending.reject(new ResultInvalid(pending.callId, pending.tool.name, output.details(answer.result) as ErrorDetail[]));
      return;
    }
    pending.resolve(answer);
  }
}

function staticKey(key: string): { renewable: false; token: () => Promise<string>; renew: () => Promise<string> } {
  return { renewable: false, token: async () => key, renew: async () => key };
}
