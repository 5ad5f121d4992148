import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AuditLog, RETENTION_MS } from "./audit.js";
import { KeyPair } from "./crypto.js";
import { LocalState } from "./localState.js";
import { fileStore } from "./node/fileStore.js";
import { SensitivityPolicy } from "./policy.js";
import { memoryStore, type Store } from "./store.js";

function withDir(run: (dir: string) => Promise<void>): () => Promise<void> {
  return async () => {
    const dir = mkdtempSync(join(tmpdir(), "hashee-sdk-"));
    try {
      await run(join(dir, "state"));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

async function behavesAsAStore(store: Store): Promise<void> {
  assert.equal(await store.get("a/b"), undefined);
  await store.set("a/b", { x: [1, "é"] });
  await store.set("a/c.json", 2);
  await store.set("b/../x", true);
  assert.deepEqual(await store.get("a/b"), { x: [1, "é"] });
  assert.deepEqual(await store.keys("a/"), ["a/b", "a/c.json"]);
  assert.deepEqual(await store.keys("b/"), ["b/../x"]);
  await store.delete("a/b");
  await store.delete("never/set");
  assert.deepEqual(await store.keys(""), ["a/c.json", "b/../x"]);
}

test("the memory store and the file store keep JSON under string keys", async () => {
  await behavesAsAStore(memoryStore());
});

test("the file store keeps its files private and survives a reopening", withDir(async (dir) => {
  await behavesAsAStore(fileStore(dir));
  assert.equal(statSync(dir).mode & 0o777, 0o700);
  for (const name of readdirSync(dir)) assert.equal(statSync(join(dir, name)).mode & 0o777, 0o600, name);
  assert.equal(await fileStore(dir).get("a/c.json"), 2);
  assert.ok(readdirSync(dir).every((name) => !name.endsWith(".tmp")));
}));

test("a call replayed after a restart is refused until it expires", withDir(async (dir) => {
  const call = { relationId: "r/1", callId: "call_1", messageId: "m1", expiresAtMs: 10_000, nowMs: 1_000 };
  assert.equal(await new LocalState(fileStore(dir)).rememberCall(call), null);
  const restarted = new LocalState(fileStore(dir));
  assert.equal(await restarted.rememberCall({ ...call, messageId: "m2" }), "m1");
  assert.equal(await restarted.rememberCall({ ...call, relationId: "r", callId: "1/call_1" }), null);
  assert.equal(await restarted.rememberCall({ ...call, messageId: "m3", nowMs: 10_001, expiresAtMs: 20_000 }), null);
}));

test("concurrent deliveries of one call: exactly one is new", async () => {
  const state = new LocalState(memoryStore());
  const call = { relationId: "r", callId: "c", messageId: "m", expiresAtMs: 10, nowMs: 1 };
  const answers = await Promise.all([1, 2, 3].map(() => state.rememberCall(call)));
  assert.deepEqual(answers.filter((a) => a === null).length, 1);
});

test("pins, identity, grants, cursor and the key pair persist", withDir(async (dir) => {
  const state = new LocalState(fileStore(dir));
  const pair = await state.keyPair();
  const other = KeyPair.generate();
  await state.pin("r1", "user", [other.public]);
  await state.pinIdentity("r1", "a1", null);
  await state.confirmGrants("r1", ["b", "a"]);
  await state.unconfirmGrants("r1", ["b"]);
  await state.setCursor("events", 7);
  await state.setCursor("events", 5);
  await state.pinAcknowledgement("r1", 3, "ab");
  const again = new LocalState(fileStore(dir));
  assert.equal((await again.keyPair()).keyId, pair.keyId);
  assert.deepEqual([...(await again.pinned("r1", "user")).keys()], [other.keyId]);
  assert.equal((await again.pinned("r1", "agent")).size, 0);
  assert.deepEqual(await again.pinnedIdentity("r1"), [true, null]);
  assert.deepEqual(await again.pinnedIdentity("r2"), [false, null]);
  assert.deepEqual(await again.confirmedGrants("r1"), new Set(["a"]));
  assert.equal(await again.confirmedGrants("r2"), null);
  assert.equal(await again.cursor("events"), 7);
  assert.deepEqual(await again.pinnedAcknowledgement("r1"), { version: 3, hash: "ab" });
}));

test("medium is silent for 24 h sliding after an approval, per agent and scope; high never", () => {
  const policy = new SensitivityPolicy();
  const subject = { deviceId: "laptop", sessionId: "s", agentId: "a" };
  const hour = 3600_000;
  assert.ok(policy.isSilent(subject, "notification:send", "low", 0));
  assert.ok(!policy.isSilent(subject, "filesystem:read", "medium", 0));
  policy.recordUse(subject, "filesystem:read", "medium", 0);
  assert.ok(policy.isSilent(subject, "filesystem:read", "medium", 23 * hour));
  policy.recordUse(subject, "filesystem:read", "medium", 23 * hour);
  assert.ok(policy.isSilent(subject, "filesystem:read", "medium", 46 * hour));
  assert.ok(!policy.isSilent(subject, "filesystem:read", "medium", 47 * hour));
  assert.ok(!policy.isSilent({ ...subject, agentId: "b" }, "filesystem:read", "medium", hour));
  assert.ok(!policy.isSilent(subject, "clipboard:read", "medium", hour));
  policy.recordUse(subject, "location:read", "high", 0);
  assert.ok(!policy.isSilent(subject, "location:read", "high", 1));
  assert.ok(!policy.isSilent(subject, "x", "unknown", 1));
  policy.forget("a");
  assert.ok(!policy.isSilent(subject, "filesystem:read", "medium", 24 * hour));
});

test("the audit log keeps keyed digests, never arguments, and purges after 30 days", async () => {
  const store = memoryStore();
  const log = new AuditLog(store);
  const base = { call_id: "c1", agent_id: "a", tool_name: "read_file", scope: "filesystem:read", status: "ok", reason: null };
  const first = await log.record({ ...base, arguments: { path: "secret.txt" }, nowMs: 1_000 });
  assert.match(first.arguments_digest, /^[0-9a-f]{64}$/);
  assert.equal(first.arguments_digest, await log.digest({ path: "secret.txt" }));
  assert.notEqual(first.arguments_digest, await new AuditLog(memoryStore()).digest({ path: "secret.txt" }));
  assert.equal(first.arguments_digest, await new AuditLog(store).digest({ path: "secret.txt" }), "the secret is kept");
  const everything = JSON.stringify(await Promise.all((await store.keys("")).map((k) => store.get(k))));
  assert.ok(!everything.includes("secret.txt"));
  await log.record({ ...base, call_id: "c2", status: "refused", reason: "call_replayed", arguments: {}, nowMs: 1_000 + RETENTION_MS });
  assert.deepEqual((await log.entries()).map((e) => e.call_id), ["c1", "c2"]);
  await log.record({ ...base, call_id: "c3", arguments: {}, nowMs: 1_001 + RETENTION_MS });
  assert.deepEqual((await log.entries()).map((e) => e.call_id), ["c2", "c3"]);
  assert.ok(await log.hasCall("c3"));
});
