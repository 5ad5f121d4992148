/**
 * Consent signed in the browser (SPEC §9.6, "the portal, when the browser is a device, signs
 * the consent it sends"): on the consent page, the re-consent page and the disconnect form
 * (`form[data-sign]`), when this browser is an approved device of the user, the form is not
 * posted: the SDK's Device signs the statement with this browser's key and sends it through
 * the same REST API (the session), then the page goes where the form would have gone.
 *
 * When this browser is not a device (no keys here, or keys the directory does not list as
 * approved: pending, removed, another user's) the form posts as before, unsigned: the server
 * would refuse a statement signed by a key it does not trust, and the device then asks once,
 * on the device, before it acts on a grant it has no statement for.
 */
import type { Device, Store } from "@hashee/sdk";
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
      void submitSigned(form, device);
    });
  }
}

async function submitSigned(form: HTMLFormElement, device: Device): Promise<void> {
  const buttons = [...document.querySelectorAll<HTMLButtonElement>("button[type=submit]")];
  buttons.forEach((button) => { button.disabled = true; });
  try {
    const next = await send(form, device);
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

/** Sign and send what the form says; the page to go to next (null: stay). */
async function send(form: HTMLFormElement, device: Device): Promise<string | null> {
  const data = form.dataset;
  const scopes = new FormData(form).getAll("granted_scopes").map(String);
  if (data["sign"] === "grant") {
    const relation = await device.grant(String(data["agentId"]), scopes, { userId: String(data["userId"]) });
    return String(data["next"]).replace(NO_RELATION, String(relation.relation_id));
  }
  const relationId = String(data["relationId"]);
  if (data["sign"] === "reconsent") {
    const shown = Number(new FormData(form).get("acknowledged_manifest_version"));
    const agent = await device.transport.request("GET", `/agents/${String(data["agentId"])}`);
    const current = (agent.body as { capability_manifest_version?: number } | null)?.capability_manifest_version;
    if (current !== shown) return String(data["next"]); // it changed while the user read it: show the latest
    await device.reconsent(relationId, scopes);
    return String(data["next"]);
  }
  if (data["sign"] === "revoke") {
    await device.revoke(relationId);
    return String(data["next"]);
  }
  return null;
}
