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

  /** {@link KeyPair.sign} on the platform's Ed25519 where it has one: the same bytes. */
  signAsync(data: Uint8Array): Promise<Uint8Array> {
    return signEd25519Async(data, this.ed25519Seed);
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

// --- the platform's own primitives (WebCrypto), where it has them ----------------------
//
// Chromium and Node ≥ 20 ship Ed25519 and X25519 in `crypto.subtle`, natively: one verify or
// one key agreement there costs a tenth of noble's (bench/sdk_js_envelopes.py). They are
// asynchronous, so the device's call path uses these `…Async` forms; the synchronous ones
// above stay for everything else. Where the platform lacks them (Node 18, older browsers)
// the same functions fall back to noble: the answer never depends on which ran.

const subtle: SubtleCrypto | undefined = globalThis.crypto?.subtle;
const ED25519 = { name: "Ed25519" } as const;
const X25519 = { name: "X25519" } as const;
// RFC 8410's PKCS #8 wrappings of a raw X25519 private key and an Ed25519 seed (WebCrypto imports no raw private key).
const X25519_PKCS8_PREFIX = Uint8Array.of(0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22,
  0x04, 0x20);
const ED25519_PKCS8_PREFIX = Uint8Array.of(0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
  0x04, 0x20);
const BASE_POINT = Uint8Array.of(9, ...new Uint8Array(31)); // X25519's u = 9
const CACHED_KEYS = 256;
/** WebCrypto takes ArrayBuffer-backed views; ours are (none is made on a SharedArrayBuffer). */
const buffer = (bytes: Uint8Array): Uint8Array<ArrayBuffer> => bytes as Uint8Array<ArrayBuffer>;
// Any scalar will do (as wire.ts's probe): X25519 clamps it to a multiple of the cofactor 8.
const PROBE_SCALAR = Uint8Array.of(9, ...new Uint8Array(31));

let nativeSupport: Promise<{ ed25519: boolean; x25519: boolean }> | undefined;

/** Use the platform's Ed25519 and X25519 where it has them (the default), or noble's alone:
 * tests run both, to show they answer alike. */
export function usePlatformCrypto(use: boolean): void {
  nativeSupport = use ? undefined : Promise.resolve({ ed25519: false, x25519: false });
}

/** Which of the two this platform's WebCrypto does, as the `…Async` functions will use them. */
export function platformCrypto(): Promise<{ ed25519: boolean; x25519: boolean }> {
  return native();
}

/** Whether this platform's WebCrypto does Ed25519 and X25519, and gives noble's answers
 * (checked once, on a key pair made here). */
function native(): Promise<{ ed25519: boolean; x25519: boolean }> {
  nativeSupport ??= (async () => {
    if (subtle === undefined) return { ed25519: false, x25519: false };
    const seed = randomBytes(32);
    const data = randomBytes(16);
    const signature = ed25519.sign(data, seed);
    const verifies = await subtle.importKey("raw", buffer(ed25519.getPublicKey(seed)), ED25519, false, ["verify"])
      .then((key) => subtle.verify(ED25519, key, buffer(signature), buffer(data))).catch(() => false);
    const signs = await signingKey(seed).then((key) => subtle.sign(ED25519, key, buffer(data)))
      .then((made) => sameBytes(new Uint8Array(made), signature)).catch(() => false); // Ed25519 is deterministic
    const ed = verifies && signs;
    const mine = randomBytes(32);
    const theirs = x25519.getPublicKey(randomBytes(32));
    const derived = await nativeShared(mine, theirs).catch(() => null);
    const expected = x25519.getSharedSecret(mine, theirs);
    return { ed25519: ed, x25519: derived !== null && sameBytes(derived, expected) };
  })();
  return nativeSupport;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

function pkcs8(prefix: Uint8Array, raw: Uint8Array): Uint8Array<ArrayBuffer> {
  const wrapped = new Uint8Array(prefix.length + raw.length);
  wrapped.set(prefix);
  wrapped.set(raw, prefix.length);
  return wrapped;
}

const signingKeys = new WeakMap<Uint8Array, Promise<CryptoKey>>();

function signingKey(seed: Uint8Array): Promise<CryptoKey> {
  let key = signingKeys.get(seed);
  if (key === undefined) {
    key = subtle!.importKey("pkcs8", pkcs8(ED25519_PKCS8_PREFIX, seed), ED25519, false, ["sign"]);
    signingKeys.set(seed, key);
  }
  return key;
}

/** `seed`'s raw Ed25519 signature of `data`, on the platform's Ed25519 where it has one (the
 * same bytes: Ed25519 signatures are deterministic). */
export async function signEd25519Async(data: Uint8Array, seed: Uint8Array): Promise<Uint8Array> {
  if (!(await native()).ed25519) return ed25519.sign(data, seed);
  return new Uint8Array(await subtle!.sign(ED25519, await signingKey(seed), buffer(data)));
}

/** The X25519 public key of a private one, on the platform's X25519 where it has one. */
export async function x25519PublicAsync(privateKey: Uint8Array): Promise<Uint8Array> {
  if (!(await native()).x25519) return x25519.getPublicKey(privateKey);
  return nativeShared(privateKey, BASE_POINT);
}

/** A small cache of imported keys: the same few agent keys verify every call. */
class KeyCache<K> {
  private readonly keys = new Map<K, Promise<CryptoKey>>();

  get(id: K, make: () => Promise<CryptoKey>): Promise<CryptoKey> {
    let key = this.keys.get(id);
    if (key === undefined) {
      if (this.keys.size >= CACHED_KEYS) this.keys.clear();
      key = make();
      this.keys.set(id, key);
      key.catch(() => this.keys.delete(id));
    }
    return key;
  }
}

const verifyKeys = new KeyCache<string>();
const checkedKeys = new Map<string, boolean>(); // Ed25519 keys already checked for small order
const privateKeys = new WeakMap<Uint8Array, Promise<CryptoKey>>();

function privateX25519(raw: Uint8Array): Promise<CryptoKey> {
  let key = privateKeys.get(raw);
  if (key === undefined) {
    key = subtle!.importKey("pkcs8", pkcs8(X25519_PKCS8_PREFIX, raw), X25519, false, ["deriveBits"]);
    privateKeys.set(raw, key);
  }
  return key;
}

async function nativeShared(privateKey: Uint8Array, publicKey: Uint8Array): Promise<Uint8Array> {
  const [mine, theirs] = await Promise.all([privateX25519(privateKey), subtle!.importKey("raw", buffer(publicKey), X25519, false, [])]);
  return new Uint8Array(await subtle!.deriveBits({ name: "X25519", public: theirs }, mine, 256));
}

function keyChecked(publicKey: Uint8Array): boolean {
  const id = b64encode(publicKey);
  let ok = checkedKeys.get(id);
  if (ok === undefined) {
    try {
      checkedEd25519(publicKey);
      ok = true;
    } catch {
      ok = false;
    }
    if (checkedKeys.size >= CACHED_KEYS) checkedKeys.clear();
    checkedKeys.set(id, ok);
  }
  return ok;
}

/** {@link verifyEd25519}, on the platform's Ed25519 where it has one. The key is checked for
 * small order once (then remembered); the signature is verified every time. Never throws. */
export async function verifyEd25519Async(signature: Uint8Array, data: Uint8Array, publicKey: Uint8Array): Promise<boolean> {
  if (signature.length !== 64 || publicKey.length !== 32 || !keyChecked(publicKey)) return false;
  if (!(await native()).ed25519) return verifyEd25519(signature, data, publicKey);
  try {
    const key = await verifyKeys.get(b64encode(publicKey), () => subtle!.importKey("raw", buffer(publicKey), ED25519, false, ["verify"]));
    return await subtle!.verify(ED25519, key, buffer(signature), buffer(data));
  } catch {
    return false;
  }
}

/** The X25519 shared secret of our private key and their public key, on the platform's X25519
 * where it has one; null when their key is of small order (the secret would be all zero,
 * which anyone knows: libsodium refuses it too). */
export async function x25519SharedAsync(privateKey: Uint8Array, publicKey: Uint8Array): Promise<Uint8Array | null> {
  if (publicKey.length !== 32) return null;
  let shared: Uint8Array;
  try {
    shared = (await native()).x25519 ? await nativeShared(privateKey, publicKey) : x25519.getSharedSecret(privateKey, publicKey);
  } catch {
    return null; // WebCrypto and noble both refuse an all-zero secret
  }
  return shared.every((byte) => byte === 0) ? null : shared;
}

/** Whether `publicKey` is an X25519 key of large order (as wire.ts's checkedX25519), asynchronously
 * on the platform's X25519: a clamped scalar makes the product of any point of small order zero. */
export async function largeOrderX25519Async(publicKey: Uint8Array): Promise<boolean> {
  return (await x25519SharedAsync(PROBE_SCALAR, publicKey)) !== null;
}
