/**
 * The user's prompts on a device (SPEC §6 step 5): one at a time, at most
 * {@link MAX_WAITING_PROMPTS} of one agent waiting (an agent flooding the user is answered
 * `user_timeout`), each under its deadline; a prompt that fails or is not answered in time never
 * approves.
 */
import { DeadlinePassed, withDeadline } from "./callChecks.js";
import type { JsonObject } from "./canonical.js";
import type { DenialReason } from "./errors.js";

export const MAX_WAITING_PROMPTS = 5;

export interface PromptRequest {
  readonly relationId: string;
  readonly agentId: string;
  readonly agentName: string;
  readonly callId: string;
  readonly toolName: string;
  readonly toolDescription: string;
  readonly scope: string;
  readonly sensitivity: string;
  readonly arguments: JsonObject;
  readonly manifestVersion: number | null;
  /** null: the agent has no identity key; the prompt says its publisher is unverified. */
  readonly safetyNumber: string | null;
  /** Granted since this device last looked: confirmed here once, whatever its level. */
  readonly newlyGranted: boolean;
  /** How the user limited the scope's grant (`{once, until, arguments}`; `{}`: always). */
  readonly grantOption: JsonObject;
}

export type PromptAnswer = "allow" | "deny" | boolean;

/** A prompt to show when its turn comes, and how long the user has. */
export interface PromptTurn {
  readonly request: PromptRequest;
  readonly limitMs: number;
}

export class Prompts {
  private readonly prompt: (request: PromptRequest) => PromptAnswer | Promise<PromptAnswer>;
  private readonly waiting = new Map<string, number>();
  private queue: Promise<unknown> = Promise.resolve();

  constructor(prompt: (request: PromptRequest) => PromptAnswer | Promise<PromptAnswer>) {
    this.prompt = prompt;
  }

  /** The user's answer to `agentId`'s call. `turn` is made when the prompt's turn comes (what
   * the user said to an earlier one may have made asking needless): null approves without asking. */
  async ask(agentId: string, turn: () => PromptTurn | null): Promise<"approved" | DenialReason> {
    const waiting = this.waiting.get(agentId) ?? 0;
    if (waiting >= MAX_WAITING_PROMPTS) return "user_timeout"; // an agent flooding the user
    this.waiting.set(agentId, waiting + 1);
    const answered = this.queue.then(async (): Promise<"approved" | DenialReason> => {
      const next = turn();
      return next === null ? "approved" : this.show(next);
    });
    this.queue = answered.catch(() => undefined);
    try {
      return await answered;
    } finally {
      this.waiting.set(agentId, (this.waiting.get(agentId) ?? 1) - 1);
    }
  }

  private async show({ request, limitMs }: PromptTurn): Promise<"approved" | DenialReason> {
    if (limitMs <= 0) return "user_timeout";
    try {
      const answer = await withDeadline(Promise.resolve(this.prompt(request)), limitMs);
      return answer === true || answer === "allow" ? "approved" : "user_refused";
    } catch (error) {
      return error instanceof DeadlinePassed ? "user_timeout" : "user_refused"; // a broken prompt never approves
    }
  }
}
