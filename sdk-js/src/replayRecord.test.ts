// The replay record's durable write goes on beside the chain and the prompt
// (LocalState.claimCall): the prompt need not wait for IndexedDB, but no tool runs and no answer
// is sent before the record is durable, and a replay arriving meanwhile is still refused.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Json } from "./canonical.js";
import type { Device } from "./device.js";
import type { Store } from "./store.js";
import { RELATION_ID } from "./testing/fakeServer.js";
import { Scene, statuses } from "./testing/scene.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** `store`, with every write of the replay record held until `release()`; `at` notes what the
 * device had done when each one became durable. */
function holdingCalls(store: Store, scene: Scene, storedBefore?: Json) {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const at: { ran: number; messages: number }[] = [];
  const held: Store = { ...store,
    get: async (key) => (key.startsWith("calls/") && storedBefore !== undefined ? storedBefore : store.get(key)),
    set: async (key, value) => {
      if (!key.startsWith("calls/")) return store.set(key, value);
      await gate;
      await store.set(key, value);
      at.push({ ran: scene.ran.length, messages: scene.server.messages.length });
    } };
  return { held, release, at };
}

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !done(); i++) await sleep(2);
  assert.ok(done(), "never happened");
}

/** The agent's call posted; its frame, the messages before it, and the agent's pending answer. */
async function posted(scene: Scene, tool: string, args: Record<string, Json>) {
  const sent = scene.server.messages.length;
  const answer = scene.agent.callTool(RELATION_ID, tool, args, { timeoutMs: 2000 });
  await until(() => scene.server.messages.length > sent);
  return { frame: scene.server.frame(sent), sent, answer };
}

async function deliverAnswer(scene: Scene, sent: number, answer: Promise<unknown>) {
  await until(() => scene.server.messages.length > sent + 1);
  await scene.agent.handleFrame(scene.server.frame(sent + 1));
  return answer;
}

for (const [tool, args, prompted] of [["locate", {}, true], ["notify", { title: "hi" }, false]] as const) {
  test(`${tool}: ${prompted ? "the prompt opens" : "the chain runs"} while the replay record is written; nothing runs or is answered before it is durable; a replay meanwhile is refused`,
    async () => {
      const scene = await Scene.create();
      if (!prompted) await scene.call("notify", { title: "confirmed once" }); // a low scope, asked only the first time
      const asked = scene.asked.length;
      const { held, release, at } = holdingCalls(scene.deviceStore, scene);
      const device: Device = scene.startDevice(held);
      const { frame, sent, answer } = await posted(scene, tool, args);
      const handling = device.handleFrame(frame);
      if (prompted) await until(() => scene.asked.length === asked + 1); // shown before the record is durable
      else await sleep(30);
      const ranBefore = scene.ran.length;
      assert.equal(scene.server.messages.length, sent + 1, "nothing answered yet");

      const replay = scene.server.post("agent", "artifact_tool_call", scene.server.messages[sent].payload);
      assert.equal(await device.handleFrame(replay), null);
      assert.deepEqual(await scene.refusals(device), ["call_replayed"]);
      assert.equal(scene.asked.length, asked + (prompted ? 1 : 0), "the replay is never prompted");

      release();
      const response = await handling;
      assert.equal(response?.["status"], "ok");
      assert.deepEqual(at, [{ ran: ranBefore, messages: sent + 2 }], "durable before the tool ran and before any answer");
      assert.equal(scene.ran.length, ranBefore + 1, "the tool ran once");
      assert.deepEqual(statuses(await deliverAnswer(scene, sent + 1, answer) as never), [["ok", null]]);
    });
}

test("a call another process recorded first is refused once the store is read: the prompt answered, nothing runs or is sent", async () => {
  const scene = await Scene.create();
  const other = { message_id: "m-elsewhere", expires_at_ms: Number.MAX_SAFE_INTEGER };
  const { held, release, at } = holdingCalls(scene.deviceStore, scene, other);
  const device = scene.startDevice(held);
  await device.init();
  await device.state.loadCalls(); // this process loaded its record before the other wrote the call
  const { frame, sent, answer } = await posted(scene, "locate", {});
  answer.catch(() => undefined); // never answered: the agent's call times out
  release();
  assert.equal(await device.handleFrame(frame), null);
  assert.equal(scene.asked.length, 1);
  assert.deepEqual(scene.ran, []);
  assert.deepEqual(at, [], "the record found is not overwritten");
  assert.equal(scene.server.messages.length, sent + 1, "no answer sent");
  assert.deepEqual(await scene.refusals(device), ["call_replayed"]);
});

test("with its view cached, a device reads nothing from its store before the prompt opens (IndexedDB would queue that read behind the replay record's durable write)",
  async () => {
    const scene = await Scene.create();
    let stalled = false;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const store = scene.deviceStore;
    const stall = async <T>(work: () => Promise<T>): Promise<T> => {
      if (stalled) await gate;
      return work();
    };
    const stalling: Store = { get: (key) => stall(() => store.get(key)), set: (key, value) => stall(() => store.set(key, value)),
      delete: (key) => stall(() => store.delete(key)), keys: (prefix) => stall(() => store.keys(prefix)), close: () => store.close() };
    const device = scene.startDevice(stalling);
    const warm = await scene.call("locate", {}, { device, timeoutMs: 3000, untilAnswered: true }); // the view read and cached
    assert.deepEqual(statuses(warm), [["ok", null]]);
    const asked = scene.asked.length;

    stalled = true;
    const { frame, sent, answer } = await posted(scene, "locate", {});
    const handling = device.handleFrame(frame);
    await until(() => scene.asked.length === asked + 1); // location:read is high: asked every time, while the store answers nothing

    release();
    assert.equal((await handling)?.["status"], "ok");
    assert.deepEqual(statuses(await deliverAnswer(scene, sent, answer) as never), [["ok", null]]);
  });
