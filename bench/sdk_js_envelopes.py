"""Envelopes opened and verified per second: @hashee/sdk in Node beside the Python SDK, on the
same envelope (docs/wire-vectors.json's tool_call, opened on bob's laptop: decrypt, verify the
Ed25519 signature, check the signed bytes are canonical, read the artifact), in one run. On Node
both ways the SDK opens: openCopy (noble and tweetnacl, synchronous) and openCopyAsync (the
device's path: the platform's X25519 and Ed25519 from WebCrypto where it has them, noble where not).

Run: .venv/bin/python bench/sdk_js_envelopes.py   (sdk-js built: cd sdk-js && npm ci && npm run build;
no server). The two alternate for ROUNDS rounds so a shared machine's load falls on both; each
sample times a batch of BATCH opens. Beside each SDK, its floor: the two primitives alone with
the library it uses (Node: tweetnacl's crypto_box_open and noble's Ed25519; Python: PyNaCl, i.e.
libsodium; openCopyAsync: WebCrypto's X25519 and Ed25519 with tweetnacl's HSalsa20 + secretbox)
on a message of the same size. Prints the median and p95 per open, opens per second,
the ratios, and the load average (1 min) at the end of each side's rounds.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "sdk"))
sys.path.insert(0, str(ROOT / "bench"))

from _stats import p95  # noqa: E402
from nacl.public import Box, PrivateKey  # noqa: E402
from nacl.signing import SigningKey  # noqa: E402

from hashee_sdk import KeyPair, envelope, wire  # noqa: E402

ROUNDS = 5
SAMPLES = 10  # per round and side
BATCH = 50
NODE_SCRIPT = ROOT / "bench" / "sdk_js_envelopes.mjs"
VECTORS = json.loads((ROOT / "docs" / "wire-vectors.json").read_text("utf-8"))


def python_open() -> Any:
    laptop = KeyPair.from_secret(VECTORS["keys"]["bob_laptop"])
    agent = KeyPair.from_secret(VECTORS["keys"]["agent_runtime"])
    vector = VECTORS["tool_call"]
    senders = {agent.key_id: agent.public}

    def once() -> None:
        opened = envelope.open_copy(vector["envelope"], recipient_key_id=laptop.key_id, recipient_x25519=laptop._box_key,
                                    senders=senders, relation_id=vector["relation_id"], direction=vector["direction"])
        assert opened.artifact["call_id"] == vector["artifact"]["call_id"]
    return once


def python_floor() -> Any:
    size = len(wire.b64decode(VECTORS["tool_call"]["envelope"]["copies"][0]["ciphertext"])) - 16
    a, b = PrivateKey.generate(), PrivateKey.generate()
    nonce, message = bytes(24), bytes(size)
    boxed = Box(a, b.public_key).encrypt(message, nonce).ciphertext
    signer = SigningKey.generate()
    signed = signer.sign(message[64:])

    def once() -> None:
        Box(b, a.public_key).decrypt(boxed, nonce)  # the shared key computed per copy, as the SDK must
        signer.verify_key.verify(signed)
    return once


def timed(fn: Any) -> list[float]:
    for _ in range(BATCH):
        fn()
    samples = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        for _ in range(BATCH):
            fn()
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    node = shutil.which("node")
    if node is None or not (ROOT / "sdk-js" / "dist" / "index.node.js").exists():
        sys.exit("needs node and sdk-js built (cd sdk-js && npm ci && npm run build)")
    runs: dict[str, list[float]] = {"node": [], "node_floor": [], "node_async": [], "node_async_floor": [],
                                    "python": [], "python_floor": []}
    loads: dict[str, list[float]] = {"node": [], "python": []}
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    py_open, py_floor = python_open(), python_floor()
    for _ in range(ROUNDS):
        done = subprocess.run([node, str(NODE_SCRIPT), str(BATCH), str(SAMPLES)], cwd=ROOT / "sdk-js",
                              capture_output=True, text=True, timeout=600, check=True)
        out = json.loads(done.stdout)
        runs["node"] += out["samples"]
        runs["node_floor"] += out["floor"]
        runs["node_async"] += out["async"]
        runs["node_async_floor"] += out["async_floor"]
        native = out["native"]
        loads["node"].append(out["loadavg"][0])
        runs["python"] += timed(py_open)
        runs["python_floor"] += timed(py_floor)
        loads["python"].append(os.getloadavg()[0])

    def per_open(name: str) -> tuple[float, float]:
        return statistics.median(runs[name]) / BATCH, p95(runs[name]) / BATCH

    def load(side: str) -> str:
        return f"load {min(loads[side]):.2f}-{max(loads[side]):.2f}"

    print(f"envelope open+verify (docs/wire-vectors.json tool_call, {len(wire.b64decode(VECTORS['tool_call']['envelope']['copies'][0]['ciphertext']))} "
          f"ciphertext bytes): {ROUNDS} alternating rounds x {SAMPLES} batches of {BATCH}; Node {version}, "
          f"Python {sys.version.split()[0]}; {os.cpu_count()} cores")
    print(f"Node's WebCrypto: Ed25519 {'yes' if native['ed25519'] else 'no'}, X25519 {'yes' if native['x25519'] else 'no'}")
    for name, label, side in (("node_async", "@hashee/sdk openCopyAsync (Node, WebCrypto)", "node"),
                              ("node_async_floor", "  floor: WebCrypto X25519+Ed25519, secretbox", "node"),
                              ("node", "@hashee/sdk openCopy (Node, noble)", "node"),
                              ("node_floor", "  floor: tweetnacl box.open + noble verify", "node"),
                              ("python", "hashee_sdk open_copy (Python)", "python"),
                              ("python_floor", "  floor: PyNaCl (libsodium) decrypt + verify", "python")):
        median, tail = per_open(name)
        print(f"{label:<46} median {median * 1e6:8.1f} us  p95 {tail * 1e6:8.1f} us  "
              f"{1 / median:8.0f} opens/s   {load(side)}")
    node_median, python_median = per_open("node")[0], per_open("python")[0]
    async_median = per_open("node_async")[0]
    print(f"{'openCopyAsync over its floor':<46} x{async_median / per_open('node_async_floor')[0]:.2f}")
    print(f"{'openCopy over its floor':<46} x{node_median / per_open('node_floor')[0]:.2f}")
    print(f"{'Python over its floor':<46} x{python_median / per_open('python_floor')[0]:.2f}")
    print(f"{'openCopy / openCopyAsync (medians)':<46} x{node_median / async_median:.2f}")
    print(f"{'Node openCopyAsync / Python (time per open)':<46} x{async_median / python_median:.2f}")
    print(f"{'Node openCopy / Python (time per open)':<46} x{node_median / python_median:.2f}   "
          f"load now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
