/**
 * A user's device: answers the agent's tool calls under SPEC §9.4, §9.3 and §6
 * (sdk/hashee_sdk/client.py's UserClient, named `Device` as SPEC §12.3 asks).
 *
 * For each `message.new` carrying an `artifact_tool_call`, in the order of docs/wire-spec.md §4:
 * 1. the envelope: this device's own copy (none: not for it, ignored), signed by a *trusted*
 *    agent key for this relation and direction;
 * 2. freshness: `expires_at` passed, or further ahead than `timeout_ms` + 60 s → dropped;
 * 3. the persistent replay record of `(relation_id, call_id)` → dropped;
 * 4. the manifest: its hash and, for an identified agent, its signature by the pinned identity
 *    (and every earlier version relied on), and the call names it → else `manifest_unverified`;
 * 5. SPEC §9.6: the newest verified consent statement → else `consent_unverified`;
 * 6. SPEC §6: group → declared → revoked → pending (`reauth_required`, that tool only) →
 *    granted → both schemas → sensitivity floors → prompt (30 s) → handler within
 *    `timeout_ms` → `output_schema` → a `tool_response` sealed to the call's reply key → audit.
 * Steps 1–3 answer nothing but are audited (status `refused`).
 */
import { AuditLog } from "./audit.js";
import { canonicalHash, canonicalize, isJsonObject, type Json, type JsonObject } from "./canonical.js";
import { signConsent, type SignedConsent } from "./consentStatements.js";
import { decide, responseDenied, responseError, responseOk, type CompiledTool, type Decision } from "./contract.js";
import { largeOrderX25519Async, platformCrypto, type KeyPair, type PublicKeys } from "./crypto.js";
import { b64decode } from "./encoding.js";
import { openCopy, openCopyAsync, Recipient, sealAsync, type OpenedCopy } from "./envelope.js";
import {
  AgentChanged, ApiError, EnvelopeError, IdentityChanged, ManifestUnverified, PlatformRefused, UnknownSender, WrongRecipient,
  type DenialReason,
} from "./errors.js";
import { frameParts, listen, type WebSocketConstructor } from "./events.js";
import { grantOptionsOf, refusalWords, TOLD_BY_THE_USER, type CompiledGrant, type GrantOptions } from "./grants.js";
import { KeyDirectory, agentKeysById } from "./keys.js";
import { LocalState } from "./localState.js";
import { HIGH_PROMPT_TIMEOUT_MS, SensitivityPolicy, type PolicySubject } from "./policy.js";
import { callApi, FetchTransport, sendMessage, type CredentialInput, type EventFrame, type Transport } from "./rest.js";
import type { Store } from "./store.js";
import { AGENT, KeyPins, publicIdentity, type VerifiedManifest } from "./trust.js";
import { RelationViews, viewNames, type RelationView } from "./views.js";
import { AGENT_TO_USER, checkedX25519, isDeviceId, publicKeyBytes, USER_TO_AGENT } from "./wire.js";

export const EXPIRY_SLACK_MS = 60_000;
export const MAX_FUTURE_SKEW_MS = 300_000;
export const MAX_TIMEOUT_MS = 300_000;
export const MAX_RESPONSE_BYTES = 190_000;
export const MAX_WAITING_PROMPTS = 5;
const CURSOR = "user-events";
const REFUSED = "refused";
const UNPINNED = "runtime_key_unpinned"; // the one refusal a device answers (docs/wire-spec.md §4, step 1)

export interface PromptRequest {
  readonly relationId: string;
  readonly agentId: string;
  readonly agentName: string;
  readonly callId: string;
  readonly toolName: string;
  readonly toolDescription: string;
  readonly scope: string;
  readonly sensitivity: string;
  readonly arguments: JsonObject;
  readonly manifestVersion: number | null;
  /** null: the agent has no identity key; the prompt says its publisher is unverified. */
  readonly safetyNumber: string | null;
  /** Granted since this device last looked: confirmed here once, whatever its level. */
  readonly newlyGranted: boolean;
  /** How the user limited the scope's grant (`{once, until, arguments}`; `{}`: always). */
  readonly grantOption: JsonObject;
}

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

export type PromptAnswer = "allow" | "deny" | boolean;
export interface CallContext {
  readonly relationId: string;
  readonly agentId: string;
  readonly callId: string;
  /** Aborted when `timeout_ms` passes: the answer is then `error: TOOL_PLATFORM_ERROR`. */
  readonly signal: AbortSignal;
}
export type ToolHandler = (args: JsonObject, call: CallContext) => Json | Promise<Json>;

export interface DeviceOptions {
  readonly url: string;
  readonly credential: CredentialInput;
  readonly deviceId: string;
  readonly store: Store;
  readonly tools?: Readonly<Record<string, ToolHandler>>;
  readonly prompt: (request: PromptRequest) => PromptAnswer | Promise<PromptAnswer>;
  readonly transport?: Transport;
  readonly clock?: () => number;
  readonly isGroup?: (relationId: string) => boolean;
  readonly promptTimeoutMs?: number;
  readonly webSocket?: WebSocketConstructor | null;
  /** Told what the device tells its user beside prompts (a call refused without asking them, a once
   * grant not withdrawn, a grant unused for long). */
  readonly onNotice?: (notice: DeviceNotice) => void;
}

/** Something the device tells its user that is not a prompt (sdk/hashee_sdk/client.py's Notice). */
export interface DeviceNotice {
  readonly kind: "once_not_withdrawn" | "unused_grant" | "call_refused";
  readonly relationId: string;
  readonly agentId: string;
  readonly scope: string;
  /** in words, English */
  readonly text: string;
  /** for `call_refused`: the refusal's reason (SPEC §6, wire-spec §4) */
  readonly reason?: string;
}

/** Why a verified call is dropped before the chain (wire-spec §4 step 2), if it is.
 * `replyKeyUsable`: whether its reply key is an X25519 key of large order (checked here when
 * not given; the device checks it on the platform's X25519 first, see {@link replyKeyUsable}). */
export function callRefusal(call: JsonObject, signedAtMs: number, nowMs: number,
  replyKeyUsable: boolean = replyKeyUsableSync(call)): "call_malformed" | "call_expired" | null {
  if (!wellFormed(call) || !replyKeyUsable) return "call_malformed";
  const expiresAt = call["expires_at"] as number;
  if (nowMs > expiresAt || signedAtMs > nowMs + MAX_FUTURE_SKEW_MS) return "call_expired";
  if (expiresAt > signedAtMs + (call["timeout_ms"] as number) + EXPIRY_SLACK_MS) return "call_expired";
  return null;
}

function wellFormed(call: JsonObject): boolean {
  const { call_id: callId, timeout_ms: timeoutMs } = call;
  if (call["subtype"] !== "tool_call" || typeof callId !== "string" || callId.length === 0 || callId.length > 128) return false;
  if (!Number.isSafeInteger(timeoutMs) || (timeoutMs as number) <= 0 || (timeoutMs as number) > MAX_TIMEOUT_MS) return false;
  if (!Number.isSafeInteger(call["expires_at"]) || !Number.isSafeInteger(call["manifest_version"])) return false;
  return typeof call["manifest_hash"] === "string" && isJsonObject(call["arguments"]);
}

function replyKeyUsableSync(call: JsonObject): boolean {
  try {
    checkedX25519(publicKeyBytes(call["reply_key"]));
    return true;
  } catch {
    return false;
  }
}

/** Whether a call's reply key is an X25519 key of large order, on the platform's X25519 where
 * it has one (noble's takes a millisecond: a tenth of the budget before the prompt). */
export async function replyKeyUsable(call: JsonObject): Promise<boolean> {
  let raw: Uint8Array;
  try {
    raw = publicKeyBytes(call["reply_key"]);
  } catch {
    return false;
  }
  return largeOrderX25519Async(raw);
}

/** The replay record found the call recorded already (by another process) once the write settled. */
class CallReplayed extends Error {}

/** Wait for the replay record to be durable; throws CallReplayed when the store had the call already. */
async function recorded(durable: Promise<string | null>): Promise<void> {
  if ((await durable) !== null) throw new CallReplayed();
}

const DENY_UNVERIFIED: Decision = { outcome: "denied", reason: "manifest_unverified" };

/** One device of one user (SPEC §12.3). */
/** Deliveries remembered for redelivery (socket and poll), the oldest forgotten first (as Python's). */
const MAX_DELIVERED = 4096;

/** One delivery of a message as the device saw it: relation, message id, payload digest. */
function deliveryKey(relationId: string, messageId: string, payload: unknown): string {
  let digest: string;
  try {
    digest = canonicalHash(payload);
  } catch {
    digest = `raw:${String(JSON.stringify(payload ?? null))}`;
  }
  return `${relationId}\n${messageId}\n${digest}`;
}

export class Device {
  readonly deviceId: string;
  readonly transport: Transport;
  readonly state: LocalState;
  readonly audit: AuditLog;
  readonly policy = new SensitivityPolicy();
  readonly sessionId = Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, "0")).join("");
  keys!: KeyPair;
  keydir!: KeyDirectory;
  views!: RelationViews;
  private readonly options: DeviceOptions;
  private readonly clock: () => number;
  private readonly cachedViews = new Map<string, RelationView>();
  private generation = 0;
  private readonly delivered = new Set<string>();
  private readonly waiting = new Map<string, number>();
  private promptQueue: Promise<unknown> = Promise.resolve();
  private ready: Promise<void> | null = null;
  private controller: AbortController | null = null;
  private listening: Promise<void> | null = null;
  private readonly reported = new Set<string>();
  /** `relation\nscope` of once grants used, to withdraw after the answer. */
  private readonly withdrawals = new Set<string>();

  constructor(options: DeviceOptions) {
    if (!isDeviceId(options.deviceId)) throw new Error("deviceId must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}");
    this.options = options;
    this.deviceId = options.deviceId;
    this.transport = options.transport ?? new FetchTransport(options.url, options.credential);
    this.state = new LocalState(options.store);
    this.audit = new AuditLog(options.store);
    this.clock = options.clock ?? Date.now;
  }

  /** Load (or make) this device's keys from the store. */
  init(): Promise<void> {
    this.ready ??= (async () => {
      this.keys = await this.state.keyPair();
      this.state.loadCalls().catch(() => undefined); // the replay record, read before the first call needs it
      void platformCrypto(); // which primitives the platform has (checked once), before the first call asks
      this.keydir = new KeyDirectory(this.transport, new KeyPins(this.state), AGENT, this.keys.public, this.clock);
      this.views = new RelationViews(this.keydir, this.clock);
    })();
    return this.ready;
  }

  /** Publish this device's keys (once per key pair), then listen and answer until {@link stop}. */
  async start(): Promise<void> {
    await this.init();
    await this.publishKeys();
    this.controller = new AbortController();
    const credential = this.transport instanceof FetchTransport ? this.transport.credential : null;
    if (credential === null) return; // a caller-made transport: frames come through handleFrame()
    this.listening = listen({
      baseUrl: this.options.url, path: "/ws/events", credential, transport: this.transport, signal: this.controller.signal,
      since: await this.state.cursor(CURSOR), onCursor: (last) => this.state.setCursor(CURSOR, last),
      onFrame: (frame) => this.dispatch(frame), ...(this.options.webSocket !== undefined ? { webSocket: this.options.webSocket } : {}),
    }).catch((error: unknown) => console.warn(`hashee device: listening ended: ${(error as Error).name}`));
  }

  async stop(): Promise<void> {
    this.controller?.abort();
    await this.listening;
    this.listening = null;
  }

  async publishKeys(): Promise<void> {
    const published = await this.state.store.get("published/device");
    if (published === this.keys.keyId) return;
    await this.keydir.registerDevice(this.deviceId, this.keys.public);
    await this.state.store.set("published/device", this.keys.keyId);
  }

  private async dispatch(frame: EventFrame): Promise<void> {
    const work = this.safely(frame);
    if (frame.type !== "message.new") await work; // a tool call runs beside the next frames
  }

  private async safely(frame: EventFrame): Promise<void> {
    try {
      await this.handleFrame(frame);
    } catch (error) {
      console.warn(`hashee device: event ${frame.id} not handled: ${(error as Error).name}`);
    }
  }

  // --- events ---------------------------------------------------------------------

  /** Act on one event frame; returns the tool_response sent, if any. */
  async handleFrame(frame: EventFrame): Promise<JsonObject | null> {
    await this.init();
    const [type, data] = frameParts(frame); // a frame of another shape is read as an empty one, never thrown on
    switch (type) {
      case "message.new":
        return this.handleMessage(String(data.relation_id), data.message ?? {});
      case "h2a.relation_created": case "h2a.relation_updated": case "h2a.relation_revoked": {
        const relation = data.relation ?? {};
        await this.observeRelation(type, relation);
        this.invalidate(String(relation.relation_id));
        if (type !== "h2a.relation_created") this.policy.forget(String(relation.agent_id));
        break;
      }
      case "h2a.reauth_required": case "agent.manifest_updated":
        this.invalidate(...[...this.cachedViews].filter(([, v]) => v.agentId === String(data.agent_id)).map(([k]) => k));
        if (type === "h2a.reauth_required") this.policy.forget(String(data.agent_id));
        break;
      case "keys.device_revoked": case "keys.device_approved": case "keys.device_published": case "keys.device_reset":
      case "keys.agent_key_published": case "keys.agent_key_revoked": case "agent.identity_changed":
        this.keydir.forget();
        this.invalidate(...this.cachedViews.keys());
        break;
      case "resync_required":
        this.invalidate(...this.cachedViews.keys());
        this.keydir.forget();
        break;
    }
    return null;
  }

  /** A revocation is remembered; a statement the event carries is verified and kept if newest. */
  private async observeRelation(kind: string, relation: any): Promise<void> {
    const relationId = String(relation.relation_id);
    if (kind === "h2a.relation_revoked") await this.state.tombstoneRelation(relationId);
    if (relation.consent_statement === null || relation.consent_statement === undefined) return;
    try {
      const believed = await this.views.believe(relationId, String(relation.agent_id), relation);
      if (believed.problem) await this.reportConsent(relationId, String(relation.agent_id), believed.problem);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
    }
  }

  private invalidate(...relationIds: string[]): void {
    this.generation++;
    for (const id of relationIds) this.cachedViews.delete(id);
  }

  /** The verified view of a relation, cached; a fetch overtaken by an invalidating event is used but not cached. */
  async relation(relationId: string, refresh = false): Promise<RelationView> {
    await this.init();
    let view = this.cachedViews.get(relationId);
    if (view === undefined || refresh) {
      const generation = this.generation;
      view = await this.views.fetch(this.transport, relationId);
      if (view.consentProblem) await this.reportConsent(relationId, view.agentId, view.consentProblem);
      await this.noteGrants(view);
      if (generation === this.generation) this.cachedViews.set(relationId, view);
    }
    return view;
  }

  private async reportConsent(relationId: string, agentId: string, problem: string): Promise<void> {
    if (this.reported.has(`${relationId} ${problem}`)) return;
    this.reported.add(`${relationId} ${problem}`);
    await this.audit.record({ call_id: `consent:${relationId}`.slice(0, 160), agent_id: agentId, tool_name: "", scope: "",
      arguments: null, status: REFUSED, reason: "consent_unverified", nowMs: this.clock() });
  }

  // --- one tool call ----------------------------------------------------------------

  /** Verify, answer and reply to one tool-call message; null if it is dropped. */
  async handleMessage(relationId: string, message: any): Promise<JsonObject | null> {
    await this.init();
    if (message?.msg_subtype !== "artifact_tool_call" || message?.sender !== "agent") return null;
    const messageId = String(message.message_id ?? "");
    // A redelivery (socket and poll) is the same relation, message id and payload again; a copy
    // that differs in any of them (a server's lie under the true call's id, an older call's
    // envelope) is another message, so it cannot make the true call look delivered.
    const delivery = deliveryKey(relationId, messageId, message.payload);
    if (messageId && this.delivered.has(delivery)) return null; // delivered twice (socket and poll)
    if (messageId) {
      this.delivered.add(delivery);
      if (this.delivered.size > MAX_DELIVERED) this.delivered.delete(this.delivered.values().next().value as string);
    }
    const opened = await this.open(relationId, message); // 1. the envelope
    if (opened === null) return null;
    const call = opened.artifact;
    const replyKeyOk = await replyKeyUsable(call);
    const nowMs = this.clock();
    let refusal: string | null = callRefusal(call, opened.signedAtMs, nowMs, replyKeyOk); // 2. expiry
    // 3. the replay record: decided now, in memory (a replay arriving meanwhile is refused);
    // its durable write goes on beside the chain and the prompt, and nothing runs or is
    // answered before it is done (answer() waits for it).
    const claim = refusal === null ? await this.state.claimCall({ relationId, callId: String(call["call_id"]), messageId,
      expiresAtMs: call["expires_at"] as number, nowMs }) : null;
    if (claim?.replayOf != null) refusal = "call_replayed";
    if (refusal !== null || claim === null) {
      await this.refuse(relationId, message, refusal ?? "call_malformed", call);
      return null;
    }
    try {
      let view = await this.relation(relationId);
      if (!viewNames(view, call)) view = await this.relation(relationId, true); // perhaps a version published since
      const response = await this.answer(view, call, call["expires_at"] as number, claim.durable);
      await this.reply(relationId, call, response);
      await this.withdrawUsedOnce(relationId);
      return response;
    } catch (error) {
      if (!(error instanceof CallReplayed)) throw error;
      await claim.durable.catch(() => undefined);
      await this.refuse(relationId, message, "call_replayed", call);
      return null;
    }
  }

  private async open(relationId: string, message: any): Promise<OpenedCopy | null> {
    let agentId = "";
    let reason: string;
    try {
      for (const refresh of [false, true]) {
        const keys = await this.keydir.relation(relationId, refresh);
        agentId = keys.agentId;
        try {
          return await openCopyAsync(message.payload, { recipientKeyId: this.keys.keyId, recipientX25519: this.keys.boxKey,
            senders: agentKeysById(keys), relationId, direction: AGENT_TO_USER });
        } catch (error) {
          if (!(error instanceof UnknownSender) || refresh) throw error;
        }
      }
      return null;
    } catch (error) {
      if (error instanceof WrongRecipient) return null; // for another device
      if (error instanceof UnknownSender) { // a second runtime of the agent is told at once, not left to time out
        const sender = await this.keydir.unpinnedRuntimeKey(relationId, String(message?.payload?.sender_key_id));
        if (sender !== null) return this.refuseUnpinned(relationId, message, sender, agentId);
      }
      if (error instanceof AgentChanged) reason = "agent_changed";
      else if (error instanceof IdentityChanged) reason = "identity_changed";
      else if (error instanceof UnknownSender) reason = "untrusted_sender";
      else if (error instanceof ManifestUnverified) reason = "answer_invalid"; // AnswerInvalid: a listing (or identity) of another shape
      else if (error instanceof EnvelopeError) reason = "envelope_invalid";
      else throw error;
    }
    await this.refuse(relationId, message, reason, null, agentId);
    return null;
  }

  /** A call from a runtime key of the agent that this device did not pin (docs/wire-spec.md §4, step 1): nothing is
   * prompted or run; audited, and — when it opens with that key, is fresh and was not seen before — answered
   * `denied: runtime_key_unpinned`, a denial only, readable only with the call's reply key. */
  private async refuseUnpinned(relationId: string, message: any, sender: PublicKeys, agentId: string): Promise<null> {
    let opened: OpenedCopy;
    try {
      opened = openCopy(message.payload, { recipientKeyId: this.keys.keyId, recipientX25519: this.keys.boxKey,
        senders: new Map([[sender.keyId, sender]]), relationId, direction: AGENT_TO_USER });
    } catch (error) {
      if (!(error instanceof EnvelopeError)) throw error;
      await this.refuse(relationId, message, "envelope_invalid", null, agentId);
      return null;
    }
    const call = opened.artifact;
    const nowMs = this.clock();
    const refusal = callRefusal(call, opened.signedAtMs, nowMs)
      ?? ((await this.state.rememberCall({ relationId, callId: String(call["call_id"]), messageId: String(message.message_id ?? ""),
        expiresAtMs: call["expires_at"] as number, nowMs })) === null ? null : "call_replayed");
    await this.refuse(relationId, message, refusal ?? UNPINNED, call, agentId);
    if (refusal === null) {
      await this.reply(relationId, call, { subtype: "tool_response", call_id: call["call_id"] as string, status: "denied", reason: UNPINNED });
    }
    return null;
  }

  private async refuse(relationId: string, message: any, reason: string, call: JsonObject | null, agentId = ""): Promise<void> {
    const callId = typeof call?.["call_id"] === "string" ? call["call_id"] : `message:${message?.message_id ?? ""}`;
    console.warn(`hashee device: tool call in relation ${relationId} refused before any prompt: ${reason}`);
    await this.audit.record({ call_id: callId.slice(0, 160), agent_id: this.cachedViews.get(relationId)?.agentId ?? agentId,
      tool_name: String(call?.["tool_name"] ?? "").slice(0, 64), scope: "", arguments: call?.["arguments"] ?? null,
      status: REFUSED, reason, nowMs: this.clock() });
    this.tellRefusal(relationId, this.cachedViews.get(relationId) ?? null, call ?? {}, reason, agentId);
  }

  /** Tell the user of a call refused without asking them (`call_refused`): every one, as it
   * happens — a paused permission, a withdrawn grant, a lie of the server's. */
  private tellRefusal(relationId: string, view: RelationView | null, call: JsonObject, reason: string, agentId = ""): void {
    if (TOLD_BY_THE_USER.has(reason) || this.options.onNotice === undefined) return;
    const name = typeof call["tool_name"] === "string" ? call["tool_name"].slice(0, 64) : "";
    const scope = view?.manifest.tools.get(name)?.scope ?? "";
    const agent = view?.agentId ?? agentId;
    const text = refusalWords(view?.agentName || `agent ${agent}`, name, scope, reason);
    try {
      this.options.onNotice({ kind: "call_refused", relationId, agentId: agent, scope, text, reason });
    } catch (error) {
      console.warn(`hashee device: onNotice failed: ${(error as Error).name}`); // a broken callback never stops the device
    }
  }

  private async reply(relationId: string, call: JsonObject, response: JsonObject): Promise<void> {
    const sealed = await sealAsync(response, { sender: this.keys, recipients: [Recipient.reply(b64decode(call["reply_key"]))], relationId,
      direction: USER_TO_AGENT, nowMs: this.clock() });
    try {
      await sendMessage(this.transport, relationId, "artifact_response", sealed as unknown as JsonObject);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      console.warn(`hashee device: tool_response not delivered: ${error.code}`);
    }
  }

  /** Steps 4–7 for a verified call: the tool_response to send (audited). `durable`: the replay
   * record's write ({@link LocalState.claimCall}); no tool runs and nothing is audited as
   * answered before it settles (CallReplayed when the store had the call already). */
  async answer(view: RelationView, call: JsonObject, deadlineMs: number | null = null,
    durable: Promise<string | null> = Promise.resolve(null)): Promise<JsonObject> {
    const subject: PolicySubject = { deviceId: this.deviceId, sessionId: this.sessionId, agentId: view.agentId };
    const decision = viewNames(view, call) ? await this.decide(view, call, subject) : DENY_UNVERIFIED;
    const response = await this.respond(view, call, decision, subject, deadlineMs, durable);
    const tool = typeof call["tool_name"] === "string" ? view.manifest.tools.get(call["tool_name"]) : undefined;
    const claimed = typeof call["permission_scope"] === "string" ? call["permission_scope"] : "";
    await this.audit.record({ call_id: String(call["call_id"]), agent_id: view.agentId, tool_name: String(call["tool_name"]).slice(0, 64),
      scope: (tool?.scope ?? claimed).slice(0, 64), arguments: call["arguments"], status: String(response["status"]),
      reason: typeof response["reason"] === "string" ? response["reason"] : null, nowMs: this.clock() });
    if (response["status"] === "denied") this.tellRefusal(view.relationId, view, call, String(response["reason"]));
    return response;
  }

  private async decide(view: RelationView, call: JsonObject, subject: PolicySubject): Promise<Decision> {
    const onceUsed = await this.spent(view);
    return decide(call, { manifest: view.manifest, granted: view.granted, inGroup: this.options.isGroup?.(view.relationId) ?? false,
      policy: this.policy, subject, nowMs: this.clock(), revoked: view.revoked, pending: view.pending, unconfirmed: view.unconfirmed,
      unbacked: view.unbacked, consentRevoked: view.consentRevoked, grants: view.grants, onceUsed });
  }

  private async respond(view: RelationView, call: JsonObject, decision: Decision, subject: PolicySubject,
    deadlineMs: number | null, durable: Promise<string | null>): Promise<JsonObject> {
    const callId = String(call["call_id"]);
    if (decision.outcome !== "prompt") await recorded(durable);
    else {
      const verdict = await this.consent(view, call, decision.tool, subject, deadlineMs); // shown while the record is written
      await recorded(durable);
      if (verdict !== "approved") return responseDenied(callId, verdict);
      if (view.unconfirmed.has(decision.tool.scope)) { // confirmed on this device: asked once
        await this.state.confirmGrants(view.relationId, [decision.tool.scope]);
        this.invalidate(view.relationId);
      }
      [decision, view] = await this.afterPrompt(view, call, subject, decision.tool);
    }
    if (decision.outcome === "denied") return responseDenied(callId, decision.reason, decision.details);
    if (decision.outcome === "error") return responseError(callId, decision.reason, decision.details);
    const scope = decision.tool.scope;
    if (view.grants.get(scope)?.once && !(await this.takeOnce(view, scope))) return responseDenied(callId, "scope_not_granted");
    this.policy.recordUse(subject, scope, decision.tool.sensitivity, this.clock());
    await this.state.recordGrantUse(view.relationId, scope, this.clock());
    return this.execute(view, callId, decision.tool, call["arguments"] as JsonObject);
  }

  /** Take a `once` grant, durably, before the call runs: a second call (another process's
   * too) finds it used. The scope is then withdrawn with a signed PATCH, after the answer. */
  private async takeOnce(view: RelationView, scope: string): Promise<boolean> {
    if (!(await this.state.useOnce(view.relationId, scope, view.consentSeq))) return false;
    this.withdrawals.add(`${view.relationId}\n${scope}`);
    return true;
  }

  /** The chain again if the relation changed while the user was asked. */
  private async afterPrompt(view: RelationView, call: JsonObject, subject: PolicySubject, tool: CompiledTool):
  Promise<[Decision, RelationView]> {
    const fresh = await this.relation(view.relationId);
    if (fresh === view) return [{ outcome: "run", tool }, view];
    if (!viewNames(fresh, call)) return [DENY_UNVERIFIED, fresh];
    const decision = await this.decide(fresh, call, subject);
    return [decision.outcome === "prompt" ? { outcome: "run", tool: decision.tool } : decision, fresh];
  }

  private async consent(view: RelationView, call: JsonObject, tool: CompiledTool, subject: PolicySubject,
    deadlineMs: number | null): Promise<"approved" | DenialReason> {
    const waiting = this.waiting.get(view.agentId) ?? 0;
    if (waiting >= MAX_WAITING_PROMPTS) return "user_timeout"; // an agent flooding the user
    this.waiting.set(view.agentId, waiting + 1);
    const turn = this.promptQueue.then(async (): Promise<"approved" | DenialReason> => { // one prompt at a time
      const newlyGranted = view.unconfirmed.has(tool.scope);
      if (!newlyGranted && this.policy.isSilent(subject, tool.scope, tool.sensitivity, this.clock())) return "approved";
      const request: PromptRequest = { relationId: view.relationId, agentId: view.agentId, agentName: view.agentName,
        callId: String(call["call_id"]), toolName: tool.name, toolDescription: tool.description, scope: tool.scope,
        sensitivity: tool.sensitivity, arguments: call["arguments"] as JsonObject, manifestVersion: view.manifestVersion,
        safetyNumber: view.safetyNumber, newlyGranted, grantOption: optionOf(view, tool.scope) };
      const limit = Math.min(this.options.promptTimeoutMs ?? HIGH_PROMPT_TIMEOUT_MS, deadlineMs === null ? Infinity : deadlineMs - this.clock());
      return this.ask(request, limit);
    });
    this.promptQueue = turn.catch(() => undefined);
    try {
      return await turn;
    } finally {
      this.waiting.set(view.agentId, (this.waiting.get(view.agentId) ?? 1) - 1);
    }
  }

  private async ask(request: PromptRequest, limitMs: number): Promise<"approved" | DenialReason> {
    if (limitMs <= 0) return "user_timeout";
    try {
      const answer = await withDeadline(Promise.resolve(this.options.prompt(request)), limitMs);
      return answer === true || answer === "allow" ? "approved" : "user_refused";
    } catch (error) {
      return error instanceof DeadlinePassed ? "user_timeout" : "user_refused"; // a broken prompt never approves
    }
  }

  private async execute(view: RelationView, callId: string, tool: CompiledTool, args: JsonObject): Promise<JsonObject> {
    const handler = this.options.tools?.[tool.name];
    if (handler === undefined) return responseError(callId, "TOOL_UNAVAILABLE");
    const controller = new AbortController();
    let result: Json;
    try {
      result = await withDeadline(Promise.resolve(handler(args, { relationId: view.relationId, agentId: view.agentId, callId,
        signal: controller.signal })), tool.timeoutMs, () => controller.abort());
      if (canonicalize(responseOk(callId, result)).length > MAX_RESPONSE_BYTES) return responseError(callId, "TOOL_PLATFORM_ERROR");
    } catch (error) {
      if (error instanceof PlatformRefused) return responseDenied(callId, "user_refused"); // SPEC §12.1
      return responseError(callId, "TOOL_PLATFORM_ERROR"); // a failure, an overrun, or a result that is not JSON
    }
    if (tool.output !== null && !tool.output.isValid(result)) return responseError(callId, "TOOL_PLATFORM_ERROR");
    return responseOk(callId, result);
  }

  // --- consent signed on this device (SPEC §9.6) ------------------------------------

  /** Connect to an agent with a consent statement signed here for its current verified manifest;
   * `grantOptions` (SPEC §5.2 v1.2: once, until, arguments per scope) are signed with it. */
  async grant(agentId: string, scopes: Iterable<string>, options: { userId?: string; grantOptions?: GrantOptions | JsonObject } = {}): Promise<any> {
    await this.init();
    const granted = [...new Set(scopes)].sort();
    const agent = await callApi(this.transport, "GET", `/agents/${agentId}`);
    const served = await this.keydir.servedIdentity(agentId);
    const current = this.views.current(agentId, agent, publicIdentity(served));
    const userId = options.userId ?? (await this.userId());
    const grantOptions = grantOptionsOf(options.grantOptions, granted);
    const signed = await this.sign(agentId, userId, granted, current, false, grantOptions);
    const relation = await callApi(this.transport, "POST", "/h2a/relations", { json: { agent_id: agentId, granted_scopes: granted,
      ...optionsField(grantOptions), consent_statement: signed } });
    const relationId = String(relation.relation_id);
    await this.keydir.pins.identity(relationId, agentId, served); // what the user consented under
    await this.signed(relationId, signed);
    return relation;
  }

  /** Change the grants, or consent again to the current verified manifest, signed here. A
   * `once` grant this device used and could not withdraw yet is left out. */
  async reconsent(relationId: string, scopes: Iterable<string>, options: { grantOptions?: GrantOptions | JsonObject } = {}): Promise<any> {
    await this.init();
    const used = await this.usedOnce(relationId);
    const granted = [...new Set(scopes)].filter((s) => !used.has(s)).sort();
    const [relation, current] = await this.verifiedCurrent(relationId);
    const grantOptions = grantOptionsOf(options.grantOptions, granted);
    const signed = await this.sign(String(relation.agent_id), String(relation.user), granted, current, false, grantOptions);
    const updated = await callApi(this.transport, "PATCH", `/h2a/relations/${relationId}`, { json: { granted_scopes: granted,
      ...optionsField(grantOptions), acknowledged_manifest_version: current.version, acknowledged_manifest_hash: current.hash,
      consent_statement: signed } });
    await this.signed(relationId, signed);
    return updated;
  }

  /** Withdraw one scope with a signed PATCH that keeps everything else the user consented to
   * (the version they acknowledged, the other grants and their options); throws ApiError. */
  async withdraw(relationId: string, scope: string): Promise<any> {
    await this.init();
    return this.withdrawSigned(relationId, new Set([scope]));
  }

  private async withdrawSigned(relationId: string, scopes: ReadonlySet<string>): Promise<any> {
    const view = await this.relation(relationId, true);
    if (view.consented === null) throw new ManifestUnverified(`relation ${relationId}: ${view.unverified}`);
    const relation = await callApi(this.transport, "GET", `/h2a/relations/${relationId}`);
    const newest = await this.views.consents.newest(relationId);
    const used = await this.usedOnce(relationId);
    const nowMs = this.clock();
    const before = newest !== null ? ((newest["granted_scopes"] as string[]) ?? []) : [...view.granted];
    const granted = before.filter((s) => !scopes.has(s) && !used.has(s) && !expired(view.grants.get(s), nowMs)).sort();
    const grantOptions = grantOptionsOf(view.grantOptions, granted);
    const signed = await this.sign(view.agentId, String(relation.user), granted, view.consented, false, grantOptions);
    const updated = await callApi(this.transport, "PATCH", `/h2a/relations/${relationId}`, { json: { granted_scopes: granted,
      ...optionsField(grantOptions), acknowledged_manifest_version: view.consented.version,
      acknowledged_manifest_hash: view.consented.hash, consent_statement: signed } });
    await this.signed(relationId, signed);
    return updated;
  }

  /** Withdraw the once grants used in `relationId`; when that fails (offline, a new version out)
   * they stay refused here, are left out of the next consent signed here, and the user is told. */
  private async withdrawUsedOnce(relationId: string): Promise<void> {
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
        this.notice("once_not_withdrawn", relationId, this.cachedViews.get(relationId)?.agentId ?? "", scope, `${scope} was granted `
          + `only this time and has been used: this device refuses it from now on, but the server did not take its withdrawal `
          + `(${code}). Your next consent leaves it out.`);
        await this.audit.record({ call_id: `withdraw:${relationId}`.slice(0, 160), agent_id: this.cachedViews.get(relationId)?.agentId ?? "",
          tool_name: "", scope, arguments: null, status: WITHDRAW_FAILED, reason: code, nowMs: this.clock() });
      }
    }
  }

  /** The user keeps a grant reported unused: the 90 days start again from now. */
  async keepGrant(relationId: string, scope: string): Promise<void> {
    await this.init();
    await this.state.recordGrantUse(relationId, scope, this.clock());
  }

  /** The once grants used here under the newest statement (or the unsigned consent): not
   * withdrawn by a statement signed since. */
  private async usedOnce(relationId: string): Promise<Set<string>> {
    const seq = Number((await this.views.consents.newest(relationId))?.["seq"] ?? 0);
    return new Set([...await this.state.onceUsed(relationId)].filter(([, used]) => used >= seq).map(([scope]) => scope));
  }

  /** The scopes whose once grant is spent: used under the consent in force, or under an
   * earlier one and not granted again since. Refused whatever the server says. */
  private async spent(view: RelationView): Promise<Set<string>> {
    const given = view.signedScopes ?? view.granted;
    return new Set([...await this.state.onceUsed(view.relationId)]
      .filter(([scope, used]) => used >= view.consentSeq || !given.has(scope)).map(([scope]) => scope));
  }

  /** When each grant was first seen (the 90-day notice counts from it when it is never used). */
  private async noteGrants(view: RelationView): Promise<void> {
    if (view.manifestVersion === null) return;
    await this.state.noteGrants(view.relationId, view.signedScopes ?? view.granted, view.consentTs ?? this.clock());
    if (view.signedScopes === null) {
      const used = await this.state.onceUsed(view.relationId);
      await this.state.forgetUnsignedOnce(view.relationId, [...used.keys()].filter((s) => !view.granted.has(s)));
    }
  }

  private notice(kind: DeviceNotice["kind"], relationId: string, agentId: string, scope: string, text: string): void {
    const key = `${relationId} ${kind}:${scope}`;
    if (this.reported.has(key)) return;
    this.reported.add(key);
    console.warn(`hashee device: notice to the user: ${text}`);
    try {
      this.options.onNotice?.({ kind, relationId, agentId, scope, text });
    } catch (error) {
      console.warn(`hashee device: onNotice failed: ${(error as Error).name}`); // a broken callback never stops the device
    }
  }

  /** The granted scopes of high sensitivity this device has not used for `days` (90): neither
   * answered a call of since, nor seen granted first since — offered to the user to withdraw. */
  async unusedGrants(options: { days?: number; now?: number } = {}): Promise<UnusedGrant[]> {
    await this.init();
    const nowMs = options.now ?? this.clock();
    const limitMs = (options.days ?? UNUSED_GRANT_DAYS) * DAY_MS;
    const page = await callApi(this.transport, "GET", "/h2a/relations?page_size=100");
    const found: UnusedGrant[] = [];
    for (const relation of Array.isArray(page?.results) ? page.results : []) {
      if (relation?.status === "revoked" || typeof relation?.relation_id !== "string") continue;
      const view = await this.relation(relation.relation_id, true);
      for (const scope of [...view.granted].sort()) {
        if (view.unbacked.has(scope) || view.pending.has(scope) || !highScope(view, scope)) continue;
        const since = await this.state.grantUsedAt(view.relationId, scope); // noted when the view was read
        if (since !== null && nowMs - since >= limitMs) {
          found.push({ relationId: view.relationId, agentId: view.agentId, agentName: view.agentName, scope, since });
        }
      }
    }
    for (const unused of found) {
      const days = Math.floor((nowMs - unused.since) / DAY_MS);
      this.notice("unused_grant", unused.relationId, unused.agentId, unused.scope, `${unused.agentName || `agent ${unused.agentId}`} `
        + `has not used ${unused.scope} for ${days} days. You can withdraw it: it is asked again if the agent needs it later.`);
    }
    return found;
  }

  /** Revoke with a signed revocation: revoked for this device at once, whatever the server says later. */
  async revoke(relationId: string): Promise<any> {
    await this.init();
    await this.state.tombstoneRelation(relationId);
    this.invalidate(relationId);
    const [relation, current] = await this.verifiedCurrent(relationId);
    const signed = await this.sign(String(relation.agent_id), String(relation.user), [], current, true);
    const revoked = await callApi(this.transport, "DELETE", `/h2a/relations/${relationId}`, { json: { consent_statement: signed } });
    await this.signed(relationId, signed);
    return revoked;
  }

  /** Trust the agent's new identity — the one whose safety number (or kid) the user compared. */
  async acceptIdentity(relationId: string, compared: { safetyNumber?: string; kid?: string }): Promise<string> {
    await this.init();
    const number = await this.views.acceptIdentity(this.transport, relationId, compared);
    this.invalidate(relationId);
    return number;
  }

  async pendingSafetyNumber(relationId: string): Promise<string | null> {
    await this.init();
    return this.views.pendingSafetyNumber(this.transport, relationId);
  }

  private async verifiedCurrent(relationId: string): Promise<[any, VerifiedManifest]> {
    const relation = await callApi(this.transport, "GET", `/h2a/relations/${relationId}`);
    const agentId = String(relation.agent_id);
    const agent = await callApi(this.transport, "GET", `/agents/${agentId}`);
    return [relation, this.views.current(agentId, agent, await this.keydir.identity(relationId, agentId))];
  }

  private async userId(): Promise<string> {
    const page = await callApi(this.transport, "GET", "/h2a/relations");
    const users = new Set((page?.results ?? []).map((r: any) => r?.user));
    const [only] = users;
    if (users.size !== 1 || typeof only !== "string") throw new Error("the user's id is not known from their relations: pass userId");
    return only;
  }

  private async sign(agentId: string, userId: string, granted: string[], current: { version: number; hash: string },
    revoked = false, grantOptions: JsonObject = {}): Promise<SignedConsent> {
    const nowMs = this.clock();
    return signConsent(this.keys, { agentId, userId, grantedScopes: granted, acknowledgedManifestVersion: current.version,
      acknowledgedManifestHash: current.hash, seq: await this.views.consents.nextSeq(agentId, userId, nowMs), ts: nowMs, revoked,
      grantOptions });
  }

  /** The server accepted a statement signed here: it is the newest verified one. */
  private async signed(relationId: string, signed: SignedConsent): Promise<void> {
    await this.views.consents.remember(relationId, signed as unknown as { statement: JsonObject; signature: string });
    if (signed.statement.revoked) await this.state.tombstoneRelation(relationId);
    else await this.state.confirmGrants(relationId, signed.statement.granted_scopes);
    this.invalidate(relationId);
    this.policy.forget(signed.statement.agent_id);
  }
}

/** The request's `grant_options` member: absent when there are none (a server of before v1.2 reads the same). */
function optionsField(grantOptions: JsonObject): { grant_options?: JsonObject } {
  return Object.keys(grantOptions).length > 0 ? { grant_options: grantOptions } : {};
}

function optionOf(view: RelationView, scope: string): JsonObject {
  const option = view.grantOptions[scope];
  return isJsonObject(option) ? option : {};
}

function expired(grant: CompiledGrant | undefined, nowMs: number): boolean {
  return grant?.untilMs != null && nowMs >= grant.untilMs;
}

function highScope(view: RelationView, scope: string): boolean {
  return [...view.manifest.tools.values()].some((tool) => tool.scope === scope && tool.sensitivity === "high");
}

class DeadlinePassed extends Error {}

/** `work`'s value, or DeadlinePassed after `ms` (then `onTimeout` runs). */
export function withDeadline<T>(work: Promise<T>, ms: number, onTimeout?: () => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      onTimeout?.();
      reject(new DeadlinePassed());
    }, Math.max(0, Math.min(ms, 2 ** 31 - 1)));
    work.then((value) => {
      clearTimeout(timer);
      resolve(value);
    }, (error: unknown) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}
