/**
 * @hashee/sdk: the wire of docs/wire-spec.md at both ends, and the checks of SPEC §6 and §9.
 * This entry point runs in browsers and in Node ≥ 18 (no `node:` import).
 */
export * from "./errors.js";
export { b64decode, b64encode, b64url, b64urlDecode } from "./encoding.js";
export { canonicalize, canonicalHash, canonicalText, sha256Hex, type Json, type JsonObject } from "./canonical.js";
