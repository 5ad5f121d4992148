/**
 * An agent runtime and bob's device talking through the fake server, each behind a
 * {@link LyingTransport} the test turns into a liar (tests/sdk_trust/scene.py in TypeScript).
 */
import { canonicalHash, type JsonObject } from "../canonical.js";
import { KeyPair } from "../crypto.js";
import { Agent, type ToolAnswer } from "../agent.js";
import { Device, type DeviceNotice } from "../device.js";
import type { PromptAnswer, PromptRequest } from "../prompts.js";
import { Recipient, seal } from "../envelope.js";
import { ToolCallTimeout } from "../errors.js";
import type { EventFrame } from "../rest.js";
import { memoryStore, type Store } from "../store.js";
import { AGENT_TO_USER } from "../wire.js";
import { AGENT_ID, FakeServer, manifest, RELATION_ID } from "./fakeServer.js";
import { LyingTransport } from "./lying.js";

export const T0_MS = 1_780_000_000_000;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class Scene {
  readonly server = new FakeServer();
  nowMs = T0_MS;
  readonly clock = (): number => this.nowMs;
  readonly userSide = new LyingTransport(this.server.transport("user"));
  readonly agentSide = new LyingTransport(this.server.transport("agent"));
  readonly asked: PromptRequest[] = [];
  readonly ran: [string, JsonObject][] = [];
  readonly notices: DeviceNotice[] = [];
  answer: PromptAnswer = "allow";
  readonly deviceStore: Store = memoryStore();
  readonly agentStore: Store = memoryStore();
  device!: Device;
  agent!: Agent;

  static async create(setup?: (scene: Scene) => void): Promise<Scene> {
    const scene = new Scene();
    scene.server.now = scene.clock;
    setup?.(scene);
    scene.device = scene.startDevice();
    await scene.device.init();
    scene.server.publishDevice("laptop", scene.device.keys);
    scene.agent = scene.runtime(manifest());
    await scene.agent.init();
    scene.server.publishAgent(scene.agent.keys);
    return scene;
  }

  /** Bob's device (again, after a restart: the same store). */
  startDevice(store: Store = this.deviceStore, deviceId = "laptop", onNotice = (n: DeviceNotice): void => {
    this.notices.push(n);
  }): Device {
    const record = (name: string) => async (args: JsonObject): Promise<any> => {
      this.ran.push([name, args]);
      return name === "notify" ? { shown: true } : name === "read_file" ? { text: "hello" } : { latitude: 1, longitude: 2, accuracy_m: 1000 };
    };
    return new Device({ url: "http://fake", credential: "hsk_fake", deviceId, store, transport: this.userSide, clock: this.clock, onNotice,
      tools: { notify: record("notify"), read_file: record("read_file"), locate: record("locate"), agenda: record("agenda") },
      prompt: (request) => {
        this.asked.push(request);
        return this.answer;
      } });
  }

  /** An agent runtime with the agent's keys (its store's key pair) calling under `calledUnder`;
   * with `store`, a runtime that keeps everything there (a restart is another one on the same store). */
  runtime(calledUnder: JsonObject, store?: Store): Agent {
    return new Agent({ url: "http://fake", credential: "hak_fake", agentId: AGENT_ID, store: store ?? this.agentStoreCopy(), manifest: calledUnder,
      transport: this.agentSide, clock: this.clock });
  }

  /** A tool call as the agent's runtime makes it, for forging (`changes` overrides its fields). */
  toolCall(name: string, callId: string, args: JsonObject = { title: "forged" }, changes: JsonObject = {}): JsonObject {
    const scopes: Record<string, string> = { notify: "notification:send", read_file: "filesystem:read", locate: "location:read" };
    return { subtype: "tool_call", call_id: callId, tool_name: name, arguments: args, permission_scope: scopes[name] ?? "calendar:read",
      timeout_ms: 100, manifest_version: 1, manifest_hash: canonicalHash(manifest()), reply_key: KeyPair.generate().public.asApi().x25519_public,
      expires_at: this.nowMs + 30_000, ...changes };
  }

  private agentStoreCopy(): Store {
    const store = memoryStore();
    const original = this.agentStore;
    return { ...store, get: async (key) => (key === "secret/key-pair" ? original.get(key) : store.get(key)),
      set: async (key, value) => (key === "secret/key-pair" ? original.set(key, value) : store.set(key, value)) };
  }

  /** One call through the pipe, delivered `deliverAfterMs` later on bob's clock; null when no answer came back.
   * `untilAnswered`: null as soon as the device sent no answer, rather than after the agent's
   * `timeoutMs` (the agent's call then times out on its own): under load, a wait on the wall
   * clock is no measure of whether an answer comes. */
  async call(name: string, args: JsonObject, options: { agent?: Agent; deliverAfterMs?: number; device?: Device; timeoutMs?: number;
    untilAnswered?: boolean } = {}): Promise<ToolAnswer | null> {
    const agent = options.agent ?? this.agent;
    const sent = this.server.messages.length;
    let settled = false;
    const task = agent.callTool(RELATION_ID, name, args, { timeoutMs: options.timeoutMs ?? 300 }).then((a) => ({ a }), (e: unknown) => ({ e }))
      .finally(() => (settled = true));
    while (this.server.messages.length === sent && !settled) await sleep(2);
    if (!settled) {
      this.nowMs += options.deliverAfterMs ?? 0;
      await (options.device ?? this.device).handleFrame(this.server.frame(sent));
      if (this.server.messages.length > sent + 1) await agent.handleFrame(this.server.frame(sent + 1));
      else if (options.untilAnswered) return null;
    }
    const outcome = await task;
    if ("a" in outcome) return outcome.a;
    if (outcome.e instanceof ToolCallTimeout) return null;
    throw outcome.e;
  }

  /** A call signed by `sender` and sealed to bob's laptop, stored by the server. */
  forgeCall(artifact: JsonObject, sender: KeyPair): EventFrame {
    const envelope = seal(artifact, { sender, recipients: [Recipient.of(this.device.keys.public)], relationId: RELATION_ID,
      direction: AGENT_TO_USER, nowMs: this.nowMs });
    return this.server.post("agent", "artifact_tool_call", envelope);
  }

  /** The reasons the audit log gives for what was stopped or denied. */
  async refusals(device: Device = this.device): Promise<(string | null)[]> {
    return (await device.audit.entries()).filter((e) => e.status === "refused" || e.status === "denied").map((e) => e.reason);
  }
}

export const statuses = (...answers: (ToolAnswer | null)[]): ([string, string | null] | null)[] =>
  answers.map((a) => (a === null ? null : [a.status, a.status === "ok" ? null : a.reason]));
