/**
 * Consent signed on the user's device (SPEC §9.6; sdk/hashee_sdk/consent_statements.py).
 *
 * A **consent statement** is what one of the user's trusted devices signs, with its
 * Ed25519 key, when the user grants, re-consents or revokes: `"hashee-consent-v1\n"` + JCS
 * of exactly the fields of {@link CONSENT_FIELDS}. It travels as `{"statement": {…},
 * "signature": "<base64 raw Ed25519>"}`. The shape is strict so that one consent has one
 * set of signed bytes: `granted_scopes` sorted and without duplicates, `revoked` a boolean,
 * integers within JSON's safe range.
 */
import { canonicalize, isJsonObject, type Json, type JsonObject } from "./canonical.js";
import { KeyPair, PublicKeys, verifyEd25519 } from "./crypto.js";
import { b64decode, b64encode, concatBytes } from "./encoding.js";
import { CanonicalizationError, ConsentInvalid } from "./errors.js";
import { CONSENT_PREFIX, isKeyId, SIGNATURE_BYTES } from "./wire.js";

export const CONSENT_FIELDS = [
  "agent_id", "user_id", "granted_scopes", "grant_options", "acknowledged_manifest_version",
  "acknowledged_manifest_hash", "revoked", "seq", "ts", "device_key_id",
] as const;

export interface ConsentStatement {
  readonly agent_id: string;
  readonly user_id: string;
  readonly granted_scopes: readonly string[];
  readonly grant_options: JsonObject;
  readonly acknowledged_manifest_version: number;
  readonly acknowledged_manifest_hash: string;
  readonly revoked: boolean;
  readonly seq: number;
  readonly ts: number;
  readonly device_key_id: string;
}

export interface SignedConsent {
  readonly statement: ConsentStatement;
  readonly signature: string;
}

const HEX64 = /^[0-9a-f]{64}$/;

function isInt(value: unknown, minimum: number): boolean {
  return Number.isSafeInteger(value) && (value as number) >= minimum;
}

function sortedUnique(values: readonly string[]): boolean {
  // Python's sorted() orders by code point; a plain < on JS strings orders by UTF-16 unit,
  // which differs only outside the BMP: compare code points to agree byte for byte.
  return values.every((value, i) => i === 0 || compareCodePoints(values[i - 1] as string, value) < 0);
}

function compareCodePoints(a: string, b: string): number {
  const left = [...a].map((c) => c.codePointAt(0) as number);
  const right = [...b].map((c) => c.codePointAt(0) as number);
  for (let i = 0; i < Math.min(left.length, right.length); i += 1) {
    if (left[i] !== right[i]) return (left[i] as number) - (right[i] as number);
  }
  return left.length - right.length;
}

/** The statement with exactly the signed fields, if their types hold; throws ConsentInvalid
 * naming the first field that is wrong. */
export function checkShape(statement: unknown): ConsentStatement {
  if (!isJsonObject(statement)) throw new ConsentInvalid("a consent statement is a JSON object");
  const keys = Object.keys(statement);
  if (keys.length !== CONSENT_FIELDS.length || !CONSENT_FIELDS.every((name) => keys.includes(name))) {
    throw new ConsentInvalid(`a consent statement has exactly the fields ${CONSENT_FIELDS.join(", ")}`);
  }
  const s = statement as Record<string, unknown>;
  const scopes = s["granted_scopes"];
  const checks: Record<(typeof CONSENT_FIELDS)[number], boolean> = {
    agent_id: typeof s["agent_id"] === "string" && s["agent_id"] !== "",
    user_id: typeof s["user_id"] === "string" && s["user_id"] !== "",
    granted_scopes: Array.isArray(scopes) && scopes.every((x) => typeof x === "string" && x !== "")
      && sortedUnique(scopes as string[]),
    grant_options: isJsonObject(s["grant_options"]),
    acknowledged_manifest_version: isInt(s["acknowledged_manifest_version"], 1),
    acknowledged_manifest_hash: typeof s["acknowledged_manifest_hash"] === "string"
      && HEX64.test(s["acknowledged_manifest_hash"]),
    revoked: typeof s["revoked"] === "boolean",
    seq: isInt(s["seq"], 1),
    ts: isInt(s["ts"], 0),
    device_key_id: isKeyId(s["device_key_id"]),
  };
  const wrong = CONSENT_FIELDS.find((name) => !checks[name]);
  if (wrong !== undefined) throw new ConsentInvalid(`the consent statement's ${wrong} is not valid`);
  if (s["revoked"] === true && (scopes as string[]).length > 0) throw new ConsentInvalid("a revocation grants no scope");
  return Object.fromEntries(CONSENT_FIELDS.map((name) => [name, s[name]])) as unknown as ConsentStatement;
}

/** What a device signs for `statement` (*vector*); throws ConsentInvalid. */
export function statementBytes(statement: unknown): Uint8Array {
  const checked = checkShape(statement);
  try {
    return concatBytes(CONSENT_PREFIX, canonicalize(checked));
  } catch (error) {
    if (error instanceof CanonicalizationError) {
      throw new ConsentInvalid(`the consent statement is not RFC 8785 JSON: ${error.message}`);
    }
    throw error;
  }
}

export interface ConsentFields {
  readonly agentId: string;
  readonly userId: string;
  readonly grantedScopes: Iterable<string>;
  readonly acknowledgedManifestVersion: number;
  readonly acknowledgedManifestHash: string;
  readonly seq: number;
  readonly ts: number;
  readonly grantOptions?: { readonly [key: string]: Json };
  readonly revoked?: boolean;
}

/** `{statement, signature}`: the consent the user gave, signed by this device. */
export function signConsent(device: KeyPair, fields: ConsentFields): SignedConsent {
  const statement: ConsentStatement = {
    agent_id: String(fields.agentId), user_id: String(fields.userId),
    granted_scopes: [...new Set(fields.grantedScopes)].sort(compareCodePoints),
    grant_options: { ...(fields.grantOptions ?? {}) },
    acknowledged_manifest_version: fields.acknowledgedManifestVersion,
    acknowledged_manifest_hash: fields.acknowledgedManifestHash, revoked: fields.revoked ?? false,
    seq: fields.seq, ts: fields.ts, device_key_id: device.keyId,
  };
  return { statement, signature: b64encode(device.sign(statementBytes(statement))) };
}

/** The statement of `signed` once its signature verifies with the device it names, looked
 * up in `devices` (the user's trusted devices only). Throws ConsentInvalid. */
export function verifyConsent(signed: unknown, devices: ReadonlyMap<string, PublicKeys>): ConsentStatement {
  if (!isJsonObject(signed) || Object.keys(signed).length !== 2 || !("statement" in signed) || !("signature" in signed)) {
    throw new ConsentInvalid('a signed consent is {"statement", "signature"}');
  }
  const bytes = statementBytes(signed["statement"]);
  const statement = checkShape(signed["statement"]);
  const device = devices.get(statement.device_key_id);
  if (device === undefined) throw new ConsentInvalid("the consent statement is not signed by a trusted device of the user");
  let signature: Uint8Array;
  try {
    signature = typeof signed["signature"] === "string" ? b64decode(signed["signature"]) : new Uint8Array();
  } catch {
    signature = new Uint8Array();
  }
  if (signature.length !== SIGNATURE_BYTES || !verifyEd25519(signature, bytes, device.ed25519)) {
    throw new ConsentInvalid("the consent statement's signature does not verify");
  }
  return statement;
}
