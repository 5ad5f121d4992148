/**
 * An in-memory stand-in for the REST API (tests/sdk/fakes.py in TypeScript): one relation,
 * one agent and its manifest versions (signed when the agent has an identity), the key
 * directory, signed consent (SPEC §9.6) and the message pipe. Messages become `message.new` frames.
 */
import { canonicalHash, type Json, type JsonObject } from "../canonical.js";
import { verifyConsent } from "../consentStatements.js";
import { PublicKeys, type KeyPair } from "../crypto.js";
import { ConsentInvalid } from "../errors.js";
import { ed25519PublicJwk, jwkThumbprint, signManifest, type PrivateJwk } from "../jose.js";
import type { EventFrame, HttpResponse, RequestOptions, Transport } from "../rest.js";
import { approveDevice, signRuntimeKey } from "../statements.js";

export const RELATION_ID = "7d1f4f0e-1111-4a4a-9b9b-000000000001";
export const AGENT_ID = "7d1f4f0e-2222-4a4a-9b9b-000000000002";
export const USER = "bob";
export const ALL_SCOPES = ["filesystem:read", "notification:send", "location:read"];

export function manifest(): any {
  return {
    schema_version: "1.0", agent_version: "1.0.0",
    tools: [
      { name: "read_file", description_i18n_key: "agent.cap.read_file.description", description_fallback: "Read a file you choose",
        input_schema: { type: "object", additionalProperties: false, required: ["path"],
          properties: { path: { type: "string", maxLength: 1024 } } },
        permission_scope: "filesystem:read", timeout_ms: 5000 },
      { name: "notify", description_i18n_key: "agent.cap.notify.description",
        input_schema: { type: "object", additionalProperties: false, required: ["title"], properties: { title: { type: "string", maxLength: 80 } } },
        permission_scope: "notification:send", timeout_ms: 100 },
      { name: "locate", description_i18n_key: "agent.cap.locate.description",
        input_schema: { type: "object", additionalProperties: false, properties: {} }, permission_scope: "location:read" },
    ],
    permission_scopes: [
      { id: "filesystem:read", label_i18n_key: "agent.scope.filesystem_read.label", sensitivity: "medium" },
      { id: "notification:send", label_i18n_key: "agent.scope.notification_send.label", sensitivity: "low" },
      { id: "location:read", label_i18n_key: "agent.scope.location_read.label", sensitivity: "high" },
    ],
  };
}

/** read_file widened: `path` may be a list of paths (a breaking change of filesystem:read). */
export function widenedPath(): any {
  const widened = manifest();
  widened.agent_version = "2.0.0";
  widened.tools[0].input_schema.properties.path = { type: "array", items: { type: "string" } };
  return widened;
}

const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;
const ok = (body: unknown, status = 200): HttpResponse => ({ status, body: clone(body), headers: {} });
const error = (status: number, code: string, message = ""): HttpResponse => ({ status, body: { error: { code, message, details: [] } }, headers: {} });

/** A key-directory row for a device (approved by `approver`, or a root when none). */
export function listed(deviceId: string, keys: KeyPair, approver: KeyPair | null = null): any {
  return { device_id: deviceId, ...keys.public.asApi(), key_id: keys.keyId, created_at: "2026-01-02T00:00:00Z",
    approved_by_key_id: approver?.keyId ?? null, approval: approver ? approveDevice(approver, { deviceId, keyId: keys.keyId }) : null };
}

export class FakeServer {
  versions: any[] = [manifest()];
  granted = [...ALL_SCOPES];
  grantOptions: Record<string, any> = {};
  /** Answer every PATCH with this error code instead (a server that refuses, e.g. VERSION_CONFLICT). */
  refusePatch: string | null = null;
  /** The server's clock: a grant past its `until` reads as withdrawn (SPEC §5.2 v1.2). */
  now: () => number = Date.now;
  status = "active";
  pending: string[] = [];
  acknowledged = 1;
  devices: any[] = [];
  agentKeys: any[] = [];
  messages: any[] = [];
  consentStatement: any = null;
  identity: PrivateJwk | null = null;
  signatures = new Map<number, string>();
  private ids = 0;

  get manifest(): any {
    return this.versions[this.versions.length - 1];
  }

  publish(next: any, pending: string[] = []): void {
    this.versions.push(next);
    if (this.identity !== null) this.signatures.set(this.versions.length, signManifest(next, this.identity));
    if (pending.length > 0) {
      this.status = "reauth_required";
      this.pending = [...new Set([...this.pending, ...pending])].sort();
    }
  }

  transport(party: "user" | "agent"): Transport {
    return { request: async (method: string, path: string, options: RequestOptions = {}) => this.handle(party, method, path, clone(options.json ?? null)) };
  }

  publishDevice(deviceId: string, keys: KeyPair, approver: KeyPair | null = null): void {
    this.devices.push({ ...listed(deviceId, keys, approver), created_at: "2026-01-01T00:00:00Z" });
  }

  publishAgent(keys: KeyPair): void {
    const key: any = { ...keys.public.asApi(), key_id: keys.keyId, created_at: "2026-01-01T00:00:00Z" };
    if (this.identity) key.identity_signature = signRuntimeKey(this.identity, { agentId: AGENT_ID, keyId: keys.keyId });
    this.agentKeys.push(key);
  }

  /** The agent gets an identity key: its runtime keys are vouched for, versions from now on signed. */
  giveIdentity(identity: PrivateJwk): void {
    this.identity = identity;
    for (const key of this.agentKeys) key.identity_signature = signRuntimeKey(identity, { agentId: AGENT_ID, keyId: key.key_id });
    this.signatures.set(this.versions.length, signManifest(this.manifest, identity));
  }

  relation(): any {
    const live = this.granted.filter((s) => !(Number.isInteger(this.grantOptions[s]?.until) && this.grantOptions[s].until <= this.now()));
    const options = Object.fromEntries(Object.entries(this.grantOptions).filter(([s]) => live.includes(s)));
    return { relation_id: RELATION_ID, agent_id: AGENT_ID, user: USER, granted_scopes: live, grant_options: options,
      pending_scopes: this.pending,
      status: this.status, acknowledged_manifest_version: this.acknowledged,
      acknowledged_manifest_hash: canonicalHash(this.versions[this.acknowledged - 1]), current_manifest_version: this.versions.length,
      consent_statement: this.consentStatement, revoked_at: this.status === "revoked" ? "2026-01-02T00:00:00Z" : null };
  }

  relationFrame(type: string): EventFrame {
    return { id: ++this.ids, type, created_at: "2026-01-01T00:00:00Z", data: { relation: clone(this.relation()) } };
  }

  frame(index = -1): EventFrame {
    const message = this.messages.at(index);
    return { id: ++this.ids, type: "message.new", created_at: message.created_at, data: { relation_id: message.relation_id, message: clone(message) } };
  }

  /** Store a message as if `party` had sent it; returns its frame. */
  post(party: string, msgSubtype: string, payload: unknown): EventFrame {
    this.message(party, { msg_subtype: msgSubtype, content_type: "application/json", payload });
    return this.frame();
  }

  handle(party: string, method: string, path: string, body: any): HttpResponse {
    const route = `${method} ${path.split("?")[0]}`;
    if (route === `GET /h2a/relations/${RELATION_ID}`) return ok(this.relation());
    if (route === "GET /h2a/relations") return ok({ count: 1, next: null, previous: null, results: [this.relation()] });
    if (route === "POST /h2a/relations" || route === `PATCH /h2a/relations/${RELATION_ID}` || route === `DELETE /h2a/relations/${RELATION_ID}`) {
      return this.consent(method, body ?? {});
    }
    if (route === `GET /agents/${AGENT_ID}`) {
      return ok({ agent_id: AGENT_ID, name: "Notes helper", capability_manifest: this.manifest, capability_manifest_version: this.versions.length,
        capability_manifest_hash: canonicalHash(this.manifest), capability_manifest_signature: this.signatures.get(this.versions.length) ?? null });
    }
    if (route === `GET /agents/${AGENT_ID}/identity`) {
      if (this.identity === null) return error(404, "NOT_FOUND");
      const jwk = ed25519PublicJwk({ kty: "OKP", crv: "Ed25519", x: this.identity.x });
      return ok({ kid: jwkThumbprint(jwk), jwk, created_at: "2026-01-01T00:00:00Z" });
    }
    const versions = `/agents/${AGENT_ID}/manifest/versions/`;
    if (method === "GET" && path.startsWith(versions) && /^\d+$/.test(path.slice(versions.length))) {
      const n = Number(path.slice(versions.length));
      if (n < 1 || n > this.versions.length) return error(404, "NOT_FOUND");
      return ok({ version: n, hash: canonicalHash(this.versions[n - 1]), manifest: this.versions[n - 1],
        capability_manifest_signature: this.signatures.get(n) ?? null });
    }
    if (route === `GET /h2a/relations/${RELATION_ID}/keys`) {
      return ok({ relation_id: RELATION_ID, user: { devices: this.devices }, agent: { agent_id: AGENT_ID, keys: this.agentKeys } });
    }
    if (route === "POST /keys/devices") return ok({ device_id: body.device_id, status: "approved" }, 201);
    if (route === `POST /agents/${AGENT_ID}/keys`) return ok({ key_id: "k" }, 201);
    if (route === `POST /h2a/relations/${RELATION_ID}/messages`) return this.message(party, body);
    return error(404, "NOT_FOUND", "No such route.");
  }

  private message(party: string, body: any): HttpResponse {
    const message = { message_id: `m${this.messages.length + 1}`, relation_id: RELATION_ID, sender: party, msg_subtype: body.msg_subtype,
      content_type: body.content_type, payload: body.payload, created_at: "2026-01-01T00:00:00Z" };
    this.messages.push(message);
    const { payload: _payload, ...meta } = message;
    return ok(meta, 201);
  }

  private consent(method: string, body: any): HttpResponse {
    const revoked = method === "DELETE";
    if (method === "PATCH" && this.refusePatch !== null) return error(409, this.refusePatch);
    const granted = revoked ? [] : [...new Set<string>(body.granted_scopes ?? [])].sort();
    const options = revoked ? {} : (body.grant_options ?? {});
    const signed = body.consent_statement;
    if (signed) {
      const devices = new Map(this.devices.map((d) => [d.key_id as string, PublicKeys.fromApi(d)]));
      let statement: any;
      try {
        statement = verifyConsent(signed, devices);
      } catch (e) {
        if (e instanceof ConsentInvalid) return error(400, "CONSENT_SIGNATURE_INVALID", e.message);
        throw e;
      }
      const expected: Record<string, Json> = { agent_id: AGENT_ID, user_id: USER, revoked, acknowledged_manifest_version: this.versions.length,
        acknowledged_manifest_hash: canonicalHash(this.manifest) };
      if (Object.entries(expected).some(([k, v]) => statement[k] !== v) || JSON.stringify(statement.granted_scopes) !== JSON.stringify(granted)
        || canonicalHash(statement.grant_options) !== canonicalHash(options)) {
        return error(400, "CONSENT_SIGNATURE_INVALID", "the statement is not this request's");
      }
      if (this.consentStatement && statement.seq <= this.consentStatement.statement.seq) return error(409, "CONSENT_OUT_OF_ORDER");
    }
    this.consentStatement = signed ? clone(signed as JsonObject) : null;
    if (revoked) this.status = "revoked";
    else [this.granted, this.grantOptions, this.status, this.pending, this.acknowledged] = [granted, options, "active", [], this.versions.length];
    return ok(this.relation(), method === "POST" ? 201 : 200);
  }
}
