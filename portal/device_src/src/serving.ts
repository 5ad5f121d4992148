/**
 * What the page needs from the SDK's `Device` (SPEC §12.3) to answer calls, and what it
 * gives it. The page renders; the SDK decides (the chain of wire-spec §4 and SPEC §6, §9).
 *
 * `startDevice` stays null until `@hashee/sdk` exports `Device` on branch sdkjs; wiring it
 * is one adapter (see README in this folder): new Device({url, credential: session,
 * deviceId, store, tools, prompt}), start(), and the agents it serves.
 */
import type { Store } from "@hashee/sdk";
import type { ToolHandlers } from "./tools.js";

export type Sensitivity = "low" | "medium" | "high";

/** A prompt, as SPEC §12.2 lists what it shows. */
export interface PromptRequest {
  readonly callId: string;
  readonly agentId: string;
  readonly agentName: string;
  readonly toolName: string;
  readonly toolDescription: string;
  readonly scope: string;
  readonly sensitivity: Sensitivity;
  readonly arguments: Readonly<Record<string, unknown>>;
  readonly manifestVersion: number | null;
  /** null: the agent has no identity key, its publisher is unverified */
  readonly safetyNumber: string | null;
}

export type PromptAnswer = "allow" | "deny" | "timeout";

/** An agent this device serves, as the SDK pinned it. */
export interface ServedAgent {
  readonly relationId: string;
  readonly agentId: string;
  readonly agentName: string;
  readonly safetyNumber: string | null;
  readonly verified: boolean;
  /** the identity changed since it was pinned: calls are refused until the user accepts */
  readonly identityChanged: boolean;
}

export interface DeviceRuntime {
  agents(): Promise<readonly ServedAgent[]>;
  markVerified(relationId: string): Promise<void>;
  stop(): Promise<void>;
}

export interface StartOptions {
  readonly store: Store;
  readonly deviceId: string;
  readonly tools: ToolHandlers;
  readonly prompt: (request: PromptRequest, timeoutMs: number | null) => Promise<PromptAnswer>;
  /** the agents or the audit log changed: the page re-renders them */
  readonly changed: () => void;
}

export const startDevice: ((options: StartOptions) => Promise<DeviceRuntime>) | null = null;
