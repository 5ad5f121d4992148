/**
 * This browser as one of the user's devices (SPEC §12.2, §9.2): its keys are made here and
 * kept in this origin's IndexedDB by the SDK (LocalState over indexedDbStore: the same
 * "secret/key-pair" the SDK's Device reads); only the public halves go to the server.
 *
 * What the page shows is decided here from two sources: the local keys (is this browser a
 * device?) and the key directory (is that key live, approved or pending?). Nothing the
 * server says is signed for: a key is identified by the key id recomputed from its keys,
 * and a pending device is shown with the verification code computed here from the keys
 * the server returned, so a swapped key shows another code than the new device's screen.
 */
import { approveDevice, LocalState, PublicKeys, type Store } from "@hashee/sdk";
import { deviceVerificationCode } from "../../../sdk-js/src/deviceCode.js";
import { api } from "./api.js";

const DEVICE_ID_KEY = "browser/device-id";

interface ApiDevice {
  device_id: string;
  key_id: string;
  x25519_public: string;
  ed25519_public: string;
  status: "approved" | "pending";
  created_at: string;
}

export interface DeviceRow {
  readonly deviceId: string;
  readonly keyId: string;
  readonly approved: boolean;
  readonly code: string;
  readonly createdAt: string;
  readonly thisBrowser: boolean;
}

export type Enrolment =
  | { readonly state: "none" }
  | { readonly state: "removed"; readonly deviceId: string }
  | { readonly state: "pending" | "approved"; readonly deviceId: string; readonly keyId: string;
      readonly code: string; readonly others: readonly DeviceRow[] };

export class BrowserEnrolment {
  private readonly local: LocalState;

  constructor(readonly store: Store) {
    this.local = new LocalState(store);
  }

  /** Where this browser stands now. */
  async load(): Promise<Enrolment> {
    const deviceId = await this.store.get(DEVICE_ID_KEY);
    if (typeof deviceId !== "string") return { state: "none" };
    const pair = await this.local.keyPair();
    const rows = await this.devices(pair.keyId);
    const mine = rows.find((row) => row.thisBrowser && row.deviceId === deviceId);
    if (mine === undefined) return { state: "removed", deviceId };
    return { state: mine.approved ? "approved" : "pending", deviceId, keyId: pair.keyId, code: mine.code,
             others: rows.filter((row) => row !== mine) };
  }

  /** "Use this browser as a device": make the keys (once) and publish their public halves.
   * The user's first device is trusted on first use; a later one waits for an approval. */
  async enrol(): Promise<Enrolment> {
    let deviceId = await this.store.get(DEVICE_ID_KEY);
    if (typeof deviceId !== "string") {
      deviceId = `browser-${randomHex(4)}`;
      await this.local.keyPair(); // the keys exist before anyone is told the device id
      await this.store.set(DEVICE_ID_KEY, deviceId);
    }
    const pair = await this.local.keyPair();
    await api("POST", "/keys/devices", { device_id: deviceId, key_id: pair.keyId, ...pair.public.asApi() });
    return this.load();
  }

  /** "Approve": this (approved) device signs the pending one's key (wire-spec §3). */
  async approve(row: DeviceRow): Promise<void> {
    const pair = await this.local.keyPair();
    const signature = approveDevice(pair, { deviceId: row.deviceId, keyId: row.keyId });
    await api("POST", `/keys/devices/${encodeURIComponent(row.deviceId)}/approve`,
      { approver_key_id: pair.keyId, signature });
  }

  /** "Remove this device": revoke the key on the server, then forget it here. */
  async remove(deviceId: string): Promise<void> {
    try {
      await api("DELETE", `/keys/devices/${encodeURIComponent(deviceId)}`);
    } catch (error) {
      if (!(error instanceof Error && "status" in error && error.status === 404)) throw error; // gone already
    }
    await this.forget();
  }

  /** Delete every local key and record of this device. */
  async forget(): Promise<void> {
    for (const key of await this.store.keys("")) await this.store.delete(key);
  }

  private async devices(ownKeyId: string): Promise<DeviceRow[]> {
    const listed = await api<{ devices: ApiDevice[] }>("GET", "/keys/devices");
    const rows: DeviceRow[] = [];
    for (const device of listed.devices) {
      let keys: PublicKeys;
      try {
        keys = PublicKeys.fromApi(device); // recomputes the key id; refuses keys of small order
      } catch {
        continue; // a key that is not what it claims is never offered for approval
      }
      rows.push({ deviceId: device.device_id, keyId: keys.keyId, approved: device.status === "approved",
                  code: deviceVerificationCode(keys, device.device_id), createdAt: device.created_at,
                  thisBrowser: keys.keyId === ownKeyId });
    }
    return rows;
  }
}

function randomHex(bytes: number): string {
  return [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

