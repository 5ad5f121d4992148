/** One open tab per browser is the device (SPEC §12.2): the tab that holds the Web Lock.
 * Another tab says so, and waits: it takes over as soon as the holder closes. */

const LOCK_NAME = "hashee-device";

export function holdDeviceLock(onHeld: () => void, onBusy: () => void): void {
  const holdForever = (): Promise<void> => {
    onHeld();
    return new Promise<void>(() => {}); // released when this tab closes or navigates away
  };
  void navigator.locks.request(LOCK_NAME, { ifAvailable: true }, async (lock) => {
    if (lock !== null) return holdForever();
    onBusy();
    void navigator.locks.request(LOCK_NAME, holdForever);
    return undefined;
  });
}
