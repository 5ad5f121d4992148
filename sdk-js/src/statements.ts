/**
 * Signed statements about keys, and safety numbers (docs/wire-spec.md §3, §5;
 * sdk/hashee_sdk/statements.py).
 *
 * * A **device approval**: an approved device signs, with its Ed25519 key,
 *   `"hashee-device-approval-v1\n" + JCS({approver_key_id, device_id, key_id})`, so the
 *   server cannot add a device to a user without one of the user's devices.
 * * A **runtime-key statement**: what an agent's identity key signs (a detached JWS) to
 *   vouch for one of its runtime keys.
 * * A **safety number**: two 30-digit fingerprints, one per party, that two people compare.
 */
import { sha512 } from "@noble/hashes/sha2";
import { canonicalize } from "./canonical.js";
import { KeyPair, PublicKeys, verifyEd25519 } from "./crypto.js";
import { b64decode, b64encode, concatBytes, utf8 } from "./encoding.js";
import { InvalidKeyError, InvalidSignatureError } from "./errors.js";
import { jwkThumbprint, signDetached, verifyDetached, type PrivateJwk } from "./jose.js";
import { DEVICE_APPROVAL_PREFIX, RUNTIME_KEY_PREFIX } from "./wire.js";

export const FINGERPRINT_ITERATIONS = 5200;
const FINGERPRINT_VERSION = Uint8Array.of(0, 0);

export interface DeviceApprovalFields {
  readonly approverKeyId: string;
  readonly deviceId: string;
  readonly keyId: string;
}

/** What an approving device signs (*vector*). */
export function deviceApprovalBytes({ approverKeyId, deviceId, keyId }: DeviceApprovalFields): Uint8Array {
  return concatBytes(DEVICE_APPROVAL_PREFIX,
    canonicalize({ approver_key_id: approverKeyId, device_id: deviceId, key_id: keyId }));
}

/** The approval, base64, of a new device's key by an approved device of the same user. */
export function approveDevice(approver: KeyPair, device: { deviceId: string; keyId: string }): string {
  return b64encode(approver.sign(deviceApprovalBytes({ approverKeyId: approver.keyId, ...device })));
}

/** True when `approval` is `approver`'s signature of this device's key. */
export function deviceApprovalValid(approval: unknown, approver: PublicKeys,
  device: { deviceId: string; keyId: string }): boolean {
  try {
    const signed = deviceApprovalBytes({ approverKeyId: approver.keyId, ...device });
    return verifyEd25519(b64decode(approval), signed, approver.ed25519);
  } catch {
    return false;
  }
}

/** The payload an agent's identity key signs for one of its runtime keys (*vector*). */
export function runtimeKeyBytes({ agentId, keyId }: { agentId: string; keyId: string }): Uint8Array {
  return concatBytes(RUNTIME_KEY_PREFIX, canonicalize({ agent_id: String(agentId), key_id: keyId }));
}

/** The identity's detached JWS vouching for one runtime key of the agent. */
export function signRuntimeKey(identity: PrivateJwk, fields: { agentId: string; keyId: string }): string {
  return signDetached(runtimeKeyBytes(fields), identity);
}

/** True when `signature` is the identity's vouching for this agent's runtime key. */
export function runtimeKeyVouched(signature: unknown, identityJwk: unknown,
  fields: { agentId: string; keyId: string }): boolean {
  if (typeof signature !== "string" || signature === "") return false;
  try {
    verifyDetached(signature, runtimeKeyBytes(fields), identityJwk, jwkThumbprint(identityJwk));
    return true;
  } catch (error) {
    if (error instanceof InvalidSignatureError || error instanceof InvalidKeyError) return false;
    throw error;
  }
}

/** One party's 30 digits: an iterated SHA-512 of its Ed25519 key, as Signal computes its
 * safety numbers (slow on purpose: a look-alike key is costly to search for). */
export function fingerprint(publicKey: Uint8Array, stableId: string): string {
  let digest = sha512(concatBytes(FINGERPRINT_VERSION, publicKey, utf8(stableId)));
  for (let i = 0; i < FINGERPRINT_ITERATIONS; i += 1) digest = sha512(concatBytes(digest, publicKey));
  let digits = "";
  for (let i = 0; i < 30; i += 5) {
    // five bytes are 40 bits: exact in a double, so no BigInt is needed
    const value = digest.subarray(i, i + 5).reduce((acc, byte) => acc * 256 + byte, 0);
    digits += String(value % 100000).padStart(5, "0");
  }
  return digits;
}

/** The 60-digit safety number of a relation: both fingerprints, the smaller first, in
 * twelve groups of five separated by spaces. */
/** Whether two safety numbers are the same digits, however grouped or spaced (statements.same_safety_number). */
export function sameSafetyNumber(shown: string, compared: string): boolean {
  const digits = (number: string): string => number.replace(/[^0-9]/g, "");
  return digits(shown) !== "" && digits(shown) === digits(compared);
}

export function safetyNumber({ agentId, agentIdentity, userRootDevice }: {
  agentId: string; agentIdentity: Uint8Array; userRootDevice: Uint8Array;
}): string {
  const halves = [fingerprint(agentIdentity, `agent:${agentId}`), fingerprint(userRootDevice, "user")].sort();
  return (halves.join("").match(/.{5}/g) ?? []).join(" ");
}
