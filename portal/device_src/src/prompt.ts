/**
 * The consent prompt of SPEC §12.2: a modal dialog (`role="dialog"`) with the agent's name,
 * the tool, the scope's label and sensitivity, the arguments, the manifest version and the
 * safety number (or that the publisher is unverified), and "Allow" / "Deny". With a
 * timeout (high sensitivity: 30 s) a countdown is visible, then the answer is "timeout".
 * One prompt at a time: later ones wait their turn.
 */
import { one, setText, text, type Texts } from "./dom.js";
import { grantWords } from "./grantWords.js";
import type { PromptAnswer, PromptRequest } from "./serving.js";

export class PromptDialog {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly dialog: HTMLDialogElement, private readonly texts: Texts) {}

  ask(request: PromptRequest, timeoutMs: number | null): Promise<PromptAnswer> {
    const next = this.queue.then(() => this.show(request, timeoutMs));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private show(request: PromptRequest, timeoutMs: number | null): Promise<PromptAnswer> {
    this.fill(request);
    const countdown = one(this.dialog, "[data-prompt-countdown]");
    return new Promise<PromptAnswer>((resolve) => {
      const deadline = timeoutMs === null ? null : Date.now() + timeoutMs;
      const tick = (): void => {
        if (deadline === null) return;
        const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
        countdown.textContent = text(this.texts, "countdown", { s: left });
        if (left === 0) finish("timeout");
      };
      const timer = deadline === null ? undefined : setInterval(tick, 250);
      const onClick = (event: Event): void => {
        const answer = (event.target as HTMLElement).closest<HTMLElement>("[data-answer]")?.dataset["answer"];
        if (answer === "allow" || answer === "deny") finish(answer);
      };
      const onCancel = (event: Event): void => {
        event.preventDefault(); // Escape is a "Deny", said out loud
        finish("deny");
      };
      const finish = (answer: PromptAnswer): void => {
        clearInterval(timer);
        this.dialog.removeEventListener("click", onClick);
        this.dialog.removeEventListener("cancel", onCancel);
        this.dialog.close();
        resolve(answer);
      };
      countdown.hidden = deadline === null;
      tick();
      this.dialog.addEventListener("click", onClick);
      this.dialog.addEventListener("cancel", onCancel);
      this.dialog.showModal();
      one<HTMLButtonElement>(this.dialog, '[data-answer="deny"]').focus(); // the safe default has the focus
    });
  }

  private fill(request: PromptRequest): void {
    const t = this.texts;
    setText(this.dialog, "[data-prompt-agent]", request.agentName || request.agentId);
    setText(this.dialog, "[data-prompt-tool]", request.toolName);
    setText(this.dialog, "[data-prompt-description]", request.toolDescription);
    const limits = grantWords(request.grantOption, t); // "Only this time", "Until …": said beside the permission
    setText(this.dialog, "[data-prompt-scope]", [`${t.scopes[request.scope] ?? request.scope} (${request.scope})`, ...limits].join(" · "));
    const sensitivity = one(this.dialog, "[data-prompt-sensitivity]");
    sensitivity.textContent = t.sensitivity[request.sensitivity] ?? request.sensitivity;
    sensitivity.className = `sens sens-${request.sensitivity}`;
    const args = Object.keys(request.arguments).length === 0 ? text(t, "no_arguments")
      : JSON.stringify(request.arguments, null, 2);
    setText(this.dialog, "[data-prompt-arguments]", args);
    setText(this.dialog, "[data-prompt-version]",
      request.manifestVersion === null ? "" : text(t, "version", { v: request.manifestVersion }));
    setText(this.dialog, "[data-prompt-safety]", request.safetyNumber ?? text(t, "unverified"));
  }
}

/** The file picker of read_file: the path the agent named is only a hint. */
export function filePicker(dialog: HTMLDialogElement): (hint: string) => Promise<File | null> {
  const input = one<HTMLInputElement>(dialog, "[data-pick-input]");
  return (hint) => new Promise<File | null>((resolve) => {
    setText(dialog, "[data-pick-hint]", hint);
    input.value = "";
    const finish = (file: File | null): void => {
      input.removeEventListener("change", onChange);
      dialog.removeEventListener("cancel", onCancel);
      one(dialog, "[data-pick-cancel]").removeEventListener("click", onCancel);
      dialog.close();
      resolve(file);
    };
    const onChange = (): void => finish(input.files?.[0] ?? null);
    const onCancel = (event: Event): void => {
      event.preventDefault();
      finish(null);
    };
    input.addEventListener("change", onChange);
    dialog.addEventListener("cancel", onCancel);
    one(dialog, "[data-pick-cancel]").addEventListener("click", onCancel);
    dialog.showModal();
  });
}
