"""The browser device's checks up to the prompt (SPEC §12.2), in Debian's chromium, with the
manifest cached: per call, from the tool call's arrival on the page's socket to the consent
prompt opening, measured inside the page; and the page script's gzipped size.

The bundle (portal/static/portal/device/device.js, built from portal/device_src with the SDK)
is one ES module that exports nothing, so the SDK's decision cannot be timed on its own from
page.evaluate. This measures end to end instead: an init script wraps WebSocket so that the
page's own listener is preceded by one recording each frame's `event.timeStamp` (when the
browser queued the message event), and a MutationObserver on the prompt dialog's `open`
attribute records performance.now() when showModal() opens it, then clicks "Deny" (so every
call is asked: a medium scope is silent for a while only after an "Allow"). In between: the
frame's parsing, the envelope (signature, decryption), expiry, the replay record (decided in memory;
its durable IndexedDB write runs beside the prompt, and nothing is run or answered before it ends),
the cached relation view and manifest, SPEC §6's chain with both schemas, the prompt queue,
and the dialog's filling (sdk-js/src/device.ts and prompts.ts, portal/device_src/src/prompt.ts), then Chromium's own
showModal() (timed apart: a wrapper records when the page calls it).

DemoBot (a Python agent runtime, no identity key) calls read_clipboard (medium) on bob's
browser, one call at a time, after a warm-up (the first fetches and verifies the relation's
view and manifest; later ones use the cache). Run: .venv/bin/python bench/browser_device_checks.py
One uvicorn process on SQLite (tests/e2e/browsers.py); 127.0.0.1 only; a bounded number of calls.
Target (issue): p95 under 5 ms; the page script under 150 KB gzipped.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from _browser_device import SETTINGS, browser_device, browser_server, demobot
from _stats import p95

CALLS = 50  # after the warm-up
WARM_UP = 5
TIME_BOX_S = 300

TIMING = """(() => {
  const arrivals = [], opened = [], stored = [], modal = [];
  window.__bench = { arrivals, opened, stored, modal };
  const showModal = HTMLDialogElement.prototype.showModal;  // the browser's own share: top layer, inert page, focus
  HTMLDialogElement.prototype.showModal = function (...args) {
    if (this.matches("[data-prompt]")) modal.push(performance.now());
    return showModal.apply(this, args);
  };
  const transaction = IDBDatabase.prototype.transaction;  // where the time goes: the store's transactions
  IDBDatabase.prototype.transaction = function (...args) {
    const made = transaction.apply(this, args), entry = [performance.now(), null, args[1] === "readwrite"];
    stored.push(entry);
    const end = () => { entry[1] = performance.now(); };
    made.addEventListener("complete", end);
    made.addEventListener("abort", end);
    made.addEventListener("error", end);
    return made;
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);  // this listener comes before the SDK's (added after construction)
      this.addEventListener("message", (event) => {
        if (typeof event.data === "string" && event.data.includes('"artifact_tool_call"')) {
          arrivals.push(event.timeStamp);
        }
      });
    }
  };
  document.addEventListener("DOMContentLoaded", () => {
    const dialog = document.querySelector("[data-prompt]");
    if (dialog === null) return;
    new MutationObserver(() => {
      if (!dialog.open) return;
      opened.push(performance.now());
      setTimeout(() => dialog.querySelector('[data-answer="deny"]').click(), 0);
    }).observe(dialog, { attributes: true, attributeFilter: ["open"] });
  });
})();"""


async def measure(server, agent_id: str, agent_key: str,
                  manifest: dict) -> tuple[list[float], list[float], list[tuple[int, int, float]], list[float], str]:
    from hashee_sdk import AgentRuntime, HttpxTransport, KeyPair, LocalStore

    async with browser_device(server, agent_id, permissions=["clipboard-read", "clipboard-write"],
                              init_script=TIMING) as (page, relation_id):
        script = await page.evaluate("document.querySelector('script[type=module][src*=\"device\"]').src")
        http = HttpxTransport(server.url, agent_key)
        runtime = AgentRuntime(transport=http, agent_id=agent_id, keys=KeyPair.generate(), manifest=manifest,
                               store=LocalStore.in_memory())
        await runtime.register_key()
        ready = asyncio.Event()
        listener = asyncio.create_task(runtime.listen(server.url, agent_key, connected=ready))
        loads: list[float] = []
        deadline = time.monotonic() + TIME_BOX_S
        try:
            await asyncio.wait_for(ready.wait(), timeout=30)
            for i in range(WARM_UP + CALLS):
                assert time.monotonic() < deadline, "over the time box"
                result = await runtime.call_tool(relation_id, "read_clipboard", {}, timeout=30)
                assert (result.status, result.reason) == ("denied", "user_refused"), (i, result.status, result.reason)
                loads.append(os.getloadavg()[0])
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
            await http.aclose()
        timings = await page.evaluate("window.__bench")
    arrivals, opened = timings["arrivals"], timings["opened"]
    assert len(opened) == WARM_UP + CALLS, (len(arrivals), len(opened))
    samples, storage, dialog = [], [], []
    for shown in opened:  # one call at a time: the last tool call to arrive before its prompt opened
        arrived = max(a for a in arrivals if a <= shown)
        samples.append((shown - arrived) / 1e3)
        dialog.append((shown - max(m for m in timings["modal"] if arrived <= m <= shown)) / 1e3)
        within = [(start, end, write) for start, end, write in timings["stored"]
                  if arrived <= start < shown and end is not None]
        busy, reached = 0.0, arrived  # the time any transaction was open (their union, clipped to the window)
        for start, end, _write in sorted(within):
            busy += max(0.0, min(end, shown) - max(start, reached))
            reached = max(reached, min(end, shown))
        storage.append((len(within), sum(1 for *_, write in within if write), busy / 1e3))
    return samples[WARM_UP:], loads[WARM_UP:], storage[WARM_UP:], dialog[WARM_UP:], script


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, browser_server(Path(tmp), **SETTINGS) as server:
        agent_id, agent_key, manifest = demobot(server)
        samples, loads, storage, dialog, script = asyncio.run(measure(server, agent_id, agent_key, manifest))
        with httpx.Client(trust_env=False, timeout=15) as http:
            body = http.get(script, headers={"Accept-Encoding": "identity"}).content
            served = http.get(script, headers={"Accept-Encoding": "gzip"})
    print(f"browser device, checks up to the prompt: Debian's chromium (headless), 1 uvicorn process, SQLite; "
          f"{os.cpu_count()} cores; {CALLS} calls one at a time after {WARM_UP} warm-up; read_clipboard (medium), "
          f"manifest and relation view cached, answered Deny")
    print("measured end to end in the page (the bundle exports nothing to time the SDK's decision alone): "
          "the socket message event's timeStamp → the prompt dialog's `open` (MutationObserver)")
    ms = [s * 1e3 for s in samples]
    print(f"{'tool call arrives → prompt opens':<44} median {statistics.median(ms):9.3f} ms   p95 {p95(ms):9.3f} ms"
          f"   max {max(ms):9.3f} ms   n={len(ms)}   load {min(loads):.2f}-{max(loads):.2f}   target p95 < 5 ms: "
          f"{'met' if p95(ms) < 5 else 'NOT met'}")
    counts, writes, busy = ([row[k] for row in storage] for k in range(3))
    label = "  of which Chromium's showModal()"
    print(f"{label:<44} median {statistics.median(dialog) * 1e3:9.3f} ms   "
          f"p95 {p95(dialog) * 1e3:9.3f} ms   (the top layer, the page made inert, the focus: the browser's own work)")
    rest = [s - d for s, d in zip(samples, dialog, strict=True)]
    print(f"{'  the rest (parsing, crypto, checks, filling)':<44} median {statistics.median(rest) * 1e3:9.3f} ms   "
          f"p95 {p95(rest) * 1e3:9.3f} ms")
    print(f"{'  an IndexedDB transaction open meanwhile':<44} median {statistics.median(busy) * 1e3:9.3f} ms   "
          f"p95 {p95(busy) * 1e3:9.3f} ms   transactions started per call: median {statistics.median(counts):.0f}, "
          f"max {max(counts)} ({statistics.median(writes):.0f} readwrite, durability strict; the prompt waits for none "
          f"since the replay record's write runs beside it)")
    first, last = samples[:10], samples[-10:]
    print(f"{'  first 10 / last 10 calls (median)':<44} {statistics.median(first) * 1e3:.3f} ms / "
          f"{statistics.median(last) * 1e3:.3f} ms; transactions {statistics.median(counts[:10]):.0f} / "
          f"{statistics.median(counts[-10:]):.0f}")
    gz9, gz6 = len(gzip.compress(body, compresslevel=9)), len(gzip.compress(body, compresslevel=6))
    encoding = served.headers.get("content-encoding", "none")
    print(f"{'page script ' + script.rsplit('/', 1)[-1]:<44} {len(body) / 1024:.1f} KiB, gzip -9 {gz9 / 1024:.1f} KiB, "
          f"gzip -6 {gz6 / 1024:.1f} KiB (served with Content-Encoding: {encoding}, {served.num_bytes_downloaded / 1024:.1f} KiB "
          f"on the wire)   target < 150 KB: {'met' if gz9 < 150_000 else 'NOT met'}   load now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
