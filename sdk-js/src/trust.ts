/**
 * What the SDK checks before it believes the server (SPEC §9.1, §9.2; sdk/hashee_sdk/trust.py):
 *
 * * {@link ManifestVerifier}: a manifest's RFC 8785 hash is the stated one, a version once
 *   seen never comes back with another hash, and an identified agent's manifest carries a
 *   detached JWS by the **pinned** identity;
 * * {@link KeyPins}: per relation, what was first seen — the agent's identity (or that it had
 *   none), the relation's agent, the other party's keys. A later key is trusted only when
 *   vouched for (a runtime key by the pinned identity, a device by an approval from a trusted
 *   device); a pinned key the listing drops is tombstoned, never trusted again.
 */
import { canonicalize, isJsonObject, sha256Hex, type JsonObject } from "./canonical.js";
import type { PublicKeys } from "./crypto.js";
import { AgentChanged, IdentityChanged, ManifestUnverified } from "./errors.js";
import { ed25519PublicJwk, jwkThumbprint, verifyDetached, type PublicJwk } from "./jose.js";
import type { LocalState, Party } from "./localState.js";

export const AGENT: Party = "agent";
export const USER: Party = "user";

/** Whether a listed key is vouched for, given the keys trusted so far. */
export type Voucher = (candidate: PublicKeys, trusted: ReadonlyMap<string, PublicKeys>) => boolean;

export interface VerifiedManifest {
  readonly agentId: string;
  readonly version: number;
  readonly hash: string;
  readonly manifest: JsonObject;
}

/** Verifies the manifests the server serves; one per client (it remembers versions). */
export class ManifestVerifier {
  private readonly hashes = new Map<string, string>();

  /** The manifest, verified; raises ManifestUnverified. With `identity` it must carry that
   * identity's signature; a caller with other backing for the hash passes none. */
  verify(input: { agentId: string; version: unknown; manifest: unknown; statedHash: unknown; signature?: unknown;
    identity: PublicJwk | null }): VerifiedManifest {
    const { agentId, version, manifest, statedHash } = input;
    if (!Number.isSafeInteger(version) || !isJsonObject(manifest) || typeof statedHash !== "string") {
      throw new ManifestUnverified("the server sent no manifest, version or hash");
    }
    let data: Uint8Array;
    try {
      data = canonicalize(manifest); // once: the hash and the signature both cover these bytes
    } catch {
      throw new ManifestUnverified("the manifest is not RFC 8785 JSON");
    }
    const digest = sha256Hex(data);
    if (digest !== statedHash) throw new ManifestUnverified(`version ${version}: the manifest's hash is not the hash the server states`);
    const key = `${agentId}\u0000${version}`;
    const seen = this.hashes.get(key) ?? digest;
    this.hashes.set(key, seen);
    if (seen !== digest) throw new ManifestUnverified(`version ${version} was served before with another hash`);
    if (input.identity !== null) checkSignature(data, input.signature, input.identity);
    return { agentId, version: version as number, hash: digest, manifest };
  }
}

function checkSignature(canonical: Uint8Array, signature: unknown, identity: PublicJwk): void {
  if (typeof signature !== "string" || signature === "") {
    throw new ManifestUnverified("the agent has an identity key and this manifest carries no signature");
  }
  try {
    verifyDetached(signature, canonical, identity, jwkThumbprint(identity));
  } catch (error) {
    throw new ManifestUnverified(`the manifest's signature does not verify with the pinned identity: ${(error as Error).message}`);
  }
}

/** The served identity as a public Ed25519 JWK (null: the agent has none); raises ManifestUnverified. */
export function publicIdentity(served: unknown): PublicJwk | null {
  if (served === null || served === undefined) return null;
  try {
    const { kty, crv, x } = served as Record<string, unknown>;
    return ed25519PublicJwk({ kty, crv, x });
  } catch {
    throw new ManifestUnverified("the agent's identity is not an Ed25519 public key");
  }
}

const kidOf = (jwk: PublicJwk | null): string | null => (jwk === null ? null : jwkThumbprint(jwk));

/** Per relation, what was first seen of the other party (persisted in a LocalState). */
export class KeyPins {
  constructor(readonly state: LocalState) {}

  /** The pinned identity of the relation's agent (null: it has none), pinning what is served
   * the first time. Raises IdentityChanged (another identity, one where none was, none where
   * one was) or AgentChanged. */
  async identity(relationId: string, agentId: string, served: unknown): Promise<PublicJwk | null> {
    await this.checkAgent(relationId, agentId);
    const [pinned, jwk] = await this.state.pinnedIdentity(relationId);
    const pub = publicIdentity(served);
    if (!pinned) {
      await this.state.pinIdentity(relationId, agentId, pub);
      return pub;
    }
    if (kidOf(jwk) !== kidOf(pub)) {
      throw new IdentityChanged(relationId, jwk as unknown as Record<string, string> | null, pub as unknown as Record<string, string> | null);
    }
    return jwk;
  }

  /** Trust the identity served now: only after the user compared the new safety number. */
  async acceptIdentity(relationId: string, agentId: string, served: unknown): Promise<void> {
    await this.checkAgent(relationId, agentId);
    await this.state.pinIdentity(relationId, agentId, publicIdentity(served));
  }

  async checkAgent(relationId: string, agentId: string): Promise<void> {
    const pinned = await this.state.pinnedAgent(relationId);
    if (pinned !== null && pinned !== agentId) throw new AgentChanged(relationId, pinned, agentId);
  }

  /** Whether nothing of `party` was ever trusted here (no pin, no tombstone). */
  async firstLook(relationId: string, party: Party): Promise<boolean> {
    return (await this.state.pinned(relationId, party)).size === 0 && (await this.state.tombstoned(relationId, party)).size === 0;
  }

  /** [trusted keys among `listed`, ids of refused ones] — as hashee_sdk.trust.KeyPins.filter. */
  async filter(relationId: string, party: Party, listed: readonly PublicKeys[], vouch: Voucher | null,
    pinFirst: boolean): Promise<[PublicKeys[], string[]]> {
    const first = await this.firstLook(relationId, party);
    const pinned = await this.tombstoneUnlisted(relationId, party, listed);
    const dead = await this.state.tombstoned(relationId, party);
    if (first && pinFirst) {
      await this.state.pin(relationId, party, listed);
      return [[...listed], []];
    }
    const trusted = new Map(listed.filter((k) => pinned.has(k.keyId)).map((k) => [k.keyId, k]));
    const trustedOrPinned = new Map([...pinned, ...trusted]);
    let candidates = listed.filter((k) => !trusted.has(k.keyId) && !dead.has(k.keyId));
    while (vouch !== null && candidates.length > 0) { // until no further key is vouched for
      const vouched = candidates.filter((k) => vouch(k, trustedOrPinned));
      if (vouched.length === 0) break;
      for (const k of vouched) {
        trusted.set(k.keyId, k);
        trustedOrPinned.set(k.keyId, k);
      }
      candidates = candidates.filter((k) => !trusted.has(k.keyId));
    }
    const newly = [...trusted.values()].filter((k) => !pinned.has(k.keyId));
    if (newly.length > 0) await this.state.pin(relationId, party, newly);
    return [listed.filter((k) => trusted.has(k.keyId)), listed.filter((k) => !trusted.has(k.keyId)).map((k) => k.keyId)];
  }

  /** The pinned keys still listed; the others are tombstoned (the directory lists live keys only). */
  private async tombstoneUnlisted(relationId: string, party: Party, listed: readonly PublicKeys[]): Promise<Map<string, PublicKeys>> {
    const pinned = await this.state.pinned(relationId, party);
    const ids = new Set(listed.map((k) => k.keyId));
    const gone = [...pinned.keys()].filter((id) => !ids.has(id));
    if (gone.length > 0) await this.state.tombstone(relationId, party, gone);
    return new Map([...pinned].filter(([id]) => ids.has(id)));
  }
}
