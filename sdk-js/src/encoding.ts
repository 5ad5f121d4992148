/**
 * The encodings of docs/wire-spec.md §1, strict in both directions: standard base64 with
 * padding for raw keys, nonces, ciphertexts and raw signatures; base64url without padding
 * for everything JOSE. Built on atob/btoa, which browsers and Node ≥ 16 both have.
 */

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const BASE64URL = /^[A-Za-z0-9_-]*$/;

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** The text of UTF-8 bytes; throws TypeError on bytes that are not UTF-8. */
export function fromUtf8(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

export function b64encode(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/** Strict standard base64 with padding (as Python's `b64decode(validate=True)`); throws RangeError. */
export function b64decode(text: unknown): Uint8Array {
  if (typeof text !== "string" || !BASE64.test(text)) throw new RangeError("not standard base64");
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** base64url without padding (RFC 7515 §2). */
export function b64url(bytes: Uint8Array): string {
  return b64encode(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The strict inverse of {@link b64url}: no padding, no foreign character, no stray trailing bits. */
export function b64urlDecode(text: unknown): Uint8Array {
  if (typeof text !== "string" || !BASE64URL.test(text) || text.length % 4 === 1) {
    throw new RangeError("not base64url without padding");
  }
  const standard = text.replace(/-/g, "+").replace(/_/g, "/");
  const bytes = b64decode(standard + "=".repeat((4 - (standard.length % 4)) % 4));
  if (b64url(bytes) !== text) throw new RangeError("not canonical base64url");
  return bytes;
}

export function hex(bytes: Uint8Array): string {
  let out = "";
  for (const byte of bytes) out += byte.toString(16).padStart(2, "0");
  return out;
}

export function concatBytes(...parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** Equality of two byte strings; not constant-time (for public data and tests only). */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

export function startsWith(bytes: Uint8Array, prefix: Uint8Array): boolean {
  return bytes.length >= prefix.length && equalBytes(bytes.subarray(0, prefix.length), prefix);
}
