/**
 * Grant options (SPEC §5.2 v1.2, issue 26): how a granted scope is limited, as the device
 * enforces it — it alone sees the calls.
 *
 * A relation's `grant_options` is an object keyed by granted scope id; each value holds any of
 * `{"once": true}` (good for one call), `{"until": <epoch ms>}` (not granted from then on, by
 * the device's own clock) and `{"arguments": {"<tool>": <JSON Schema>}}` (a call of that tool
 * must satisfy this schema as well as the tool's own). The device reads them from the newest
 * consent statement it verified (the server's field only when it has none) and compiles them
 * here; an option it cannot read (a lie, or a newer shape) withholds the scope: an option may
 * only ever narrow what a grant allows.
 */
import { canonicalText, isJsonObject, type Json, type JsonObject } from "./canonical.js";
import { compileSchema, type SchemaValidator } from "./schema.js";

export interface GrantOption {
  readonly once?: true;
  readonly until?: number;
  readonly arguments?: { readonly [tool: string]: JsonObject };
}
export type GrantOptions = { readonly [scope: string]: GrantOption };

export interface CompiledGrant {
  readonly once: boolean;
  /** epoch ms from which the scope is not granted; null: no end */
  readonly untilMs: number | null;
  /** per tool, the narrowing schema (null: it did not compile, the tool runs nothing) */
  readonly arguments: ReadonlyMap<string, SchemaValidator | null>;
  /** an option of another shape: the scope is withheld */
  readonly unreadable: boolean;
}

const KEYS = new Set(["once", "until", "arguments"]);

/** The options of the scopes in `granted` (others are no grant's), `{}` entries dropped. */
export function grantOptionsOf(raw: unknown, granted: Iterable<string>): JsonObject {
  if (!isJsonObject(raw)) return {};
  const kept: Record<string, Json> = {};
  for (const scope of granted) {
    const option = raw[scope];
    if (option !== undefined && !(isJsonObject(option) && Object.keys(option).length === 0)) kept[scope] = option;
  }
  return kept;
}

/** Each scope's options compiled; what cannot be read withholds its scope. */
export function compileGrants(options: JsonObject): Map<string, CompiledGrant> {
  const compiled = new Map<string, CompiledGrant>();
  for (const [scope, option] of Object.entries(options)) compiled.set(scope, compileGrant(option));
  return compiled;
}

function compileGrant(option: Json): CompiledGrant {
  const unreadable: CompiledGrant = { once: false, untilMs: null, arguments: new Map(), unreadable: true };
  if (!isJsonObject(option) || !Object.keys(option).every((k) => KEYS.has(k))) return unreadable;
  const { once, until, arguments: narrowed } = option;
  if (once !== undefined && once !== true) return unreadable;
  if (until !== undefined && !Number.isSafeInteger(until)) return unreadable;
  if (narrowed !== undefined && !(isJsonObject(narrowed) && Object.values(narrowed).every(isJsonObject))) return unreadable;
  const tools = new Map<string, SchemaValidator | null>();
  for (const [tool, schema] of Object.entries(narrowed ?? {})) tools.set(tool, compileSchema(schema, "/arguments"));
  return { once: once === true, untilMs: until === undefined ? null : (until as number), arguments: tools, unreadable: false };
}

/** Whether two option sets say the same for `scopes` (what the server serves against what the user signed). */
export function sameGrantOptions(a: JsonObject, b: JsonObject, scopes: Iterable<string>): boolean {
  const list = [...scopes];
  try {
    return canonicalText(grantOptionsOf(a, list)) === canonicalText(grantOptionsOf(b, list));
  } catch {
    return false; // not JSON the user could have signed
  }
}

/** Why a call was refused without asking the user, in words (SPEC §6 reasons, as
 * sdk/hashee_sdk/grants.py says them); the user's own answers are not told back to them. */
const REFUSAL_WORDS: Readonly<Record<string, string>> = {
  scope_not_granted: "you have not granted {scope} (or not for this call)",
  reauth_required: "{scope} is paused until you answer the agent's new version",
  permission_revoked: "you disconnected this agent",
  consent_unverified: "the server claims a consent your own signed consent does not give",
  tool_not_declared: "the agent's manifest declares no such tool",
  tool_not_supported_in_group: "tools are not called in group conversations",
  identity_changed: "the agent's identity changed: compare the new safety number first",
  runtime_key_unpinned: "the call was not signed by a key this device trusts for the agent",
  manifest_unverified: "the agent's manifest could not be verified",
  untrusted_sender: "it was not sent by a key this device trusts for the agent",
  envelope_invalid: "it could not be opened as a sealed call",
  call_malformed: "it was not a well-formed call",
  call_expired: "the call arrived after it expired",
  call_replayed: "the same call was sent again",
};
export const TOLD_BY_THE_USER: ReadonlySet<string> = new Set(["user_refused", "user_timeout"]);

/** "Refused DemoBot's read_file: filesystem:read is paused until you answer …". */
export function refusalWords(agent: string, tool: string, scope: string, reason: string): string {
  const why = (REFUSAL_WORDS[reason] ?? reason.replace(/_/g, " ")).replace("{scope}", scope || "its permission");
  return `Refused ${agent}'s ${tool || "call"}: ${why}.`;
}
