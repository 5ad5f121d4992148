/**
 * The end-to-end envelope, version 2 (docs/wire-spec.md §4; sdk/hashee_sdk/envelope.py).
 *
 * One copy per recipient key. Each copy is encrypted from a fresh X25519 key (no long-term
 * key of the sender ever encrypts, so a stolen one opens nothing stored) and carries,
 * inside the ciphertext, the sender's Ed25519 signature over
 * `"hashee-envelope-v2\n" + JCS(body)`, where the body binds the relation, the direction,
 * both key ids and the ephemeral key. {@link openCopy} refuses, with a typed EnvelopeError,
 * anything not for us, not decrypting, not signed by a trusted sender, not canonical, or
 * signed for another context.
 */
import nacl from "tweetnacl";
import { x25519 } from "@noble/curves/ed25519";
import { randomBytes } from "@noble/hashes/utils";
import { canonicalize, canonicalText, isJsonObject, type JsonObject } from "./canonical.js";
import { KeyPair, PublicKeys, verifyEd25519, verifyEd25519Async, x25519PublicAsync, x25519SharedAsync } from "./crypto.js";
import { b64decode, b64encode, concatBytes, fromUtf8, startsWith, utf8 } from "./encoding.js";
import {
  BadSignature, CanonicalizationError, DecryptionFailed, MalformedEnvelope, UnknownSender, WrongContext,
  WrongRecipient,
} from "./errors.js";
import {
  checkedX25519, DIRECTIONS, ENVELOPE_ALG, ENVELOPE_V2_PREFIX, NONCE_BYTES, publicKeyBytes, replyKeyId,
  SIGNATURE_BYTES, type Direction,
} from "./wire.js";

export const VERSION = 2;
export const MAX_COPIES = 32;
const FIELDS = ["alg", "copies", "sender_key_id", "v"];
const COPY_FIELDS = ["ciphertext", "ephemeral_public", "nonce", "recipient_key_id"];

export interface EnvelopeCopy {
  readonly recipient_key_id: string;
  readonly ephemeral_public: string;
  readonly nonce: string;
  readonly ciphertext: string;
}

export interface Envelope {
  readonly v: 2;
  readonly alg: typeof ENVELOPE_ALG;
  readonly sender_key_id: string;
  readonly copies: readonly EnvelopeCopy[];
}

/** Whom a copy is for: a published key pair's id and X25519 key, or a reply key. */
export class Recipient {
  constructor(readonly keyId: string, readonly x25519: Uint8Array) {}

  static of(keys: PublicKeys): Recipient {
    return new Recipient(keys.keyId, keys.x25519);
  }

  static reply(replyPublic: Uint8Array): Recipient {
    return new Recipient(replyKeyId(replyPublic), replyPublic);
  }
}

/** A verified copy: what the sender signed, when, and with which key. */
export interface OpenedCopy {
  readonly artifact: JsonObject;
  readonly senderKeyId: string;
  readonly signedAtMs: number;
}

export interface SealOptions {
  readonly sender: KeyPair;
  readonly recipients: readonly Recipient[];
  readonly relationId: string;
  readonly direction: Direction;
  readonly nowMs: number;
}

export interface OpenOptions {
  readonly recipientKeyId: string;
  /** The private X25519 key of the recipient (a key pair's `boxKey`, or a reply key's). */
  readonly recipientX25519: Uint8Array;
  /** The trusted keys of the other party, by key id. */
  readonly senders: ReadonlyMap<string, PublicKeys>;
  readonly relationId: string;
  readonly direction: Direction;
}

/** The bytes an envelope body's signature covers (*vector*). */
export function signedBytes(body: JsonObject): Uint8Array {
  return concatBytes(ENVELOPE_V2_PREFIX, canonicalize(body));
}

/** The envelope of `artifact`, one copy per recipient. Throws CanonicalizationError if the
 * artifact is not JSON RFC 8785 can write, RangeError for a bad direction or recipient list. */
export function seal(artifact: JsonObject, options: SealOptions): Envelope {
  const { sender, recipients, relationId, direction, nowMs } = options;
  if (!DIRECTIONS.includes(direction)) throw new RangeError(`unknown direction ${String(direction)}`);
  if (recipients.length === 0 || recipients.length > MAX_COPIES) {
    throw new RangeError(`an envelope has 1 to ${MAX_COPIES} recipients`);
  }
  const copies = recipients.map((recipient) => sealCopy(artifact, {
    sender, recipient, relationId, direction, nowMs, ephemeral: randomBytes(32), nonce: randomBytes(NONCE_BYTES),
  }));
  return { v: VERSION, alg: ENVELOPE_ALG, sender_key_id: sender.keyId, copies };
}

/** One copy, with the randomness given ({@link seal} draws it; test vectors fix it). */
export function sealCopy(artifact: JsonObject, options: {
  readonly sender: KeyPair; readonly recipient: Recipient; readonly relationId: string;
  readonly direction: Direction; readonly nowMs: number; readonly ephemeral: Uint8Array; readonly nonce: Uint8Array;
}): EnvelopeCopy {
  const { sender, recipient, ephemeral, nonce } = options;
  const ephemeralPublic = b64encode(x25519.getPublicKey(ephemeral));
  const body = {
    v: VERSION, relation_id: String(options.relationId), direction: options.direction, sender_key_id: sender.keyId,
    recipient_key_id: recipient.keyId, ephemeral_public: ephemeralPublic, ts: Math.trunc(options.nowMs), artifact,
  };
  const signed = signedBytes(body);
  const ciphertext = nacl.box(concatBytes(sender.sign(signed), signed), nonce, checkedX25519(recipient.x25519),
    ephemeral);
  return {
    recipient_key_id: recipient.keyId, ephemeral_public: ephemeralPublic, nonce: b64encode(nonce),
    ciphertext: b64encode(ciphertext),
  };
}

/** {@link seal} on the platform's X25519 and Ed25519 (WebCrypto) where it has them: the same
 * envelope's shape and the same errors (the device's replies). */
export async function sealAsync(artifact: JsonObject, options: SealOptions): Promise<Envelope> {
  const { sender, recipients, relationId, direction, nowMs } = options;
  if (!DIRECTIONS.includes(direction)) throw new RangeError(`unknown direction ${String(direction)}`);
  if (recipients.length === 0 || recipients.length > MAX_COPIES) {
    throw new RangeError(`an envelope has 1 to ${MAX_COPIES} recipients`);
  }
  const copies = await Promise.all(recipients.map(async (recipient): Promise<EnvelopeCopy> => {
    const ephemeral = randomBytes(32);
    const nonce = randomBytes(NONCE_BYTES);
    const ephemeralPublic = b64encode(await x25519PublicAsync(ephemeral));
    const signed = signedBytes({ v: VERSION, relation_id: String(relationId), direction, sender_key_id: sender.keyId,
      recipient_key_id: recipient.keyId, ephemeral_public: ephemeralPublic, ts: Math.trunc(nowMs), artifact });
    const signature = await sender.signAsync(signed);
    const shared = await x25519SharedAsync(ephemeral, recipient.x25519);
    if (shared === null) throw new RangeError("an X25519 key of small order is refused");
    const ciphertext = nacl.secretbox(concatBytes(signature, signed), nonce, boxKey(shared)); // = crypto_box
    return { recipient_key_id: recipient.keyId, ephemeral_public: ephemeralPublic, nonce: b64encode(nonce), ciphertext: b64encode(ciphertext) };
  }));
  return { v: VERSION, alg: ENVELOPE_ALG, sender_key_id: sender.keyId, copies };
}

/** The key id the envelope claims to be signed by (checked by {@link openCopy}). */
export function senderKeyId(envelope: unknown): string {
  return checkShape(envelope).sender_key_id;
}

/** Decrypt and verify the copy addressed to `recipientKeyId`, signed by one of `senders`.
 * Throws an EnvelopeError. */
export function openCopy(envelope: unknown, options: OpenOptions): OpenedCopy {
  const { checked, copy, sender } = addressed(envelope, options);
  const { ephemeral, nonce, ciphertext } = copyParts(copy);
  checkEphemeral(ephemeral);
  const plaintext = nacl.box.open(ciphertext, nonce, ephemeral, options.recipientX25519);
  if (plaintext === null) throw new DecryptionFailed("the ciphertext does not decrypt");
  const [signature, signed] = split(plaintext);
  if (!verifyEd25519(signature, signed, sender.ed25519)) throw new BadSignature("the signature does not verify");
  return verified(checked, copy, signed, options);
}

/** {@link openCopy} on the platform's own X25519 and Ed25519 (WebCrypto) where it has them: the
 * same checks in the same order, the same errors, several times faster (the device's path). */
export async function openCopyAsync(envelope: unknown, options: OpenOptions): Promise<OpenedCopy> {
  const { checked, copy, sender } = addressed(envelope, options);
  const { ephemeral, nonce, ciphertext } = copyParts(copy);
  const shared = await x25519SharedAsync(options.recipientX25519, ephemeral); // null: small order
  if (shared === null) throw new MalformedEnvelope("a copy's key, nonce or ciphertext is malformed: an X25519 key of small order is refused");
  const plaintext = nacl.secretbox.open(ciphertext, nonce, boxKey(shared)); // = crypto_box_open
  if (plaintext === null) throw new DecryptionFailed("the ciphertext does not decrypt");
  const [signature, signed] = split(plaintext);
  if (!(await verifyEd25519Async(signature, signed, sender.ed25519))) throw new BadSignature("the signature does not verify");
  return verified(checked, copy, signed, options);
}

const SIGMA = utf8("expand 32-byte k"); // Salsa20's constant, as NaCl's crypto_box_beforenm uses it

/** crypto_box's key: HSalsa20 of the X25519 secret (NaCl's crypto_box_beforenm, after the scalar multiplication). */
function boxKey(shared: Uint8Array): Uint8Array {
  const key = new Uint8Array(32);
  (nacl as unknown as { lowlevel: { crypto_core_hsalsa20(out: Uint8Array, inp: Uint8Array, k: Uint8Array, c: Uint8Array): void } })
    .lowlevel.crypto_core_hsalsa20(key, new Uint8Array(16), shared, SIGMA);
  return key;
}

/** The copy for us and its trusted sender; throws MalformedEnvelope, WrongRecipient, UnknownSender. */
function addressed(envelope: unknown, options: OpenOptions): { checked: Envelope; copy: EnvelopeCopy; sender: PublicKeys } {
  const checked = checkShape(envelope);
  const copy = checked.copies.find((c) => c.recipient_key_id === options.recipientKeyId);
  if (copy === undefined) throw new WrongRecipient("no copy of this envelope is addressed to this key");
  const sender = options.senders.get(checked.sender_key_id);
  if (sender === undefined) throw new UnknownSender("the sender key is not a trusted key of the other party");
  return { checked, copy, sender };
}

function split(plaintext: Uint8Array): [Uint8Array, Uint8Array] {
  if (plaintext.length <= SIGNATURE_BYTES) throw new DecryptionFailed("the plaintext is too short");
  return [plaintext.subarray(0, SIGNATURE_BYTES), plaintext.subarray(SIGNATURE_BYTES)];
}

/** The signed body, canonical and signed for this relation, direction and pair of keys. */
function verified(checked: Envelope, copy: EnvelopeCopy, signed: Uint8Array, options: OpenOptions): OpenedCopy {
  const body = canonicalBody(signed);
  const expected: Record<string, unknown> = {
    v: VERSION, relation_id: String(options.relationId), direction: options.direction,
    sender_key_id: checked.sender_key_id, recipient_key_id: options.recipientKeyId,
    ephemeral_public: copy.ephemeral_public,
  };
  const wrong = Object.keys(expected).filter((name) => body[name] !== expected[name]).sort();
  if (wrong.length > 0) throw new WrongContext(`signed for another ${wrong.join(", ")}`);
  return { artifact: body["artifact"] as JsonObject, senderKeyId: checked.sender_key_id, signedAtMs: body["ts"] as number };
}

function hasExactly(value: object, fields: readonly string[]): boolean {
  const keys = Object.keys(value).sort();
  return keys.length === fields.length && keys.every((key, i) => key === fields[i]);
}

function checkShape(envelope: unknown): Envelope {
  if (!isJsonObject(envelope) || !hasExactly(envelope, FIELDS)) throw new MalformedEnvelope("not a version 2 envelope");
  if (envelope["v"] !== VERSION || envelope["alg"] !== ENVELOPE_ALG) {
    throw new MalformedEnvelope("unsupported envelope version or algorithm");
  }
  const copies = envelope["copies"];
  if (typeof envelope["sender_key_id"] !== "string" || !Array.isArray(copies)) {
    throw new MalformedEnvelope("bad sender or copies");
  }
  if (copies.length === 0 || copies.length > MAX_COPIES) throw new MalformedEnvelope("bad number of copies");
  for (const copy of copies) {
    if (!isJsonObject(copy) || !hasExactly(copy, COPY_FIELDS) || !Object.values(copy).every((v) => typeof v === "string")) {
      throw new MalformedEnvelope("a copy is malformed");
    }
  }
  return envelope as unknown as Envelope;
}

function copyParts(copy: EnvelopeCopy): { ephemeral: Uint8Array; nonce: Uint8Array; ciphertext: Uint8Array } {
  let parts;
  try {
    parts = { ephemeral: publicKeyBytes(copy.ephemeral_public), nonce: b64decode(copy.nonce), ciphertext: b64decode(copy.ciphertext) };
  } catch (error) {
    throw new MalformedEnvelope(`a copy's key, nonce or ciphertext is malformed: ${(error as Error).message}`);
  }
  if (parts.nonce.length !== NONCE_BYTES) throw new MalformedEnvelope("bad nonce length");
  return parts;
}

function checkEphemeral(ephemeral: Uint8Array): void {
  try {
    checkedX25519(ephemeral);
  } catch (error) {
    throw new MalformedEnvelope(`a copy's key, nonce or ciphertext is malformed: ${(error as Error).message}`);
  }
}

function canonicalBody(signed: Uint8Array): Record<string, unknown> {
  if (!startsWith(signed, ENVELOPE_V2_PREFIX)) throw new WrongContext("signed for another purpose (domain prefix)");
  let body: unknown;
  let canonical: boolean;
  try {
    const text = fromUtf8(signed.subarray(ENVELOPE_V2_PREFIX.length));
    body = JSON.parse(text);
    canonical = canonicalText(body) === text;
  } catch (error) {
    if (error instanceof CanonicalizationError || error instanceof SyntaxError || error instanceof TypeError) {
      throw new MalformedEnvelope("the signed content is not JSON");
    }
    throw error;
  }
  if (!canonical) throw new MalformedEnvelope("the signed content is not canonical (RFC 8785)");
  if (!isJsonObject(body) || !isJsonObject(body["artifact"]) || !Number.isSafeInteger(body["ts"])) {
    throw new MalformedEnvelope("the signed content has no artifact or timestamp");
  }
  return body;
}
