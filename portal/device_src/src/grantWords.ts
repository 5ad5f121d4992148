/**
 * A grant's options (SPEC §5.2 v1.2) in words, as the portal says them: "Only this time",
 * "Until 27/11/2026, 18:00", "Only when path starts with /home/bob/docs/". The portal's consent
 * form narrows a tool with two shapes (a string argument's prefix, never climbing out of it
 * with "..", and an argument's allowed `enum` values): a schema of exactly those shapes is read
 * back into words, any other one is "only within limits you set" (the portal reads back the
 * same, tests/portal/test_device_page_grant_words.py). Texts come from the page (translated by
 * the portal), with the English of SPEC §12.2 when the page has none.
 */
import { isJsonObject, type Json, type JsonObject } from "@hashee/sdk";
import { when, type Texts } from "./dom.js";

const ENGLISH: Record<string, string> = {
  grant_once: "Only this time",
  grant_until: "Until %(when)s",
  grant_prefix: "Only when %(arg)s starts with %(prefix)s",
  grant_values: "Only when %(arg)s is %(value)s",
  grant_one_of: "Only when %(arg)s is one of: %(values)s",
  grant_limited: "Only within limits you set for %(tool)s",
  unused_title: "Permissions you have not used for %(days)s days",
  unused_intro: "This device has not answered a call of these permissions for a long time. Withdraw what you no longer need.",
  unused_row: "%(agent)s: %(scope)s, unused since %(since)s",
  unused_withdraw: "Withdraw",
  unused_keep: "Keep",
  withdraw_failed: "used once; not yet withdrawn on the server, refused here",
};

/** The page's text for `key`, or its English. */
export function say(texts: Texts, key: string, vars: Record<string, string | number> = {}): string {
  const value = texts[key];
  const template = typeof value === "string" ? value : ENGLISH[key] ?? key;
  return template.replace(/%\((\w+)\)s/g, (_m, name: string) => String(vars[name]));
}

/** One scope's options, each a line (none: the grant is "always"). */
export function grantWords(option: JsonObject, texts: Texts): string[] {
  const words: string[] = [];
  if (option["once"] === true) words.push(say(texts, "grant_once"));
  if (typeof option["until"] === "number") words.push(say(texts, "grant_until", { when: when(option["until"]) }));
  const narrowed = option["arguments"];
  for (const [tool, schema] of Object.entries(isJsonObject(narrowed) ? narrowed : {})) words.push(...narrowingWords(tool, schema, texts));
  return words;
}

function narrowingWords(tool: string, schema: Json, texts: Texts): string[] {
  const found = readBack(schema);
  if (found === null) return [say(texts, "grant_limited", { tool })];
  const words = found.prefixes.map(([arg, prefix]) => say(texts, "grant_prefix", { arg, prefix }));
  for (const [arg, values] of found.allowed) {
    const shown = values.map((v) => (typeof v === "string" ? v : JSON.stringify(v)));
    words.push(shown.length === 1 ? say(texts, "grant_values", { arg, value: shown[0]! })
      : say(texts, "grant_one_of", { arg, values: shown.join(", ") }));
  }
  return words;
}

/** The `..` segment a narrowed string never has (portal/grant_choices.py's NO_PARENT_SEGMENT). */
const NO_PARENT_SEGMENT = "(^|[/\\\\])\\.\\.([/\\\\]|$)";

interface ReadBack {
  readonly prefixes: [string, string][];
  readonly allowed: [string, Json[]][];
}

/** A narrowing as the portal's choices make it (portal/grant_choices.py's arguments_schema):
 * each argument a prefix (`{type: "string", pattern: "^…", not: {pattern: NO_PARENT_SEGMENT}}`,
 * required) or allowed values (`{enum}`). Any other schema, made elsewhere, is null: said as
 * "within limits", never as a part of it that would read wider than it is. */
function readBack(schema: Json): ReadBack | null {
  if (!isJsonObject(schema) || !hasKeys(schema, ["type", "properties"], ["required"]) || schema["type"] !== "object") return null;
  const properties = schema["properties"];
  if (!isJsonObject(properties)) return null;
  const found: ReadBack = { prefixes: [], allowed: [] };
  for (const [arg, rule] of Object.entries(properties)) {
    if (!isJsonObject(rule)) return null;
    const prefix = typeof rule["pattern"] === "string" ? literalPrefix(rule["pattern"]) : null;
    const not = rule["not"];
    if (prefix !== null && hasKeys(rule, ["type", "pattern", "not"]) && rule["type"] === "string" && isJsonObject(not)
      && hasKeys(not, ["pattern"]) && not["pattern"] === NO_PARENT_SEGMENT) found.prefixes.push([arg, prefix]);
    else if (hasKeys(rule, ["enum"]) && Array.isArray(rule["enum"]) && rule["enum"].length > 0) found.allowed.push([arg, rule["enum"]]);
    else return null;
  }
  const required = schema["required"];
  const wanted = found.prefixes.map(([arg]) => arg).sort();
  const requiredOk = wanted.length === 0 ? required === undefined
    : Array.isArray(required) && required.length === wanted.length && required.every((r, i) => r === wanted[i]);
  return requiredOk && (found.prefixes.length > 0 || found.allowed.length > 0) ? found : null;
}

/** `object` has every `needed` key, and no key but those and the `optional` ones. */
function hasKeys(object: JsonObject, needed: readonly string[], optional: readonly string[] = []): boolean {
  return needed.every((key) => key in object) && Object.keys(object).every((key) => needed.includes(key) || optional.includes(key));
}

/** The prefix a `^…` pattern of the portal's was made of (only syntax characters escaped), or null. */
export function literalPrefix(pattern: string): string | null {
  const found = /^\^((?:\\[\\^$.|?*+()[\]{}]|[^\\^$.|?*+()[\]{}])*)$/.exec(pattern);
  return found === null ? null : found[1]!.replace(/\\(.)/g, "$1");
}
