/**
 * Ed25519 keys as JWKs and the JWS forms of SPEC §9.1 (sdk/hashee_sdk/core/signing.py).
 *
 * * A key is a JWK (RFC 8037: `{"kty": "OKP", "crv": "Ed25519", "x", ["d"]}`); its `kid`
 *   is its RFC 7638 thumbprint (SHA-256, base64url).
 * * A manifest or runtime-key signature is a compact JWS with a **detached** payload (RFC
 *   7515 Appendix F: `<protected>..<signature>`, signing input `<protected>.` + base64url of
 *   the payload, no `b64` header), protected header exactly `{"alg": "EdDSA", "kid"}`.
 */
import { ed25519 } from "@noble/curves/ed25519";
import { sha256 } from "@noble/hashes/sha2";
import { randomBytes } from "@noble/hashes/utils";
import { canonicalize, isJsonObject } from "./canonical.js";
import { verifyEd25519 } from "./crypto.js";
import { b64url, b64urlDecode, fromUtf8, utf8 } from "./encoding.js";
import { InvalidKeyError, InvalidSignatureError, MalformedSignatureError, type ErrorDetail } from "./errors.js";
import { checkedEd25519 } from "./wire.js";

export const ALG = "EdDSA";
const OPTIONAL_MEMBERS = ["kid", "alg", "use"];

export interface PublicJwk {
  readonly kty: "OKP";
  readonly crv: "Ed25519";
  readonly x: string;
}

export interface PrivateJwk extends PublicJwk {
  readonly d: string;
}

/** The minimal public JWK `{kty, crv, x}` of `jwk`; throws InvalidKeyError. A private JWK
 * (one with `d`) is refused, and so is a key of small order. Optional `kid` (it must be the
 * thumbprint), `alg` (EdDSA) and `use` (sig) are allowed. */
export function ed25519PublicJwk(jwk: unknown): PublicJwk {
  if (!isJsonObject(jwk)) throw new InvalidKeyError("The JWK must be a JSON object.", [detail("", "INVALID_TYPE", "expected an object")]);
  const details: ErrorDetail[] = Object.keys(jwk)
    .filter((name) => !["kty", "crv", "x", ...OPTIONAL_MEMBERS].includes(name))
    .map((name) => detail(`/${name}`, "UNKNOWN_FIELD",
      name === "d" ? "a private key member: send only the public key" : "not a member of an Ed25519 public JWK"));
  details.push(...expect(jwk, "kty", "OKP"), ...expect(jwk, "crv", "Ed25519"), ...keyBytesProblem(jwk, "x", true));
  details.push(...expect(jwk, "alg", ALG, false), ...expect(jwk, "use", "sig", false));
  const publicJwk: PublicJwk = { kty: "OKP", crv: "Ed25519", x: String(jwk["x"]) };
  if (details.length === 0 && "kid" in jwk && jwk["kid"] !== thumbprintOf(publicJwk)) {
    details.push(detail("/kid", "INVALID_VALUE", "kid must be the key's RFC 7638 thumbprint"));
  }
  if (details.length > 0) throw new InvalidKeyError("The JWK is not an Ed25519 public key (RFC 8037).", details);
  return publicJwk;
}

/** The RFC 7638 thumbprint (SHA-256, base64url) of an Ed25519 JWK (public or private): its `kid`. */
export function jwkThumbprint(jwk: unknown): string {
  const publicPart = isJsonObject(jwk) ? Object.fromEntries(Object.entries(jwk).filter(([k]) => k !== "d")) : jwk;
  return thumbprintOf(ed25519PublicJwk(publicPart));
}

/** A new random Ed25519 private JWK (an agent's identity key). */
export function generatePrivateJwk(): PrivateJwk {
  const seed = randomBytes(32);
  return { kty: "OKP", crv: "Ed25519", x: b64url(ed25519.getPublicKey(seed)), d: b64url(seed) };
}

/** A detached-payload compact JWS of `payload` by `privateJwk`, kid = its thumbprint. */
export function signDetached(payload: Uint8Array, privateJwk: PrivateJwk): string {
  const seed = b64urlDecode(privateJwk.d);
  if (b64url(ed25519.getPublicKey(seed)) !== privateJwk.x) throw new InvalidKeyError("The JWK's x is not the public key of its d.");
  const header = b64url(utf8(JSON.stringify({ alg: ALG, kid: jwkThumbprint(privateJwk) })));
  const signature = ed25519.sign(utf8(`${header}.${b64url(payload)}`), seed);
  return `${header}..${b64url(signature)}`;
}

/** Check a detached JWS over `payload` with `publicJwk`: header `alg` EdDSA and `kid` = `kid`
 * (by default the key's thumbprint). Throws InvalidSignatureError. */
export function verifyDetached(jws: unknown, payload: Uint8Array, publicJwk: unknown, kid?: string): void {
  const { protectedPart, header, signature } = detachedParts(jws);
  let key: PublicJwk;
  try {
    key = ed25519PublicJwk(publicJwk);
  } catch (error) {
    throw new InvalidSignatureError(`The verification key is not usable: ${(error as Error).message}`);
  }
  if (header["alg"] !== ALG) throw new InvalidSignatureError("The JWS's alg must be EdDSA.");
  const expectedKid = kid ?? thumbprintOf(key);
  if (header["kid"] !== expectedKid) throw new InvalidSignatureError(`The JWS's kid is not ${expectedKid}.`);
  const input = utf8(`${protectedPart}.${b64url(payload)}`);
  if (!verifyEd25519(b64urlDecode(signature), input, b64urlDecode(key.x))) {
    throw new InvalidSignatureError("The signature does not verify.");
  }
}

/** (protected, decoded protected header, signature) of a detached JWS; throws MalformedSignatureError. */
export function detachedParts(jws: unknown): { protectedPart: string; header: Record<string, unknown>; signature: string } {
  const parts = typeof jws === "string" ? jws.split(".") : [];
  if (parts.length !== 3) throw new MalformedSignatureError("A detached JWS is <protected>..<signature>.");
  const [protectedPart = "", middle, signature = ""] = parts;
  if (middle !== "") throw new MalformedSignatureError("The JWS carries its payload; send it detached: <protected>..<signature>.");
  let header: unknown;
  try {
    header = JSON.parse(fromUtf8(b64urlDecode(protectedPart)));
    b64urlDecode(signature);
  } catch {
    throw new MalformedSignatureError("The JWS's protected header or signature is not base64url (JSON).");
  }
  if (!isJsonObject(header)) throw new MalformedSignatureError("The JWS's protected header is not a JSON object.");
  if ("b64" in header || "crit" in header) {
    throw new MalformedSignatureError("The JWS must not use b64 or crit (RFC 7515 Appendix F form only).");
  }
  return { protectedPart, header: { ...header }, signature };
}

/** What a manifest signature signs: the manifest's RFC 8785 bytes. */
export function manifestSigningBytes(manifest: unknown): Uint8Array {
  return canonicalize(manifest);
}

/** The detached JWS of a manifest by an identity's private JWK. */
export function signManifest(manifest: unknown, privateJwk: PrivateJwk): string {
  return signDetached(manifestSigningBytes(manifest), privateJwk);
}

/** Check a manifest signature (SPEC §9.1); throws InvalidSignatureError. */
export function verifyManifest(manifest: unknown, jws: unknown, publicJwk: unknown, kid?: string): void {
  verifyDetached(jws, manifestSigningBytes(manifest), publicJwk, kid);
}

function thumbprintOf(jwk: PublicJwk): string {
  return b64url(sha256(canonicalize({ crv: jwk.crv, kty: jwk.kty, x: jwk.x })));
}

function expect(jwk: Record<string, unknown>, name: string, value: string, required = true): ErrorDetail[] {
  if (!(name in jwk)) return required ? [detail(`/${name}`, "REQUIRED", `${name} is required`)] : [];
  return jwk[name] === value ? [] : [detail(`/${name}`, "INVALID_VALUE", `${name} must be '${value}'`)];
}

function keyBytesProblem(jwk: Record<string, unknown>, name: string, isPublic: boolean): ErrorDetail[] {
  if (!(name in jwk)) return [detail(`/${name}`, "REQUIRED", `${name} is required`)];
  let raw: Uint8Array;
  try {
    raw = b64urlDecode(jwk[name]);
  } catch {
    return [detail(`/${name}`, "INVALID_VALUE", `${name} must be base64url without padding`)];
  }
  if (raw.length !== 32) return [detail(`/${name}`, "INVALID_VALUE", `${name} must encode 32 bytes`)];
  if (isPublic) {
    try {
      checkedEd25519(raw);
    } catch (error) {
      return [detail(`/${name}`, "INVALID_VALUE", (error as Error).message)];
    }
  }
  return [];
}

function detail(path: string, code: string, message: string): ErrorDetail {
  return { path, code, message };
}
