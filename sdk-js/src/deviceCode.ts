/**
 * A device's verification code (docs/wire-spec.md §5; sdk/hashee_sdk/statements.py
 * `device_verification_code`): what the new device and the approving device both show, so
 * that the person approving sees that the key they sign for is the one on the other screen.
 *
 * The first 12 digits of the §5 fingerprint of X25519 ‖ Ed25519 (both keys, as the key id
 * names both: a server that swapped only the encryption key would read every call) with
 * stable id `"device:" + deviceId`, in three groups of four.
 *
 * Added by the browser device page (branch webdevice) in a file of its own; the SDK's owner
 * may move it into statements.ts and export it from index.ts.
 */
import type { PublicKeys } from "./crypto.js";
import { concatBytes } from "./encoding.js";
import { fingerprint } from "./statements.js";

export function deviceVerificationCode(keys: PublicKeys, deviceId: string): string {
  const digits = fingerprint(concatBytes(keys.x25519, keys.ed25519), `device:${deviceId}`).slice(0, 12);
  return `${digits.slice(0, 4)} ${digits.slice(4, 8)} ${digits.slice(8, 12)}`;
}
