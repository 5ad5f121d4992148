/**
 * JSON Schema (Draft 2020-12) validation of a tool's arguments and results, behind one
 * small seam so the engine can change without touching the chain.
 *
 * The engine is `@cfworker/json-schema`: it *interprets* schemas (no `new Function`, no
 * eval), so it runs under the portal's CSP (`script-src 'self'`). Formats are asserted, as
 * the Python SDK does. No remote reference is ever fetched: a `$ref` that is not local, or
 * that points at nothing, makes the schema fail to compile, and a tool whose schema does
 * not compile runs nothing. Argument values never appear in details.
 *
 * Regular expressions: JavaScript's engine backtracks without bound and offers no step
 * limit (the Python SDK runs patterns under fancy-regex's backtrack limit,
 * hashee_sdk/core/bounded_regex.py). So a schema is refused at compile time when one of its
 * patterns needs backtracking by construction — backreferences, lookaround — or nests an
 * unbounded quantifier over a group that itself repeats or alternates (`(a+)+`, `(a|a)*`,
 * the classic catastrophic shapes), or holds more than {@link MAX_PATTERNS} distinct
 * patterns. What remains: polynomial backtracking of adjacent overlapping quantifiers
 * (`\d*\d*\d*x`), bounded by the length of the strings the schema lets through.
 */
import { Validator, type OutputUnit } from "@cfworker/json-schema";
import type { ErrorDetail } from "./errors.js";

export const MAX_DETAILS = 20;
export const MAX_PATTERNS = 64; // as hashee_sdk.core.bounded_regex
export const MAX_PATTERN_LENGTH = 1024;
// Validation keywords → the registry's detail codes (as hashee_sdk.contract maps them).
const DETAIL_CODES: Record<string, string> = {
  required: "REQUIRED", additionalProperties: "UNKNOWN_FIELD", unevaluatedProperties: "UNKNOWN_FIELD",
  type: "INVALID_TYPE", pattern: "PATTERN_MISMATCH", maxLength: "TOO_LONG", maxItems: "TOO_LONG",
  maxProperties: "TOO_LONG", minimum: "OUT_OF_RANGE", maximum: "OUT_OF_RANGE", exclusiveMinimum: "OUT_OF_RANGE",
  exclusiveMaximum: "OUT_OF_RANGE",
};
// Keywords that only say a subschema failed: the failing leaf is reported instead.
const AGGREGATES = new Set(["properties", "items", "prefixItems", "allOf", "$ref", "$dynamicRef", "$recursiveRef",
  "patternProperties", "dependentSchemas", "then", "else", "contains", "propertyNames", "false"]);
const TYPES = new Set(["array", "boolean", "integer", "null", "number", "object", "string"]);
const SCHEMA_MAPS = ["properties", "patternProperties", "$defs", "dependentSchemas"];
const SCHEMA_LISTS = ["allOf", "anyOf", "oneOf", "prefixItems"];
const SCHEMA_ONE = ["not", "if", "then", "else", "items", "contains", "additionalProperties",
  "unevaluatedProperties", "unevaluatedItems", "propertyNames"];
const NUMBERS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
  "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"];

export interface SchemaValidator {
  isValid(instance: unknown): boolean;
  /** SPEC §2 details, pointers rooted at `/arguments` (or `/result`), values masked. */
  details(instance: unknown): ErrorDetail[];
}

/** The compiled schema, or null when it does not compile (the tool then runs nothing). */
export function compileSchema(schema: unknown, root: "/arguments" | "/result"): SchemaValidator | null {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return null;
  let validator: Validator;
  try {
    const copy = JSON.parse(JSON.stringify(schema)) as Record<string, unknown>; // the engine annotates what it gets
    if (refusal(copy) !== null) return null;
    validator = new Validator(copy, "2020-12", false);
  } catch {
    return null;
  }
  const run = (instance: unknown): OutputUnit[] | null => {
    try {
      return validator.validate(instance).errors;
    } catch {
      return [{ keyword: "type", keywordLocation: "#", instanceLocation: "#", error: "" }]; // undecided is invalid
    }
  };
  return {
    isValid: (instance) => (run(instance) ?? []).length === 0,
    details(instance) {
      const errors = run(instance) ?? [];
      const leaves = errors.filter((e) => !AGGREGATES.has(e.keyword));
      const seen = new Set<string>();
      const out: ErrorDetail[] = [];
      for (const error of leaves.length > 0 ? leaves : errors) {
        const found = detail(error, root);
        const key = `${found.path} ${found.code}`;
        if (!seen.has(key)) {
          seen.add(key);
          out.push(found);
        }
      }
      return out.sort((a, b) => (a.path === b.path ? a.code.localeCompare(b.code) : a.path < b.path ? -1 : 1))
        .slice(0, MAX_DETAILS);
    },
  };
}

function detail(error: OutputUnit, root: string): ErrorDetail {
  let path = root + error.instanceLocation.replace(/^#/, "");
  if (["required", "additionalProperties", "unevaluatedProperties"].includes(error.keyword)) {
    const name = /(?:required property|Property) "(.*?)"/.exec(error.error)?.[1];
    if (name !== undefined) path += `/${pointerPart(name)}`;
  }
  // The engine's messages may quote a value (a number out of range): ours name the keyword only.
  return { path, code: DETAIL_CODES[error.keyword] ?? "INVALID_VALUE", message: `does not satisfy ${error.keyword}` };
}

const pointerPart = (name: string): string => name.replace(/~/g, "~0").replace(/\//g, "~1");

// --- what a schema may not hold -----------------------------------------------------------

/** Why the schema is refused (a remote or dangling `$ref`, a dangerous pattern), or null. */
export function refusal(schema: unknown): string | null {
  if (!wellFormed(schema)) return "not a Draft 2020-12 schema";
  const patterns = new Set<string>();
  const problems: string[] = [];
  walk(schema, (node) => {
    const ref = node["$ref"];
    if (ref !== undefined && (typeof ref !== "string" || !resolves(schema, ref))) problems.push("a $ref that is not local");
    if (typeof node["pattern"] === "string") patterns.add(node["pattern"]);
    const named = node["patternProperties"];
    if (typeof named === "object" && named !== null) Object.keys(named).forEach((p) => patterns.add(p));
  });
  if (patterns.size > MAX_PATTERNS) problems.push(`more than ${MAX_PATTERNS} distinct patterns`);
  for (const pattern of patterns) {
    const why = unsafePattern(pattern);
    if (why !== null) problems.push(why);
  }
  return problems[0] ?? null;
}

/** The keywords this engine reads have the types the meta-schema gives them (the server
 * checked the manifest against the meta-schema; the device does not take that on its word). */
function wellFormed(node: unknown): boolean {
  if (typeof node === "boolean") return true;
  if (typeof node !== "object" || node === null || Array.isArray(node)) return false;
  const s = node as Record<string, unknown>;
  const type = s["type"];
  if (type !== undefined && !(typeof type === "string" ? TYPES.has(type)
    : Array.isArray(type) && type.length > 0 && type.every((t) => typeof t === "string" && TYPES.has(t)))) return false;
  if (s["required"] !== undefined && !(Array.isArray(s["required"]) && s["required"].every((r) => typeof r === "string"))) return false;
  if (s["enum"] !== undefined && !Array.isArray(s["enum"])) return false;
  if (s["pattern"] !== undefined && typeof s["pattern"] !== "string") return false;
  if (s["format"] !== undefined && typeof s["format"] !== "string") return false;
  if (NUMBERS.some((k) => s[k] !== undefined && typeof s[k] !== "number")) return false;
  for (const k of SCHEMA_MAPS) {
    const map = s[k];
    if (map === undefined) continue;
    if (typeof map !== "object" || map === null || Array.isArray(map) || !Object.values(map).every(wellFormed)) return false;
  }
  for (const k of SCHEMA_LISTS) {
    const list = s[k];
    if (list !== undefined && !(Array.isArray(list) && list.length > 0 && list.every(wellFormed))) return false;
  }
  return SCHEMA_ONE.every((k) => s[k] === undefined || wellFormed(s[k]));
}

function walk(node: unknown, visit: (node: Record<string, unknown>) => void): void {
  if (Array.isArray(node)) node.forEach((item) => walk(item, visit));
  else if (typeof node === "object" && node !== null) {
    visit(node as Record<string, unknown>);
    Object.values(node).forEach((value) => walk(value, visit));
  }
}

function resolves(schema: unknown, ref: string): boolean {
  if (!ref.startsWith("#")) return false;
  if (ref === "#") return true;
  if (!ref.startsWith("#/")) return false; // anchors are not followed
  let node: unknown = schema;
  for (const raw of ref.slice(2).split("/")) {
    const part = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    if (typeof node !== "object" || node === null || !Object.prototype.hasOwnProperty.call(node, part)) return false;
    node = (node as Record<string, unknown>)[part];
  }
  return typeof node === "object" || typeof node === "boolean";
}

/** Why a pattern may backtrack without bound here, or null (see the module comment). */
export function unsafePattern(pattern: string): string | null {
  if (pattern.length > MAX_PATTERN_LENGTH) return "a pattern over the length limit";
  try {
    new RegExp(pattern, "u"); // compiling never backtracks
  } catch {
    return "a pattern that does not compile";
  }
  const groups: { repeats: boolean }[] = [{ repeats: false }];
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i];
    const top = groups[groups.length - 1]!;
    if (ch === "\\") {
      const next = pattern[i + 1] ?? "";
      if (/[1-9]/.test(next) || (next === "k" && pattern[i + 2] === "<")) return "a pattern with a backreference";
      i++;
    } else if (ch === "[") {
      for (i++; i < pattern.length && pattern[i] !== "]"; i++) if (pattern[i] === "\\") i++;
    } else if (ch === "(") {
      if (/^\(\?<?[=!]/.test(pattern.slice(i, i + 4))) return "a pattern with lookaround";
      groups.push({ repeats: false });
      if (pattern[i + 1] === "?") i = pattern[i + 2] === "<" ? pattern.indexOf(">", i) : i + 2; // (?: (?<name>
    } else if (ch === ")") {
      const inner = groups.length > 1 ? groups.pop()! : { repeats: false };
      const [unbounded, length] = quantifier(pattern, i + 1);
      if (unbounded && inner.repeats) return "a pattern that nests repetition (catastrophic backtracking)";
      const parent = groups[groups.length - 1]!;
      parent.repeats ||= inner.repeats || length > 0;
      i += length;
    } else if (ch === "|") {
      top.repeats = true;
    } else {
      const [, length] = quantifier(pattern, i);
      if (length > 0) {
        top.repeats = true;
        i += length - 1;
      }
    }
  }
  return null;
}

/** [repeats more than once?, length] of the quantifier at `at` (length 0: none). */
function quantifier(pattern: string, at: number): [boolean, number] {
  const ch = pattern[at];
  let length = 0;
  let unbounded = false;
  if (ch === "*" || ch === "+") [unbounded, length] = [true, 1];
  else if (ch === "?") length = 1;
  else if (ch === "{") {
    const found = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(at));
    if (found === null) return [false, 0];
    const upper = found[2] === undefined ? Number(found[1]) : found[3] === "" ? Infinity : Number(found[3]);
    [unbounded, length] = [upper > 1, found[0].length];
  }
  if (length > 0 && (pattern[at + length] === "?" || pattern[at + length] === "+")) length++; // lazy
  return [unbounded, length];
}
