// The test vectors of docs/wire-spec.md, read from the repository beside this package
// (src/testing and dist/testing both sit two levels below sdk-js/).
import type { ConsentStatement } from "../consentStatements.js";
import { readFileSync } from "node:fs";
import { b64decode } from "../encoding.js";
import { KeyPair } from "../crypto.js";

export interface VectorKey {
  x25519_private: string;
  ed25519_seed: string;
  x25519_public: string;
  ed25519_public: string;
  key_id: string;
}

export interface EnvelopeVector {
  recipient: string;
  relation_id: string;
  direction: "agent_to_user" | "user_to_agent";
  envelope: {
    v: 2; alg: "x25519-xsalsa20poly1305+ed25519"; sender_key_id: string;
    copies: { recipient_key_id: string; ephemeral_public: string; nonce: string; ciphertext: string }[];
  };
  signed_bytes: string;
  artifact: Record<string, unknown>;
}

export interface Vectors {
  keys: Record<"agent_runtime" | "bob_laptop" | "bob_phone", VectorKey>;
  identity: { jwk: { kty: "OKP"; crv: "Ed25519"; x: string }; kid: string };
  reply_key: { x25519_private: string; x25519_public: string; reply_key_id: string };
  device_approval: { approver_key_id: string; device_id: string; key_id: string; signed_bytes: string; signature: string };
  runtime_key: { agent_id: string; key_id: string; signed_bytes: string; identity_signature: string };
  manifest_signature: { manifest: Record<string, unknown>; signature: string };
  consent_statement: { device: string; statement: ConsentStatement; signature: string; signed_bytes: string };
  tool_call: EnvelopeVector;
  tool_response: EnvelopeVector;
  safety_number: {
    agent_id: string; agent_identity_x_b64url: string; user_root_device_ed25519: string;
    agent_fingerprint: string; user_fingerprint: string; safety_number: string;
  };
}

export const VECTORS_URL = new URL("../../../docs/wire-vectors.json", import.meta.url);

/** A fresh copy each call, so a test that tampers cannot leak into another. */
export function loadVectors(): Vectors {
  return JSON.parse(readFileSync(VECTORS_URL, "utf8")) as Vectors;
}

export function keyPairOf(key: VectorKey): KeyPair {
  return KeyPair.fromSecret({ x25519_private: key.x25519_private, ed25519_seed: key.ed25519_seed });
}

export const bytes = b64decode;
