/**
 * Key pairs: an X25519 key (encryption) and an Ed25519 key (signatures), and their public
 * halves as the key directory publishes them (docs/wire-spec.md §2;
 * sdk/hashee_sdk/crypto.py). The envelope that uses them is ./envelope.ts.
 */
import { ed25519, x25519 } from "@noble/curves/ed25519";
import { randomBytes } from "@noble/hashes/utils";
import { b64decode, b64encode } from "./encoding.js";
import { InvalidPublicKey } from "./errors.js";
import { checkedEd25519, checkedX25519, keyIdFor, publicKeyBytes } from "./wire.js";

/** A key as the key directory publishes it. */
export interface ApiPublicKeys {
  readonly key_id?: string;
  readonly x25519_public: string;
  readonly ed25519_public: string;
}

/** The secret halves, base64, as a store keeps them (never sent anywhere). */
export interface KeyPairSecret {
  readonly x25519_private: string;
  readonly ed25519_seed: string;
}

/** The public half of a key pair. */
export class PublicKeys {
  private constructor(
    readonly keyId: string,
    readonly x25519: Uint8Array,
    readonly ed25519: Uint8Array,
  ) {}

  static fromRaw(x25519Public: Uint8Array, ed25519Public: Uint8Array): PublicKeys {
    return new PublicKeys(keyIdFor(x25519Public, ed25519Public), x25519Public, ed25519Public);
  }

  /** Parse `{key_id?, x25519_public, ed25519_public}`: the key id is recomputed, and keys of
   * small order are refused. Throws InvalidPublicKey. */
  static fromApi(data: unknown): PublicKeys {
    const record = (typeof data === "object" && data !== null ? data : {}) as Record<string, unknown>;
    let keys: PublicKeys;
    try {
      keys = PublicKeys.fromRaw(checkedX25519(publicKeyBytes(record["x25519_public"])),
        checkedEd25519(publicKeyBytes(record["ed25519_public"])));
    } catch (error) {
      throw new InvalidPublicKey((error as Error).message);
    }
    if ("key_id" in record && record["key_id"] !== keys.keyId) {
      throw new InvalidPublicKey("the key id does not match the keys");
    }
    return keys;
  }

  asApi(): { x25519_public: string; ed25519_public: string } {
    return { x25519_public: b64encode(this.x25519), ed25519_public: b64encode(this.ed25519) };
  }
}

/** A device's or an agent runtime's private keys. They never leave the SDK: a store keeps
 * `secret()` locally, never on the server. */
export class KeyPair {
  readonly public: PublicKeys;

  private constructor(
    private readonly x25519Private: Uint8Array,
    private readonly ed25519Seed: Uint8Array,
  ) {
    this.public = PublicKeys.fromRaw(x25519.getPublicKey(x25519Private), ed25519.getPublicKey(ed25519Seed));
  }

  static generate(): KeyPair {
    return new KeyPair(randomBytes(32), randomBytes(32));
  }

  /** The inverse of {@link KeyPair.secret}; throws RangeError on a malformed secret. */
  static fromSecret(secret: KeyPairSecret): KeyPair {
    const box = b64decode(secret.x25519_private);
    const seed = b64decode(secret.ed25519_seed);
    if (box.length !== 32 || seed.length !== 32) throw new RangeError("a key pair's secrets are 32 bytes each");
    return new KeyPair(box, seed);
  }

  get keyId(): string {
    return this.public.keyId;
  }

  secret(): KeyPairSecret {
    return { x25519_private: b64encode(this.x25519Private), ed25519_seed: b64encode(this.ed25519Seed) };
  }

  /** The private X25519 key that opens the copies of envelopes addressed to this key pair. */
  get boxKey(): Uint8Array {
    return this.x25519Private;
  }

  /** A raw 64-byte Ed25519 signature of `data`. */
  sign(data: Uint8Array): Uint8Array {
    return ed25519.sign(data, this.ed25519Seed);
  }
}

/** Whether `signature` is `publicKey`'s Ed25519 signature of `data`, under RFC 8032's strict
 * rules (canonical encodings, as libsodium), never throwing. */
export function verifyEd25519(signature: Uint8Array, data: Uint8Array, publicKey: Uint8Array): boolean {
  try {
    checkedEd25519(publicKey);
    return signature.length === 64 && ed25519.verify(signature, data, publicKey, { zip215: false });
  } catch {
    return false;
  }
}
