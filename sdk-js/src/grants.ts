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
