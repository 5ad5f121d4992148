import { test } from "node:test";
import assert from "node:assert/strict";
import type { JsonObject } from "./canonical.js";
import { compileManifest, decide, responseDenied, responseError, type DecideContext } from "./contract.js";
import { SensitivityPolicy } from "./policy.js";
import { loadVectors } from "./testing/vectors.js";

const vectors = loadVectors();
const MANIFEST = vectors.manifest_signature.manifest as JsonObject; // read_file, filesystem:read (medium)
const subject = { deviceId: "laptop", sessionId: "s", agentId: "a" };
const call = (overrides: JsonObject = {}): JsonObject => ({
  subtype: "tool_call", call_id: "call_1", tool_name: "read_file", arguments: { path: "notes.txt" },
  permission_scope: "filesystem:read", timeout_ms: 5000, ...overrides,
});
const context = (overrides: Partial<DecideContext> = {}): DecideContext => ({
  manifest: compileManifest(MANIFEST), granted: new Set(["filesystem:read"]), inGroup: false,
  policy: new SensitivityPolicy(), subject, nowMs: 0, ...overrides,
});
const outcome = (c: JsonObject, ctx: DecideContext) => {
  const decision = decide(c, ctx);
  return decision.outcome === "denied" || decision.outcome === "error" ? `${decision.outcome}: ${decision.reason}` : decision.outcome;
};

test("the chain answers in SPEC §6 order, first failing step wins", () => {
  const table: [string, JsonObject, Partial<DecideContext>, string][] = [
    ["group beats everything", call({ tool_name: "nope" }), { inGroup: true }, "denied: tool_not_supported_in_group"],
    ["undeclared", call({ tool_name: "write_file" }), {}, "denied: tool_not_declared"],
    ["revoked", call(), { revoked: true }, "denied: permission_revoked"],
    ["pending re-consent", call(), { pending: new Set(["filesystem:read"]) }, "denied: reauth_required"],
    ["pending on another scope only", call(), { pending: new Set(["clipboard:read"]) }, "prompt"],
    ["not granted", call(), { granted: new Set() }, "denied: scope_not_granted"],
    ["the call claims another scope", call({ permission_scope: "notification:send" }), {}, "denied: scope_not_granted"],
    ["consent statement does not give it", call(), { consented: new Set(["clipboard:read"]) }, "denied: consent_unverified"],
    ["invalid arguments", call({ arguments: { path: 3 } }), {}, "error: TOOL_INVALID_ARGUMENTS"],
    ["unknown argument", call({ arguments: { path: "a", extra: 1 } }), {}, "error: TOOL_INVALID_ARGUMENTS"],
    ["medium, first time", call(), {}, "prompt"],
  ];
  for (const [label, c, ctx, expected] of table) assert.equal(outcome(c, context(ctx)), expected, label);
});

test("argument details point at the member, never echo its value", () => {
  const decision = decide(call({ arguments: { path: "x".repeat(2000), secret: "hunter2" } }), context());
  assert.equal(decision.outcome, "error");
  assert.ok(decision.outcome === "error");
  assert.deepEqual(decision.details.map((d) => [d.path, d.code]), [
    ["/arguments/path", "TOO_LONG"], ["/arguments/secret", "UNKNOWN_FIELD"],
  ]);
  assert.ok(!JSON.stringify(decision.details).includes("hunter2"));
  const missing = decide(call({ arguments: {} }), context());
  assert.ok(missing.outcome === "error");
  assert.deepEqual(missing.details.map((d) => [d.path, d.code]), [["/arguments/path", "REQUIRED"]]);
});

test("medium is silent after an approval; a scope granted on the server's word alone is prompted", () => {
  const policy = new SensitivityPolicy();
  policy.recordUse(subject, "filesystem:read", "medium", 0);
  assert.equal(outcome(call(), context({ policy, nowMs: 1000 })), "run");
  assert.equal(outcome(call(), context({ policy, nowMs: 1000, unconfirmed: new Set(["filesystem:read"]) })), "prompt");
});

test("a preset scope never falls below its platform level, nor any scope below what was consented", () => {
  const lowered = structuredClone(MANIFEST) as { permission_scopes: { sensitivity: string }[] };
  lowered.permission_scopes[0]!.sensitivity = "low";
  assert.equal(compileManifest(lowered as never).tools.get("read_file")?.sensitivity, "medium");
  const custom = (level: string) => ({
    ...MANIFEST, permission_scopes: [{ id: "notes:read", sensitivity: level, label_i18n_key: "k" }],
    tools: [{ ...(MANIFEST["tools"] as JsonObject[])[0], permission_scope: "notes:read" }],
  }) as JsonObject;
  assert.equal(compileManifest(custom("low")).tools.get("read_file")?.sensitivity, "low");
  assert.equal(compileManifest(custom("low"), custom("high")).tools.get("read_file")?.sensitivity, "high");
  assert.equal(compileManifest(custom("bogus")).tools.get("read_file")?.sensitivity, "high");
});

test("arguments must satisfy both the consented schema and the current one", () => {
  const tool = (MANIFEST["tools"] as JsonObject[])[0] as JsonObject;
  const widened = { ...MANIFEST, tools: [{ ...tool, input_schema: { type: "object", additionalProperties: false, properties: { path: { type: "string" } } } }] } as JsonObject;
  const long = call({ arguments: { path: "x".repeat(1100) } });
  assert.equal(outcome(long, context({ manifest: compileManifest(widened) })), "prompt");
  assert.equal(outcome(long, context({ manifest: compileManifest(widened, MANIFEST) })), "error: TOOL_INVALID_ARGUMENTS");
});

test("a schema that does not compile, or a remote $ref, runs nothing", () => {
  const tool = (MANIFEST["tools"] as JsonObject[])[0] as JsonObject;
  for (const input_schema of [{ type: "object", properties: { p: { $ref: "https://example.invalid/s.json" } } }, { type: 12 }]) {
    const broken = { ...MANIFEST, tools: [{ ...tool, input_schema }] } as JsonObject;
    assert.equal(outcome(call(), context({ manifest: compileManifest(broken) })), "error: TOOL_PLATFORM_ERROR");
  }
  const badOutput = { ...MANIFEST, tools: [{ ...tool, output_schema: { type: "nonsense" } }] } as JsonObject;
  assert.equal(outcome(call(), context({ manifest: compileManifest(badOutput) })), "error: TOOL_PLATFORM_ERROR");
});

test("responses carry registered reasons only", () => {
  assert.deepEqual(responseDenied("c", "user_timeout"), { subtype: "tool_response", call_id: "c", status: "denied", reason: "user_timeout" });
  assert.deepEqual(responseError("c", "TOOL_UNAVAILABLE"), { subtype: "tool_response", call_id: "c", status: "error", reason: "TOOL_UNAVAILABLE" });
});
