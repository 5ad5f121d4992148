/**
 * The SDK's `Device` (SPEC §12.3) answering calls in this tab, and what the page shows of
 * it. The page renders; the SDK decides (the chain of wire-spec §4 and SPEC §6, §9).
 *
 * The device runs on the browser's session (the cookie, and the CSRF token of the page's
 * `<meta name="csrf-token">`), with the keys this page made and registered (the same
 * LocalState "secret/key-pair" in the same IndexedDB store). It listens on /ws/events and
 * resumes from the cursor it keeps in the store: calls sent while no tab was open are
 * handled when one opens, unless they expired (the SDK drops those before any prompt).
 */
import {
  callApi, Device, HIGH_PROMPT_TIMEOUT_MS, IdentityChanged, type Json, type JsonObject, type PromptRequest as SdkPrompt,
  type SessionCredential, type Store, type UnusedGrant,
} from "@hashee/sdk";
import { csrfToken } from "./api.js";
import type { ToolHandlers } from "./tools.js";

export type Sensitivity = "low" | "medium" | "high";

/** A prompt, as SPEC §12.2 lists what it shows. */
export interface PromptRequest {
  readonly callId: string;
  readonly agentId: string;
  readonly agentName: string;
  readonly toolName: string;
  readonly toolDescription: string;
  readonly scope: string;
  readonly sensitivity: Sensitivity;
  readonly arguments: Readonly<Record<string, unknown>>;
  readonly manifestVersion: number | null;
  /** null: the agent has no identity key, its publisher is unverified */
  readonly safetyNumber: string | null;
  /** how the user limited this grant (`{}`: always), said in words by the dialog */
  readonly grantOption: JsonObject;
}

export type PromptAnswer = "allow" | "deny" | "timeout";

/** An agent this device serves (a live relation of the user), as the SDK verified it. */
export interface ServedAgent {
  readonly relationId: string;
  readonly agentId: string;
  readonly agentName: string;
  /** the pinned identity's number; after a change, the number of the identity served now */
  readonly safetyNumber: string | null;
  readonly verified: boolean;
  /** the identity changed since it was pinned: calls are refused until the user accepts */
  readonly identityChanged: boolean;
  /** the granted scopes and the options this device enforces for them */
  readonly granted: readonly string[];
  readonly grantOptions: JsonObject;
}

export interface DeviceRuntime {
  agents(): Promise<readonly ServedAgent[]>;
  /** "Mark as verified" (kept on this device); after an identity change, also accepts the
   * new identity — the one whose number the user was shown and compared. */
  markVerified(agent: ServedAgent): Promise<void>;
  /** high-sensitivity grants this device has not used for 90 days (issue 26) */
  unusedGrants(): Promise<readonly UnusedGrant[]>;
  /** withdraw one grant with a signed PATCH; or keep it (the 90 days start again) */
  withdraw(grant: UnusedGrant): Promise<void>;
  keep(grant: UnusedGrant): Promise<void>;
  stop(): Promise<void>;
}

export interface StartOptions {
  readonly store: Store;
  readonly deviceId: string;
  readonly tools: ToolHandlers;
  readonly prompt: (request: PromptRequest, timeoutMs: number) => Promise<PromptAnswer>;
  /** the audit log changed: the page re-renders it, and the agents too when `agents` (a call
   * refused before any prompt: an identity or agent change shows there). An answered call
   * changes no agent: verifying them again (four requests) after every answer would contend
   * with the next call's checks. */
  readonly changed: (agents: boolean) => void;
}

const VERIFIED = "browser/verified/";
/** A test may shorten the prompt's 30 s (never lengthen it): Playwright sets this before the page loads. */
const TEST_PROMPT_TIMEOUT = "__hasheePromptTimeoutMs";

export function sessionCredential(): SessionCredential {
  return { session: true, csrfToken };
}

/** A Device of this browser on the session, its keys and state in `store` (not started). */
export function browserDevice(store: Store, deviceId: string, extra: Partial<ConstructorParameters<typeof Device>[0]> = {}):
Device {
  return new Device({ url: location.origin, credential: sessionCredential(), deviceId, store,
    prompt: () => "deny", ...extra });
}

export function promptTimeoutMs(): number {
  const asked = (globalThis as Record<string, unknown>)[TEST_PROMPT_TIMEOUT];
  return typeof asked === "number" && asked > 0 && asked < HIGH_PROMPT_TIMEOUT_MS ? asked : HIGH_PROMPT_TIMEOUT_MS;
}

export async function startDevice(options: StartOptions): Promise<DeviceRuntime> {
  const timeoutMs = promptTimeoutMs();
  const tools = Object.fromEntries(Object.entries(options.tools).map(([name, handler]) =>
    [name, async (args: JsonObject) => (await handler(args)) as Json]));
  const device = browserDevice(options.store, options.deviceId, { tools, promptTimeoutMs: timeoutMs,
    prompt: async (request: SdkPrompt) => {
      // The SDK stops waiting after timeoutMs (user_timeout): the dialog closes then too.
      const answer = await options.prompt(pagePrompt(request), timeoutMs);
      return answer === "allow" ? "allow" : "deny";
    } });
  await device.init();
  const record = device.audit.record.bind(device.audit); // every answer and refusal is audited: re-render then
  device.audit.record = async (entry) => {
    const saved = await record(entry);
    options.changed(saved.status === "refused");
    return saved;
  };
  await device.start();
  return {
    agents: () => servedAgents(device, options.store),
    markVerified: async (agent) => {
      if (agent.safetyNumber === null) return;
      if (agent.identityChanged) await device.acceptIdentity(agent.relationId, { safetyNumber: agent.safetyNumber });
      await options.store.set(VERIFIED + agent.relationId, agent.safetyNumber);
    },
    unusedGrants: () => device.unusedGrants(),
    withdraw: async (grant) => {
      await device.withdraw(grant.relationId, grant.scope);
    },
    keep: (grant) => device.keepGrant(grant.relationId, grant.scope),
    stop: () => device.stop(),
  };
}

function pagePrompt(request: SdkPrompt): PromptRequest {
  const sensitivity = (["low", "medium", "high"] as const).find((s) => s === request.sensitivity) ?? "high";
  return { callId: request.callId, agentId: request.agentId, agentName: request.agentName, toolName: request.toolName,
    toolDescription: request.toolDescription, scope: request.scope, sensitivity, arguments: request.arguments,
    manifestVersion: request.manifestVersion, safetyNumber: request.safetyNumber, grantOption: request.grantOption };
}

interface ApiRelation {
  relation_id: string;
  agent_id: string;
  status: string;
}

async function servedAgents(device: Device, store: Store): Promise<ServedAgent[]> {
  const page = await callApi<{ results?: ApiRelation[] }>(device.transport, "GET", "/h2a/relations?page_size=100");
  const relations = (page.results ?? []).filter((r) => r.status !== "revoked");
  const agents: ServedAgent[] = [];
  for (const relation of relations) {
    const view = await device.relation(relation.relation_id, true);
    let identityChanged = false;
    try {
      await device.keydir.identity(relation.relation_id, relation.agent_id);
    } catch (error) {
      if (!(error instanceof IdentityChanged)) throw error;
      identityChanged = true;
    }
    const safetyNumber = identityChanged ? await device.pendingSafetyNumber(relation.relation_id) : view.safetyNumber;
    const kept = await store.get(VERIFIED + relation.relation_id);
    agents.push({ relationId: relation.relation_id, agentId: view.agentId, agentName: view.agentName, safetyNumber,
      verified: !identityChanged && safetyNumber !== null && kept === safetyNumber, identityChanged,
      granted: [...view.granted].filter((s) => !view.unbacked.has(s) && !view.pending.has(s)).sort(), grantOptions: view.grantOptions });
  }
  return agents;
}
