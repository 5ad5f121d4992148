/**
 * Consent signed in the browser (SPEC §9.6, "the portal, when the browser is a device, signs
 * the consent it sends"): on the consent page, the re-consent page and the disconnect form
 * (`form[data-sign]`), when this browser is an approved device of the user, the form is not
 * posted: the SDK's Device signs the statement with this browser's key and sends it through
 * the same REST API (the session), then the page goes where the form would have gone.
 *
 * What is signed is what the portal says the form means: the form is first posted with
 * `X-Hashee-Describe: 1` (same origin, the form's CSRF token), and the portal answers the
 * request it would send — `{"granted_scopes", "grant_options"}` — storing nothing. One
 * definition of how the form's plain choices ("Only this time", "For 1 hour", "Only when path
 * starts with …") map to grant options (SPEC §5.2 v1.2), the portal's; this page signs exactly it.
 *
 * When this browser is not a device (no keys here, or keys the directory does not list as
 * approved: pending, removed, another user's) the form posts as before, unsigned: the server
 * would refuse a statement signed by a key it does not trust, and the device then asks once,
 * on the device, before it acts on a grant it has no statement for.
 */
import { isJsonObject, type Device, type JsonObject, type Store } from "@hashee/sdk";
import { csrfToken } from "./api.js";
import { one } from "./dom.js";
import { BrowserEnrolment } from "./enrolment.js";
import { browserDevice } from "./serving.js";

const NO_RELATION = "00000000-0000-0000-0000-000000000000";

/** The approved device of this browser, or null (this browser is not one). */
async function approvedDevice(storeName: string, openStore: (name: string) => Store): Promise<Device | null> {
  if (!("indexedDB" in window) || !("subtle" in crypto)) return null;
  const databases = typeof indexedDB.databases === "function" ? await indexedDB.databases() : null;
  if (databases !== null && !databases.some((db) => db.name === storeName)) return null; // no empty store made here
  const store = openStore(storeName);
  const enrolment = await new BrowserEnrolment(store).load();
  return enrolment.state === "approved" ? browserDevice(store, enrolment.deviceId) : null;
}

export async function signConsentForms(storeName: string, openStore: (name: string) => Store): Promise<void> {
  const forms = [...document.querySelectorAll<HTMLFormElement>("form[data-sign]")];
  if (forms.length === 0) return;
  let device: Device | null;
  try {
    device = await approvedDevice(storeName, openStore);
  } catch {
    device = null; // the directory could not be read: the forms post as before
  }
  if (device === null) return;
  const note = document.querySelector<HTMLElement>("[data-signing-note]");
  if (note !== null) {
    one(note, "[data-signing-device]").textContent = device.deviceId;
    note.hidden = false;
  }
  for (const form of forms) {
    form.addEventListener("submit", (event) => {
      if (event.defaultPrevented) return; // e.g. "Disconnect this agent?" answered no
      event.preventDefault();
      void submitSigned(form, device, (event as SubmitEvent).submitter);
    });
  }
}

async function submitSigned(form: HTMLFormElement, device: Device, submitter: HTMLElement | null): Promise<void> {
  const buttons = [...document.querySelectorAll<HTMLButtonElement>("button[type=submit]")];
  const data = new FormData(form, submitter); // read before the buttons are disabled (a disabled submitter is refused)
  buttons.forEach((button) => { button.disabled = true; });
  try {
    const next = await send(form, data, device);
    if (next !== null) window.location.assign(next);
  } catch (error) {
    const banner = document.querySelector<HTMLElement>("[data-signing-error]");
    if (banner !== null) {
      banner.textContent = (banner.dataset["template"] ?? "%(message)s")
        .replace("%(message)s", error instanceof Error ? error.message : String(error));
      banner.hidden = false;
    }
  } finally {
    buttons.forEach((button) => { button.disabled = false; });
  }
}

/** What the portal says the form asks: the request it would send, stored nowhere. */
export interface Described {
  readonly grantedScopes: string[];
  readonly grantOptions: JsonObject;
}

/** The form posted with `X-Hashee-Describe: 1`; throws an Error saying the portal's refusal. */
export async function describe(form: HTMLFormElement, data: FormData): Promise<Described> {
  const response = await fetch(form.action, { method: "POST", body: data, credentials: "same-origin",
    headers: { "X-Hashee-Describe": "1", "X-CSRFToken": csrfToken() || String(data.get("csrfmiddlewaretoken") ?? ""),
      Accept: "application/json" } });
  const body = (await response.json().catch(() => null)) as Record<string, unknown> | null;
  if (!response.ok) {
    const error = isJsonObject(body?.["error"]) ? body["error"] : {};
    const details = Array.isArray(error["details"]) ? error["details"].map((d) => (isJsonObject(d) ? String(d["message"] ?? "") : "")) : [];
    throw new Error([String(error["message"] ?? response.statusText), ...details.filter(Boolean)].join(" "));
  }
  const scopes = body?.["granted_scopes"];
  const options = body?.["grant_options"];
  if (!Array.isArray(scopes) || !scopes.every((s) => typeof s === "string") || !(options === undefined || isJsonObject(options))) {
    throw new Error("the portal did not describe the form");
  }
  return { grantedScopes: scopes as string[], grantOptions: options ?? {} };
}

/** Sign and send what the portal describes the form to mean; the page to go to next (null: stay). */
async function send(form: HTMLFormElement, formData: FormData, device: Device): Promise<string | null> {
  const data = form.dataset;
  if (data["sign"] === "grant") {
    const asked = await describe(form, formData);
    const relation = await device.grant(String(data["agentId"]), asked.grantedScopes,
      { userId: String(data["userId"]), grantOptions: asked.grantOptions });
    return String(data["next"]).replace(NO_RELATION, String(relation.relation_id));
  }
  const relationId = String(data["relationId"]);
  if (data["sign"] === "reconsent") {
    const shown = Number(formData.get("acknowledged_manifest_version"));
    const agent = await device.transport.request("GET", `/agents/${String(data["agentId"])}`);
    const current = (agent.body as { capability_manifest_version?: number } | null)?.capability_manifest_version;
    if (current !== shown) return String(data["next"]); // it changed while the user read it: show the latest
    const asked = await describe(form, formData);
    await device.reconsent(relationId, asked.grantedScopes, { grantOptions: asked.grantOptions });
    return String(data["next"]);
  }
  if (data["sign"] === "revoke") {
    await device.revoke(relationId);
    return String(data["next"]);
  }
  return null;
}
