/**
 * RFC 8785 (JCS) canonical JSON, as bytes, and the SHA-256 content hash of the platform.
 *
 * The `canonicalize` library writes the bytes; this module first makes sure the value is
 * plain JSON, because the library silently drops `undefined` members (the bytes signed
 * would then differ from the object the caller holds) and writes integers beyond
 * ±(2^53 − 1), which the Python side refuses, in exponent form.
 */
import canonicalizeJson from "canonicalize";
import { sha256 } from "@noble/hashes/sha2";
import { CanonicalizationError } from "./errors.js";
import { fromUtf8, hex, utf8 } from "./encoding.js";

export type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };
export type JsonObject = { readonly [key: string]: Json };

const MAX_DEPTH = 64;

/** The RFC 8785 bytes of `value`; throws CanonicalizationError. */
export function canonicalize(value: unknown): Uint8Array {
  const problem = jsonProblem(value, "", 0);
  if (problem !== undefined) throw new CanonicalizationError(problem);
  try {
    return utf8(canonicalizeJson(value) as string);
  } catch (error) {
    throw new CanonicalizationError(`the value cannot be canonicalized: ${(error as Error).message}`);
  }
}

/** The RFC 8785 text of `value`; throws CanonicalizationError. */
export function canonicalText(value: unknown): string {
  return fromUtf8(canonicalize(value));
}

/** Lowercase hex SHA-256 of `data`. */
export function sha256Hex(data: Uint8Array): string {
  return hex(sha256(data));
}

/** Lowercase hex SHA-256 of the RFC 8785 bytes of `value` (a manifest's hash). */
export function canonicalHash(value: unknown): string {
  return sha256Hex(canonicalize(value));
}

/** Whether `value` is a JSON object (not an array, not null). */
export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function jsonProblem(value: unknown, path: string, depth: number): string | undefined {
  if (depth > MAX_DEPTH) return `the value is nested too deeply (at ${path || "/"})`;
  if (value === null || typeof value === "boolean" || typeof value === "string") return undefined;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return `the number ${value} is not finite (at ${path || "/"})`;
    if (Number.isInteger(value) && !Number.isSafeInteger(value)) {
      return `the integer is outside ±(2^53 - 1) (at ${path || "/"})`;
    }
    return undefined;
  }
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const problem = jsonProblem(item, `${path}/${i}`, depth + 1);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }
  if (typeof value === "object" && isPlainObject(value)) {
    for (const [key, item] of Object.entries(value)) {
      const problem = jsonProblem(item, `${path}/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`, depth + 1);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }
  return `the type ${typeof value} is not a JSON type (at ${path || "/"})`;
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}
