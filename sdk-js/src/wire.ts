/**
 * The wire format shared with the server's key directory and the Python SDK
 * (docs/wire-spec.md §1–§3, sdk/hashee_sdk/wire.py): constants, key ids, and the refusal of
 * public keys of small order.
 */
import { ed25519, x25519 } from "@noble/curves/ed25519";
import { sha256 } from "@noble/hashes/sha2";
import { b64decode, concatBytes, hex, utf8 } from "./encoding.js";

export const ENVELOPE_ALG = "x25519-xsalsa20poly1305+ed25519";
export const ENVELOPE_CONTENT_TYPE = "application/vnd.hashee.e2ee+json";
export const AGENT_TO_USER = "agent_to_user";
export const USER_TO_AGENT = "user_to_agent";
export const DIRECTIONS = [AGENT_TO_USER, USER_TO_AGENT] as const;
export type Direction = (typeof DIRECTIONS)[number];
export const PUBLIC_KEY_BYTES = 32;
export const SIGNATURE_BYTES = 64;
export const NONCE_BYTES = 24;
export const DEVICE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const KEY_ID_PATTERN = /^k_[0-9a-f]{32}$/;

// Domain-separation prefixes of every signed statement (docs/wire-spec.md §3).
export const ENVELOPE_V2_PREFIX = utf8("hashee-envelope-v2\n");
export const DEVICE_APPROVAL_PREFIX = utf8("hashee-device-approval-v1\n");
export const RUNTIME_KEY_PREFIX = utf8("hashee-agent-runtime-key-v1\n");
export const CONSENT_PREFIX = utf8("hashee-consent-v1\n");
const KEY_ID_DOMAIN = utf8("hashee-key-v1");
const REPLY_KEY_DOMAIN = utf8("hashee-reply-key-v1");

// Any scalar will do: X25519 clamps it to a multiple of the cofactor 8, so its product with
// a point of small order is the identity (all zero), which libsodium refuses too.
const PROBE_SCALAR = concatBytes(Uint8Array.of(9), new Uint8Array(31));

/** The key id of a pair of raw public keys: it names both, so it cannot be claimed for others. */
export function keyIdFor(x25519Public: Uint8Array, ed25519Public: Uint8Array): string {
  return "k_" + hex(sha256(concatBytes(KEY_ID_DOMAIN, x25519Public, ed25519Public)).subarray(0, 16));
}

/** The id of a per-call reply key (only its X25519 half exists). */
export function replyKeyId(x25519Public: Uint8Array): string {
  return "r_" + hex(sha256(concatBytes(REPLY_KEY_DOMAIN, x25519Public)).subarray(0, 16));
}

/** The 32 raw bytes of a base64 public key; throws RangeError. */
export function publicKeyBytes(text: unknown): Uint8Array {
  const raw = b64decode(text);
  if (raw.length !== PUBLIC_KEY_BYTES) throw new RangeError(`expected ${PUBLIC_KEY_BYTES} bytes, got ${raw.length}`);
  return raw;
}

/** `raw` if it is an X25519 public key of large order; throws RangeError for the points of
 * small order, which would make a shared secret that anyone knows. */
export function checkedX25519(raw: Uint8Array): Uint8Array {
  if (raw.length !== PUBLIC_KEY_BYTES) throw new RangeError(`expected ${PUBLIC_KEY_BYTES} bytes, got ${raw.length}`);
  let product: Uint8Array;
  try {
    product = x25519.scalarMult(PROBE_SCALAR, raw);
  } catch {
    throw new RangeError("an X25519 key of small order is refused");
  }
  if (product.every((byte) => byte === 0)) throw new RangeError("an X25519 key of small order is refused");
  return raw;
}

/** `raw` if it is the canonical encoding of an Ed25519 point of large order; throws RangeError
 * (a key of small order would let one signature verify for many messages, SPEC §9.1). */
export function checkedEd25519(raw: Uint8Array): Uint8Array {
  if (raw.length !== PUBLIC_KEY_BYTES) throw new RangeError(`expected ${PUBLIC_KEY_BYTES} bytes, got ${raw.length}`);
  let smallOrder: boolean;
  try {
    smallOrder = ed25519.Point.fromBytes(raw, false).isSmallOrder();
  } catch {
    throw new RangeError("not an Ed25519 public key");
  }
  if (smallOrder) throw new RangeError("an Ed25519 key of small order is refused");
  return raw;
}

export function isDeviceId(text: unknown): text is string {
  return typeof text === "string" && DEVICE_ID_PATTERN.test(text);
}

export function isKeyId(text: unknown): text is string {
  return typeof text === "string" && KEY_ID_PATTERN.test(text);
}
