/**
 * A grant's options (SPEC §5.2 v1.2) in words, as the portal says them: "Only this time",
 * "Until 27/11/2026, 18:00", "Only when path starts with /home/bob/docs/". The portal's consent
 * form narrows a tool with two shapes (a string property's prefix as an escaped `^…` pattern,
 * a property's allowed `enum` values): those are read back into words; any other schema is
 * "only within limits you set". Texts come from the page (translated by the portal), with
 * the English of SPEC §12.2 when the page has none.
 */
import { isJsonObject, type Json, type JsonObject } from "@hashee/sdk";
import { when, type Texts } from "./dom.js";

const ENGLISH: Record<string, string> = {
  grant_once: "Only this time",
  grant_until: "Until %(when)s",
  grant_prefix: "Only when %(arg)s starts with %(prefix)s",
  grant_values: "Only when %(arg)s is %(value)s",
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
  const properties = isJsonObject(schema) && isJsonObject(schema["properties"]) ? schema["properties"] : null;
  const words: string[] = [];
  for (const [arg, rule] of Object.entries(properties ?? {})) {
    const prefix = isJsonObject(rule) && typeof rule["pattern"] === "string" ? literalPrefix(rule["pattern"]) : null;
    if (prefix !== null) words.push(say(texts, "grant_prefix", { arg, prefix }));
    else if (isJsonObject(rule) && Array.isArray(rule["enum"])) {
      words.push(say(texts, "grant_values", { arg, value: rule["enum"].map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join(", ") }));
    } else return [say(texts, "grant_limited", { tool })];
  }
  return words.length > 0 ? words : [say(texts, "grant_limited", { tool })];
}

/** The literal text a `^…` pattern of escaped characters only matches at the start, or null. */
export function literalPrefix(pattern: string): string | null {
  const found = /^\^((?:\\[^A-Za-z0-9]|[^\\.^$*+?()[\]{}|])*)$/.exec(pattern);
  return found === null ? null : found[1]!.replace(/\\(.)/g, "$1");
}
