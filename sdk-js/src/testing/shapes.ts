/**
 * Lies by shape (STYLE.md: "test the shape of a lie, not only the lies an issue names";
 * tests/sdk_trust/shapes.py in TypeScript).
 *
 * Every answer an SDK reads from the server is a JSON tree; a lie rewrites one place of it in
 * one of a few ways: drops it, sets it to null, 0 or empty, swaps in another party's value,
 * or replays what the server answered earlier. {@link lies} enumerates them for an answer
 * (`honest`) and the same answer as the server gave it before (`older`).
 */
import { canonicalHash } from "../canonical.js";
import { KeyPair } from "../crypto.js";

/** The place is dropped (or, for `older`, was not there). */
export const MISSING: unique symbol = Symbol("missing");
export type Missing = typeof MISSING;
export type Pointer = readonly (string | number)[];
export type LieKind = "dropped" | "null" | "zero" | "empty" | "swapped" | "replayed";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const HEX64 = /^[0-9a-f]{64}$/;
const KEY_ID = /^k_[0-9a-f]{32}$/;
const MALLORY = KeyPair.generate();
const OTHER_UUID = "7d1f4f0e-9999-4a4a-9b9b-00000000abcd";
/** Trees the hash or a signature covers whole: a lie inside them is a lie about the whole. */
export const OPAQUE: ReadonlySet<string> = new Set(["capability_manifest", "manifest", "statement"]);
export const MAX_DEPTH = 4;
const STATUS_SWAP: Record<string, string> = { active: "revoked", revoked: "active", reauth_required: "active" };

const copy = <T>(value: T): T => (value === undefined ? value : JSON.parse(JSON.stringify(value)) as T);
const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

export class Lie {
  constructor(readonly pointer: Pointer, readonly kind: LieKind, readonly value: unknown) {}

  toString(): string {
    return `/${this.pointer.join("/")} ${this.kind}`;
  }

  /** Whether this is the lie `pointer` and `kind` name (keys differ from scene to scene). */
  is(pointer: Pointer, kind: LieKind): boolean {
    return this.kind === kind && JSON.stringify(this.pointer) === JSON.stringify(pointer);
  }

  /** The answer with the lie told (a copy). */
  apply(body: unknown): unknown {
    if (this.pointer.length === 0) return this.value === MISSING ? null : copy(this.value);
    const changed: any = copy(body);
    let parent = changed;
    for (const step of this.pointer.slice(0, -1)) parent = parent[step];
    const last = this.pointer[this.pointer.length - 1]!;
    if (this.value !== MISSING) parent[last] = copy(this.value);
    else if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last];
    return changed;
  }
}

/** Every place of `tree` (the root included), down to MAX_DEPTH, not inside an OPAQUE tree. */
export function* places(tree: unknown, pointer: Pointer = []): Generator<[Pointer, unknown]> {
  yield [pointer, tree];
  const last = pointer[pointer.length - 1];
  if (pointer.length >= MAX_DEPTH || (typeof last === "string" && OPAQUE.has(last))) return;
  if (Array.isArray(tree)) {
    for (const [index, value] of tree.entries()) yield* places(value, [...pointer, index]);
  } else if (isObject(tree)) {
    for (const [key, value] of Object.entries(tree)) yield* places(value, [...pointer, key]);
  }
}

function at(tree: unknown, pointer: Pointer): unknown {
  let here: any = tree;
  for (const step of pointer) {
    if (here === null || typeof here !== "object" || !Object.prototype.hasOwnProperty.call(here, step)) return MISSING;
    here = here[step];
  }
  return here;
}

/** Another party's value of the same shape, where one can be made up. */
function other(value: unknown): unknown {
  if (typeof value === "boolean") return !value;
  if (typeof value === "number") return Number.isInteger(value) ? value + 1 : MISSING;
  if (typeof value !== "string") return MISSING;
  if (UUID.test(value)) return OTHER_UUID;
  if (HEX64.test(value)) return canonicalHash({ another: "manifest" });
  if (KEY_ID.test(value)) return MALLORY.keyId;
  if (value.length === 44 && value.endsWith("=")) return MALLORY.public.asApi().ed25519_public;
  return STATUS_SWAP[value] ?? `${value}-mallory`;
}

function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]));
  }
  if (!isObject(a) || !isObject(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.prototype.hasOwnProperty.call(b, k) && same(a[k], b[k]));
}

/** Every one-place rewrite of `honest` (an answer of the server) that differs from it. */
export function lies(honest: unknown, older: unknown = MISSING): Lie[] {
  const found: Lie[] = [];
  for (const [pointer, value] of places(honest)) {
    const candidates: [LieKind, unknown][] = [["dropped", MISSING], ["null", null], ["zero", 0]];
    if (typeof value === "string") candidates.push(["empty", ""]);
    else if (Array.isArray(value)) candidates.push(["empty", []]);
    else if (isObject(value)) candidates.push(["empty", {}]);
    candidates.push(["swapped", other(value)]);
    if (older !== MISSING) candidates.push(["replayed", at(older, pointer)]);
    for (const [kind, replacement] of candidates) {
      if (replacement === MISSING && (kind !== "dropped" || pointer.length === 0)) continue;
      if (replacement !== MISSING && same(replacement, value)) continue;
      found.push(new Lie(pointer, kind, replacement));
    }
  }
  return found;
}
