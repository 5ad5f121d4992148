"""What a device pays once per manifest version (SPEC §9.1, §9.3): checking that a 128 KiB
manifest's RFC 8785 hash is the stated one and that its detached JWS verifies with the
agent's pinned identity. The target is under 10 ms. For comparison: the hash alone, the
signature alone (canonicalization included, as verify_manifest does it), and a small
(~1 KB) manifest.

Run: .venv/bin/python bench/manifest_verify.py   (no database, no Django).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stats import measure, p95, row

from hashee_sdk.core import signing
from hashee_sdk.core.canonical import canonical_hash, canonicalize
from hashee_sdk.trust import ManifestVerifier
from tests.sdk.fakes import manifest as demo_manifest

LIMIT = 131072
REPEAT = 200


def near_limit() -> dict[str, Any]:
    """The demo manifest grown with tools until its canonical form is just under 128 KiB."""
    manifest = demo_manifest()
    template = manifest["tools"][0]
    index = 0
    while True:
        tool = {**copy.deepcopy(template), "name": f"tool_{index:04d}",
                "description_fallback": "Reads a file of the user's choosing; " * 8}
        manifest["tools"].append(tool)
        if len(canonicalize(manifest)) > LIMIT:
            manifest["tools"].pop()
            return manifest
        index += 1


def verify_once(manifest: dict[str, Any], digest: str, signature: str, identity: dict[str, str]) -> None:
    # A fresh verifier: nothing is remembered from an earlier sample.
    ManifestVerifier().verify(agent_id="a", version=1, manifest=manifest, stated_hash=digest, signature=signature,
                              identity=identity)


def main() -> None:
    private = signing.generate_private_jwk()
    identity = signing.public_of(private)
    for label, manifest in (("128 KiB manifest", near_limit()), ("a typical manifest", demo_manifest())):
        report(label, manifest, private, identity)


def report(label: str, manifest: dict[str, Any], private: dict[str, str], identity: dict[str, str]) -> None:
    digest, signature = canonical_hash(manifest), signing.sign_manifest(manifest, private)

    def both() -> None:
        verify_once(manifest, digest, signature, identity)

    def hash_only() -> None:
        canonical_hash(manifest)

    def signature_only() -> None:
        signing.verify_manifest(manifest, signature, identity)

    full = measure(both, repeat=REPEAT)
    print(f"{label}: {len(canonicalize(manifest))} canonical bytes, {len(manifest['tools'])} tools")
    print(row("  hash + signature (ManifestVerifier)", full))
    print(row("  hash only (canonical_hash)", measure(hash_only, repeat=REPEAT)))
    print(row("  signature only (verify_manifest)", measure(signature_only, repeat=REPEAT)))
    if label.startswith("128"):
        verdict = "PASS" if p95(full) < 0.010 else "FAIL"
        print(f"  target: p95 of hash + signature under 10 ms: {verdict} ({p95(full) * 1e3:.2f} ms)")


if __name__ == "__main__":
    main()
