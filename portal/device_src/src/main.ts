/**
 * The browser device page (SPEC §12.2): the entry point bundled into
 * portal/static/portal/device/device.js. It shows what the enrolment (./enrolment.ts) and
 * the SDK decide; it never decides trust itself. The consent pages load the same module:
 * there it signs the consent when this browser is a device (./consentSigning.ts).
 */
import { AuditLog, indexedDbStore, isJsonObject, UNUSED_GRANT_DAYS, type AuditEntry, type Store, type UnusedGrant } from "@hashee/sdk";
import { signConsentForms } from "./consentSigning.js";
import { one, loadTexts, row, setText, text, when, type Texts } from "./dom.js";
import { BrowserEnrolment, type DeviceRow, type Enrolment } from "./enrolment.js";
import { grantWords, say } from "./grantWords.js";
import { filePicker, PromptDialog } from "./prompt.js";
import { startDevice, type DeviceRuntime, type ServedAgent } from "./serving.js";
import { holdDeviceLock } from "./tabLock.js";
import { browserTools } from "./tools.js";

const STORE_NAME = "hashee-device";
const VIEWS = ["loading", "unsupported", "other-tab", "none", "removed", "pending", "approved"] as const;
type View = (typeof VIEWS)[number];
const PENDING_POLL_MS = 5000;

class DevicePage {
  private readonly enrolment: BrowserEnrolment;
  private readonly prompt: PromptDialog;
  private runtime: DeviceRuntime | null = null;
  private starting: Promise<void> | null = null;
  private rendering: Promise<void> = Promise.resolve();
  private served: readonly ServedAgent[] | null = null; // the agents as last verified and shown
  private current: Enrolment = { state: "none" };
  private refreshing: Promise<void> | null = null;
  private poll: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly root: HTMLElement, private readonly texts: Texts, private readonly store: Store) {
    this.enrolment = new BrowserEnrolment(store);
    this.prompt = new PromptDialog(one<HTMLDialogElement>(root, "[data-prompt]"), texts);
  }

  start(): void {
    this.root.addEventListener("click", (event) => void this.onClick(event));
    // live.js relays every /ws/events frame; a device change anywhere re-reads the directory
    document.body.addEventListener("hashee:event", (event) => {
      const type = String((event as CustomEvent<{ type?: string }>).detail?.type ?? "");
      if (type.startsWith("keys.") || type === "resync_required") void this.refresh();
      if (type.startsWith("h2a.") || type.startsWith("agent.")) void this.renderServed(); // the agents this device serves
    });
    void this.refresh();
  }

  show(view: View): void {
    for (const name of VIEWS) one(this.root, `[data-view="${name}"]`).hidden = name !== view;
  }

  refresh(): Promise<void> {
    this.refreshing ??= this.reload().finally(() => {
      this.refreshing = null;
    });
    return this.refreshing;
  }

  private async reload(): Promise<void> {
    try {
      this.render(await this.enrolment.load());
    } catch (error) {
      this.fail(error);
    }
  }

  private render(enrolment: Enrolment): void {
    this.current = enrolment;
    clearInterval(this.poll);
    if (enrolment.state === "pending") this.poll = setInterval(() => void this.refresh(), PENDING_POLL_MS);
    if (enrolment.state === "pending" || enrolment.state === "approved") {
      setText(this.root, "[data-own-code]", enrolment.code);
      setText(this.root, "[data-own-id]", enrolment.deviceId);
    }
    if (enrolment.state === "approved") {
      this.renderPending(enrolment.others.filter((device) => !device.approved));
      void this.serve(enrolment.deviceId);
    }
    this.show(enrolment.state);
  }

  private renderPending(devices: readonly DeviceRow[]): void {
    const list = one(this.root, "[data-pending-list]");
    list.replaceChildren(...devices.map((device) => {
      const { element, cell } = row(one<HTMLTemplateElement>(this.root, "template[data-pending-row]"));
      element.dataset["device"] = device.deviceId;
      cell("device").textContent = device.deviceId;
      cell("code").textContent = device.code;
      cell("added").textContent = when(device.createdAt);
      cell("approve").addEventListener("click", () => void this.act(async () => {
        await this.enrolment.approve(device);
      }));
      return element;
    }));
    one(this.root, "[data-pending-table]").hidden = devices.length === 0;
    one(this.root, "[data-pending-empty]").hidden = devices.length > 0;
  }

  /** Answer calls in this tab (the one holding the device lock): the SDK's Device (./serving.ts). */
  private serve(deviceId: string): Promise<void> {
    this.starting ??= (async () => {
      const tools = browserTools(filePicker(one<HTMLDialogElement>(this.root, "[data-file-picker]")));
      this.runtime = await startDevice({ store: this.store, deviceId, tools,
        prompt: (request, timeoutMs) => this.prompt.ask(request, timeoutMs), changed: (agents) => void this.renderServed(agents) });
      await this.renderServed();
    })().catch((error: unknown) => {
      this.starting = null;
      this.fail(error);
    });
    return this.starting;
  }

  /** The agents (unless only the activity changed) and the activity, again: one render at a
   * time, the last request always served. */
  private renderServed(agentsToo = true): Promise<void> {
    this.rendering = this.rendering.then(async () => {
      if (agentsToo || this.served === null) {
        this.served = this.runtime === null ? [] : await this.runtime.agents();
        this.renderAgents(this.served);
        this.renderUnused(this.runtime === null ? [] : await this.runtime.unusedGrants());
      }
      const agents = this.served;
      const names = new Map(agents.map((agent) => [agent.agentId, agent.agentName]));
      this.renderActivity((await new AuditLog(this.store).entries()).reverse(), names);
    }).catch((error: unknown) => this.fail(error));
    return this.rendering;
  }

  private renderAgents(agents: readonly ServedAgent[]): void {
    one(this.root, "[data-agents-list]").replaceChildren(...agents.map((agent) => {
      const { element, cell } = row(one<HTMLTemplateElement>(this.root, "template[data-agent-row]"));
      element.dataset["agent"] = agent.agentId;
      cell("agent").replaceChildren(agent.agentName || agent.agentId, ...this.grantLines(agent));
      cell("safety").textContent = agent.identityChanged
        ? `${text(this.texts, "identity_changed")}: ${agent.safetyNumber ?? text(this.texts, "unverified")}`
        : agent.safetyNumber ?? text(this.texts, "unverified");
      cell("verified").hidden = !agent.verified || agent.identityChanged;
      const verify = cell("verify");
      verify.hidden = agent.safetyNumber === null || (agent.verified && !agent.identityChanged);
      verify.addEventListener("click", () => void this.act(async () => {
        await this.runtime?.markVerified(agent);
        await this.renderServed();
      }));
      return element;
    }));
    one(this.root, "[data-agents-table]").hidden = agents.length === 0;
    one(this.root, "[data-agents-empty]").hidden = agents.length > 0;
  }

  /** Each granted scope with options, in words ("Location: Only this time"); none for "always". */
  private grantLines(agent: ServedAgent): HTMLElement[] {
    return agent.granted.flatMap((scope) => {
      const option = agent.grantOptions[scope];
      const words = isJsonObject(option) ? grantWords(option, this.texts) : [];
      if (words.length === 0) return [];
      const line = document.createElement("div");
      line.className = "small muted";
      line.dataset["grant"] = scope;
      line.textContent = `${this.texts.scopes[scope] ?? scope}: ${words.join(" · ")}`;
      return [line];
    });
  }

  /** The 90-day notice (Android's auto-reset, decided here): high-sensitivity grants this device
   * has not used, each with "Withdraw" (a signed PATCH) and "Keep". */
  private renderUnused(grants: readonly UnusedGrant[]): void {
    let notice = this.root.querySelector<HTMLElement>("[data-unused-grants]");
    if (grants.length === 0) { // nothing to say: no text of it on the page, not even hidden
      notice?.remove();
      return;
    }
    if (notice === null) {
      notice = document.createElement("section");
      notice.className = "banner banner-warn";
      notice.dataset["unusedGrants"] = "";
      notice.setAttribute("role", "status");
      one(this.root, '[data-view="approved"]').prepend(notice);
    }
    const title = document.createElement("strong");
    title.textContent = say(this.texts, "unused_title", { days: UNUSED_GRANT_DAYS });
    const intro = document.createElement("span");
    intro.textContent = say(this.texts, "unused_intro");
    const list = document.createElement("ul");
    list.append(...grants.map((grant) => this.unusedRow(grant)));
    const body = document.createElement("div");
    body.append(title, intro, list);
    notice.replaceChildren(body);
  }

  private unusedRow(grant: UnusedGrant): HTMLElement {
    const item = document.createElement("li");
    item.dataset["unusedGrant"] = `${grant.relationId} ${grant.scope}`;
    const what = document.createElement("span");
    what.textContent = say(this.texts, "unused_row", { agent: grant.agentName || grant.agentId,
      scope: this.texts.scopes[grant.scope] ?? grant.scope, since: when(grant.since) });
    const button = (key: string, action: (g: UnusedGrant) => Promise<void>, primary: boolean): HTMLButtonElement => {
      const b = document.createElement("button");
      b.type = "button";
      b.className = primary ? "btn btn-sm btn-primary" : "btn btn-sm";
      b.textContent = say(this.texts, key);
      b.dataset[key === "unused_withdraw" ? "unusedWithdraw" : "unusedKeep"] = "";
      b.addEventListener("click", () => void this.act(async () => {
        await action(grant);
        await this.renderServed();
      }));
      return b;
    };
    item.append(what, " ", button("unused_withdraw", (g) => this.runtime!.withdraw(g), true), " ",
      button("unused_keep", (g) => this.runtime!.keep(g), false));
    return item;
  }

  private renderActivity(entries: readonly AuditEntry[], names: ReadonlyMap<string, string>): void {
    const status = this.texts.status;
    one(this.root, "[data-activity-list]").replaceChildren(...entries.map((entry) => {
      const { element, cell } = row(one<HTMLTemplateElement>(this.root, "template[data-activity-row]"));
      cell("when").textContent = when(entry.timestamp);
      cell("agent").textContent = names.get(entry.agent_id) ?? entry.agent_id;
      cell("tool").textContent = entry.tool_name;
      cell("scope").textContent = this.texts.scopes[entry.scope] ?? entry.scope;
      const said = status[entry.status] ?? (entry.status === "withdraw_failed" ? say(this.texts, "withdraw_failed") : entry.status);
      cell("status").textContent = [said, entry.reason ?? ""].join(" ").trim();
      cell("digest").textContent = entry.arguments_digest.slice(0, 16);
      cell("digest").title = entry.arguments_digest;
      return element;
    }));
    one(this.root, "[data-activity-table]").hidden = entries.length === 0;
    one(this.root, "[data-activity-empty]").hidden = entries.length > 0;
  }

  private async onClick(event: Event): Promise<void> {
    const action = (event.target as HTMLElement).closest<HTMLElement>("[data-action]")?.dataset["action"];
    if (action === "enrol") await this.act(async () => this.render(await this.enrolment.enrol()));
    if (action === "enrol-again") {
      await this.act(async () => {
        await this.enrolment.forget();
        this.render(await this.enrolment.enrol());
      });
    }
    if (action === "remove" && "deviceId" in this.current && window.confirm(text(this.texts, "confirm_remove"))) {
      const { deviceId } = this.current;
      await this.act(async () => {
        await this.starting;
        await this.runtime?.stop();
        this.runtime = null;
        this.starting = null;
        await this.enrolment.remove(deviceId);
        this.render({ state: "none" });
      });
    }
  }

  /** Run a user's action with its buttons disabled; a failure is said on the page. */
  private async act(work: () => Promise<void>): Promise<void> {
    const buttons = [...this.root.querySelectorAll<HTMLButtonElement>("button")].filter((b) => !b.disabled);
    buttons.forEach((button) => { button.disabled = true; });
    try {
      one(this.root, "[data-device-error]").hidden = true;
      await work();
      await this.refresh();
    } catch (error) {
      this.fail(error);
    } finally {
      buttons.forEach((button) => { button.disabled = false; });
    }
  }

  private fail(error: unknown): void {
    const banner = one(this.root, "[data-device-error]");
    banner.textContent = text(this.texts, "failed", { message: error instanceof Error ? error.message : String(error) });
    banner.hidden = false;
  }
}

function supported(): boolean {
  return window.isSecureContext && "indexedDB" in window && "locks" in navigator && "subtle" in crypto;
}

function main(): void {
  const root = document.querySelector<HTMLElement>("[data-device-app]");
  if (root === null) {
    void signConsentForms(STORE_NAME, indexedDbStore); // the consent pages: signed when this browser is a device
    return;
  }
  const texts = loadTexts();
  const show = (view: View): void => {
    for (const name of VIEWS) one(root, `[data-view="${name}"]`).hidden = name !== view;
  };
  if (!supported()) {
    show("unsupported");
    return;
  }
  let page: DevicePage | null = null;
  holdDeviceLock(() => {
    page ??= new DevicePage(root, texts, indexedDbStore(STORE_NAME));
    page.start();
  }, () => show("other-tab"));
}

main();
