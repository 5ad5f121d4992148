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
import { callRefusal, replyKeyUsable, withDeadline } from "./callChecks.js";
import { canonicalHash, canonicalize, isJsonObject, type Json, type JsonObject } from "./canonical.js";
import { decide, responseDenied, responseError, responseOk, type CompiledTool, type Decision } from "./contract.js";
import { platformCrypto, type KeyPair, type PublicKeys } from "./crypto.js";
import { b64decode } from "./encoding.js";
import { openCopy, openCopyAsync, Recipient, sealAsync, type OpenedCopy } from "./envelope.js";
import {
  AgentChanged, ApiError, EnvelopeError, IdentityChanged, ManifestUnverified, PlatformRefused, UnknownSender, WrongRecipient,
  type DenialReason,
} from "./errors.js";
import { DeviceConsent, type ConsentNoticeKind, type UnusedGrant } from "./deviceConsent.js";
import { frameParts, listen, type WebSocketConstructor } from "./events.js";
import { refusalWords, TOLD_BY_THE_USER, type GrantOptions } from "./grants.js";
import { KeyDirectory, agentKeysById } from "./keys.js";
import { LocalState } from "./localState.js";
import { HIGH_PROMPT_TIMEOUT_MS, SensitivityPolicy, type PolicySubject } from "./policy.js";
import { Prompts, type PromptAnswer, type PromptRequest } from "./prompts.js";
import { FetchTransport, sendMessage, type CredentialInput, type EventFrame, type Transport } from "./rest.js";
import type { Store } from "./store.js";
import { AGENT, KeyPins } from "./trust.js";
import { RelationViews, viewNames, type RelationView } from "./views.js";
import { AGENT_TO_USER, isDeviceId, USER_TO_AGENT } from "./wire.js";

export const MAX_RESPONSE_BYTES = 190_000;
const CURSOR = "user-events";
const REFUSED = "refused";
const UNPINNED = "runtime_key_unpinned"; // the one refusal a device answers (docs/wire-spec.md §4, step 1)

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
  readonly kind: ConsentNoticeKind | "call_refused";
  readonly relationId: string;
  readonly agentId: string;
  readonly scope: string;
  /** in words, English */
  readonly text: string;
  /** for `call_refused`: the refusal's reason (SPEC §6, wire-spec §4) */
  readonly reason?: string;
}

/** The replay record found the call recorded already (by another process) once the write settled. */
class CallReplayed extends Error {}

/** Wait for the replay record to be durable; throws CallReplayed when the store had the call already. */
async function recorded(durable: Promise<string | null>): Promise<void> {
  if ((await durable) !== null) throw new CallReplayed();
}

const DENY_UNVERIFIED: Decision = { outcome: "denied", reason: "manifest_unverified" };

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

/** One device of one user (SPEC §12.3). */
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
  private readonly prompts: Prompts;
  private ready: Promise<void> | null = null;
  private controller: AbortController | null = null;
  private listening: Promise<void> | null = null;
  private readonly reported = new Set<string>();
  private readonly consentHalf: DeviceConsent;

  constructor(options: DeviceOptions) {
    if (!isDeviceId(options.deviceId)) throw new Error("deviceId must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}");
    this.options = options;
    this.deviceId = options.deviceId;
    this.transport = options.transport ?? new FetchTransport(options.url, options.credential);
    this.state = new LocalState(options.store);
    this.audit = new AuditLog(options.store);
    this.clock = options.clock ?? Date.now;
    this.prompts = new Prompts(options.prompt);
    this.consentHalf = new DeviceConsent({ transport: this.transport, state: this.state, audit: this.audit, policy: this.policy,
      keys: () => this.keys, keydir: () => this.keydir, views: () => this.views, clock: () => this.clock(),
      relation: (relationId, refresh) => this.relation(relationId, refresh), invalidate: (...ids) => this.invalidate(...ids),
      agentOf: (relationId) => this.cachedViews.get(relationId)?.agentId ?? "",
      notice: (kind, relationId, agentId, scope, text) => this.notice(kind, relationId, agentId, scope, text) });
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
      await this.consentHalf.noteGrants(view);
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
      await this.consentHalf.withdrawUsedOnce(relationId);
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
    const onceUsed = await this.consentHalf.spent(view);
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
    if (view.grants.get(scope)?.once && !(await this.consentHalf.takeOnce(view, scope))) return responseDenied(callId, "scope_not_granted");
    this.policy.recordUse(subject, scope, decision.tool.sensitivity, this.clock());
    await this.state.recordGrantUse(view.relationId, scope, this.clock());
    return this.execute(view, callId, decision.tool, call["arguments"] as JsonObject);
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

  /** The user's answer, in the prompts' turn: approved without asking when the policy is silent for it. */
  private consent(view: RelationView, call: JsonObject, tool: CompiledTool, subject: PolicySubject,
    deadlineMs: number | null): Promise<"approved" | DenialReason> {
    return this.prompts.ask(view.agentId, () => {
      const newlyGranted = view.unconfirmed.has(tool.scope);
      if (!newlyGranted && this.policy.isSilent(subject, tool.scope, tool.sensitivity, this.clock())) return null;
      const request: PromptRequest = { relationId: view.relationId, agentId: view.agentId, agentName: view.agentName,
        callId: String(call["call_id"]), toolName: tool.name, toolDescription: tool.description, scope: tool.scope,
        sensitivity: tool.sensitivity, arguments: call["arguments"] as JsonObject, manifestVersion: view.manifestVersion,
        safetyNumber: view.safetyNumber, newlyGranted, grantOption: optionOf(view, tool.scope) };
      const limitMs = Math.min(this.options.promptTimeoutMs ?? HIGH_PROMPT_TIMEOUT_MS, deadlineMs === null ? Infinity : deadlineMs - this.clock());
      return { request, limitMs };
    });
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

  // --- consent signed on this device (SPEC §9.6): deviceConsent.ts ---------------------

  /** Connect to an agent with a consent statement signed here for its current verified manifest;
   * `grantOptions` (SPEC §5.2 v1.2: once, until, arguments per scope) are signed with it. */
  async grant(agentId: string, scopes: Iterable<string>, options: { userId?: string; grantOptions?: GrantOptions | JsonObject } = {}): Promise<any> {
    await this.init();
    return this.consentHalf.grant(agentId, scopes, options);
  }

  /** Change the grants, or consent again to the current verified manifest, signed here. A
   * `once` grant this device used and could not withdraw yet is left out. */
  async reconsent(relationId: string, scopes: Iterable<string>, options: { grantOptions?: GrantOptions | JsonObject } = {}): Promise<any> {
    await this.init();
    return this.consentHalf.reconsent(relationId, scopes, options);
  }

  /** Withdraw one scope with a signed PATCH that keeps everything else the user consented to
   * (the version they acknowledged, the other grants and their options); throws ApiError. */
  async withdraw(relationId: string, scope: string): Promise<any> {
    await this.init();
    return this.consentHalf.withdraw(relationId, scope);
  }

  /** Revoke with a signed revocation: revoked for this device at once, whatever the server says later. */
  async revoke(relationId: string): Promise<any> {
    await this.init();
    return this.consentHalf.revoke(relationId);
  }

  /** The granted scopes of high sensitivity this device has not used for `days` (90): neither
   * answered a call of since, nor seen granted first since — offered to the user to withdraw. */
  async unusedGrants(options: { days?: number; now?: number } = {}): Promise<UnusedGrant[]> {
    await this.init();
    return this.consentHalf.unusedGrants(options);
  }

  /** The user keeps a grant reported unused: the 90 days start again from now. */
  async keepGrant(relationId: string, scope: string): Promise<void> {
    await this.init();
    await this.consentHalf.keepGrant(relationId, scope);
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

  private notice(kind: ConsentNoticeKind, relationId: string, agentId: string, scope: string, text: string): void {
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

}


function optionOf(view: RelationView, scope: string): JsonObject {
  const option = view.grantOptions[scope];
  return isJsonObject(option) ? option : {};
}
