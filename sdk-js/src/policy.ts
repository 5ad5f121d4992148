/**
 * The sensitivity policy (SPEC §6 step 5; sdk/hashee_sdk/policy.py). The clock is a
 * parameter (`nowMs`).
 *
 * * `low`: silent.
 * * `medium`: prompt the first time; after an approval, silent for a 24 h *sliding* window
 *   per (device, session, agent, scope) — every silent use pushes the end of the window to
 *   now + 24 h. A refusal or a timeout opens no window.
 * * `high` (and any level this SDK does not know, fail safe): prompt every call.
 *
 * Windows live in memory: a new session starts with none, which is what "per session" means.
 */

export const MEDIUM_WINDOW_MS = 24 * 3600 * 1000;
export const HIGH_PROMPT_TIMEOUT_MS = 30_000;
export const MAX_WINDOWS = 10_000;
export type Sensitivity = "low" | "medium" | "high";

/** Who is asked: this device, this session, on behalf of this agent. */
export interface PolicySubject {
  readonly deviceId: string;
  readonly sessionId: string;
  readonly agentId: string;
}

export class SensitivityPolicy {
  private ends = new Map<string, number>();

  constructor(readonly mediumWindowMs: number = MEDIUM_WINDOW_MS) {}

  /** True when this call needs no prompt. */
  isSilent(subject: PolicySubject, scope: string, sensitivity: string, nowMs: number): boolean {
    if (sensitivity === "low") return true;
    if (sensitivity !== "medium") return false;
    const end = this.ends.get(windowKey(subject, scope));
    return end !== undefined && nowMs < end;
  }

  /** After an approved prompt or a silent use: (re)start the medium window at `nowMs`. */
  recordUse(subject: PolicySubject, scope: string, sensitivity: string, nowMs: number): void {
    if (sensitivity !== "medium") return;
    if (this.ends.size >= MAX_WINDOWS) this.ends = new Map([...this.ends].filter(([, end]) => end > nowMs));
    this.ends.set(windowKey(subject, scope), nowMs + this.mediumWindowMs);
  }

  /** Close every window (of one agent): e.g. when its relation is revoked. */
  forget(agentId?: string): void {
    if (agentId === undefined) this.ends.clear();
    else for (const key of [...this.ends.keys()]) if (JSON.parse(key)[2] === agentId) this.ends.delete(key);
  }
}

function windowKey(subject: PolicySubject, scope: string): string {
  return JSON.stringify([subject.deviceId, subject.sessionId, subject.agentId, scope]);
}
