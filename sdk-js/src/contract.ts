/**
 * The client security contract (SPEC §6 steps 1–5, with SPEC §9.3) as one pure function,
 * and the `tool_response` artifacts (sdk/hashee_sdk/contract.py and consent.py).
 *
 * {@link decide} answers, in this order: group → `tool_not_supported_in_group`; not
 * declared → `tool_not_declared`; relation revoked → `permission_revoked`; a relation the
 * device knows revoked → `consent_unverified`; a grant its options end (a `once` grant used,
 * past `until` by the device's clock, an option the device cannot read) → `scope_not_granted`,
 * whatever the server says; the newest verified consent statement not giving the scope →
 * `consent_unverified`; the tool's scope pending re-consent → `reauth_required` (that tool
 * only); the declared scope not granted, or the call claiming another → `scope_not_granted`;
 * arguments failing the schema the user consented to or the current one → `error:
 * TOOL_INVALID_ARGUMENTS`; arguments outside the grant's narrowing (`arguments[tool]`) →
 * `scope_not_granted` with details; then the sensitivity policy → run (silent) or prompt. Sensitivity never falls below a preset scope's platform
 * level nor below the level the user consented to.
 */
import { canonicalHash, isJsonObject, type Json, type JsonObject } from "./canonical.js";
import type { DenialReason, ErrorDetail, ToolErrorCode } from "./errors.js";
import type { CompiledGrant } from "./grants.js";
import type { PolicySubject, Sensitivity, SensitivityPolicy } from "./policy.js";
import { compileSchema, type SchemaValidator } from "./schema.js";

export const PRESET_SCOPES: Readonly<Record<string, Sensitivity>> = {
  "notification:send": "low", "filesystem:read": "medium", "clipboard:read": "medium", "location:read": "high",
};
const ORDER: Record<string, number> = { low: 0, medium: 1, high: 2 };
export const DEFAULT_TIMEOUT_MS = 10_000;

export interface CompiledTool {
  readonly name: string;
  readonly scope: string;
  readonly sensitivity: Sensitivity;
  readonly timeoutMs: number;
  /** null: a schema did not compile (deny by default: the tool runs nothing). */
  readonly input: SchemaValidator | null;
  /** The compiled output_schema (SPEC §10.4); null when none is declared. */
  readonly output: SchemaValidator | null;
  readonly description: string;
}

export interface CompiledManifest {
  readonly hash: string;
  readonly tools: ReadonlyMap<string, CompiledTool>;
}

export type Decision =
  | { readonly outcome: "denied"; readonly reason: DenialReason; readonly details?: readonly ErrorDetail[] }
  | { readonly outcome: "error"; readonly reason: ToolErrorCode; readonly details: readonly ErrorDetail[]; readonly tool: CompiledTool }
  | { readonly outcome: "run" | "prompt"; readonly tool: CompiledTool };

/** The tools of a manifest, compiled, with floors; with `acknowledged` (the version the user
 * consented to), arguments must satisfy both schemas and no level falls below the consented one. */
export function compileManifest(manifest: JsonObject, acknowledged?: JsonObject | null): CompiledManifest {
  const consentedLevels = acknowledged ? levels(acknowledged) : new Map<string, Sensitivity>();
  const before = acknowledged ? compileTools(acknowledged, new Map()) : new Map<string, CompiledTool>();
  const tools = new Map<string, CompiledTool>();
  for (const [name, tool] of compileTools(manifest, consentedLevels)) {
    const old = before.get(name);
    tools.set(name, old === undefined ? tool : { ...tool, input: bothSchemas(old.input, tool.input) });
  }
  return { hash: canonicalHash(manifest), tools };
}

function compileTools(manifest: JsonObject, consentedLevels: ReadonlyMap<string, Sensitivity>): Map<string, CompiledTool> {
  const declared = levels(manifest);
  const tools = new Map<string, CompiledTool>();
  const list = Array.isArray(manifest["tools"]) ? manifest["tools"] : [];
  for (const tool of list) {
    if (!isJsonObject(tool) || typeof tool["name"] !== "string") continue;
    const scope = String(tool["permission_scope"] ?? "");
    const output = "output_schema" in tool ? compileSchema(tool["output_schema"], "/result") : null;
    const outputBroken = "output_schema" in tool && output === null;
    tools.set(tool["name"], {
      name: tool["name"], scope, timeoutMs: Number.isSafeInteger(tool["timeout_ms"]) ? (tool["timeout_ms"] as number) : DEFAULT_TIMEOUT_MS,
      sensitivity: highest([declared.get(scope) ?? "high", PRESET_SCOPES[scope] ?? "low", consentedLevels.get(scope) ?? "low"]),
      // a result that cannot be checked is never produced: the tool runs nothing
      input: outputBroken ? null : compileSchema(tool["input_schema"], "/arguments"),
      output, description: typeof tool["description_fallback"] === "string" ? tool["description_fallback"] : "",
    });
  }
  return tools;
}

function levels(manifest: JsonObject): Map<string, Sensitivity> {
  const found = new Map<string, Sensitivity>();
  for (const scope of Array.isArray(manifest["permission_scopes"]) ? manifest["permission_scopes"] : []) {
    if (isJsonObject(scope) && typeof scope["id"] === "string") {
      const level = scope["sensitivity"];
      found.set(scope["id"], level === "low" || level === "medium" || level === "high" ? level : "high");
    }
  }
  return found;
}

function highest(candidates: Sensitivity[]): Sensitivity {
  return candidates.reduce((a, b) => ((ORDER[b] ?? 2) > (ORDER[a] ?? 2) ? b : a));
}

function bothSchemas(consented: SchemaValidator | null, current: SchemaValidator | null): SchemaValidator | null {
  if (consented === null || current === null) return null;
  return {
    isValid: (instance) => consented.isValid(instance) && current.isValid(instance),
    details: (instance) => {
      const found = current.details(instance);
      return found.length > 0 ? found : consented.details(instance);
    },
  };
}

export interface DecideContext {
  readonly manifest: CompiledManifest;
  readonly granted: ReadonlySet<string>;
  readonly inGroup: boolean;
  readonly policy: SensitivityPolicy;
  readonly subject: PolicySubject;
  readonly nowMs: number;
  readonly revoked?: boolean;
  /** Scopes pending re-consent (the server's word plus what the device finds breaking). */
  readonly pending?: ReadonlySet<string>;
  /** Scopes granted by the server's word only: prompted once whatever their level. */
  readonly unconfirmed?: ReadonlySet<string>;
  /** Scopes the newest verified consent statement does not give (SPEC §9.6). */
  readonly unbacked?: ReadonlySet<string>;
  /** The device knows the relation revoked while the server says it is live. */
  readonly consentRevoked?: boolean;
  /** The grant options the user gave, per scope (SPEC §5.2 v1.2). */
  readonly grants?: ReadonlyMap<string, CompiledGrant>;
  /** Scopes whose `once` grant this device used: refused whatever the server says (a later
   * statement that grants the scope again gives a new once). */
  readonly onceUsed?: ReadonlySet<string>;
}

const NOT_GRANTED: Decision = { outcome: "denied", reason: "scope_not_granted" };

/** Whether the grant's options end it now: its `once` used, unreadable, or past `until`. */
function grantEnded(grant: CompiledGrant | undefined, scope: string, context: DecideContext): boolean {
  if (context.onceUsed?.has(scope)) return true;
  return grant !== undefined && (grant.unreadable || (grant.untilMs !== null && context.nowMs >= grant.untilMs));
}

/** `denied: scope_not_granted` with details when the arguments fall outside the grant's narrowing of the tool. */
function outsideNarrowing(grant: CompiledGrant | undefined, tool: CompiledTool, args: Json | undefined): Decision | null {
  if (grant === undefined || !grant.arguments.has(tool.name)) return null;
  const narrowed = grant.arguments.get(tool.name) ?? null;
  if (narrowed === null) return NOT_GRANTED; // a narrowing that does not compile lets nothing through
  return narrowed.isValid(args) ? null : { outcome: "denied", reason: "scope_not_granted", details: narrowed.details(args) };
}

/** Steps 1–5 of SPEC §6 for one decrypted tool call; pure. */
export function decide(call: JsonObject, context: DecideContext): Decision {
  if (context.inGroup) return { outcome: "denied", reason: "tool_not_supported_in_group" };
  const name = call["tool_name"];
  const tool = typeof name === "string" ? context.manifest.tools.get(name) : undefined;
  if (tool === undefined) return { outcome: "denied", reason: "tool_not_declared" };
  if (context.revoked) return { outcome: "denied", reason: "permission_revoked" };
  if (context.consentRevoked) return { outcome: "denied", reason: "consent_unverified" };
  const grant = context.grants?.get(tool.scope);
  if (grantEnded(grant, tool.scope, context)) return NOT_GRANTED;
  if (context.unbacked?.has(tool.scope)) return { outcome: "denied", reason: "consent_unverified" };
  if (context.pending?.has(tool.scope)) return { outcome: "denied", reason: "reauth_required" };
  if (!context.granted.has(tool.scope) || call["permission_scope"] !== tool.scope) return NOT_GRANTED;
  if (tool.input === null) return { outcome: "error", reason: "TOOL_PLATFORM_ERROR", details: [], tool };
  const args = call["arguments"];
  if (!tool.input.isValid(args)) {
    return { outcome: "error", reason: "TOOL_INVALID_ARGUMENTS", details: tool.input.details(args), tool };
  }
  const outside = outsideNarrowing(grant, tool, args);
  if (outside !== null) return outside;
  const silent = !context.unconfirmed?.has(tool.scope)
    && context.policy.isSilent(context.subject, tool.scope, tool.sensitivity, context.nowMs);
  return { outcome: silent ? "run" : "prompt", tool };
}

// --- tool_response artifacts ------------------------------------------------------------

export function responseOk(callId: string, result: Json): JsonObject {
  return { subtype: "tool_response", call_id: callId, status: "ok", result };
}

export function responseDenied(callId: string, reason: DenialReason, details: readonly ErrorDetail[] = []): JsonObject {
  const response: Record<string, Json> = { subtype: "tool_response", call_id: callId, status: "denied", reason };
  if (details.length > 0) response["details"] = details.map((d) => ({ ...d }));
  return response;
}

export function responseError(callId: string, code: ToolErrorCode, details: readonly ErrorDetail[] = []): JsonObject {
  const response: Record<string, Json> = { subtype: "tool_response", call_id: callId, status: "error", reason: code };
  if (details.length > 0) response["details"] = details.map((d) => ({ ...d }));
  return response;
}
