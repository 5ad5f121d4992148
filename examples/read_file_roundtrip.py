"""A real ``read_file`` round trip through a running Hashee server, end to end encrypted.

One script plays both sides. As the agent's owner it keeps an identity key (SPEC §9.1) and
publishes the manifest signed with it; the agent runtime (``hak_`` key) publishes its key
vouched for by that identity and calls ``read_file`` on bob's device. Bob's client
(``hsk_`` key) verifies the call — its envelope, expiry and replay record, the runtime
key against the agent's pinned identity, the manifest's signature and hash and the
version bob consented to — asks on this terminal with the relation's safety number (the
scope ``filesystem:read`` is medium: asked once per session), reads the file and answers
to the call's one-time reply key; the agent prints what it got and the safety number it
sees, which must be the same. The server only ever carries ciphertext.

    .venv/bin/python examples/read_file_roundtrip.py --url http://127.0.0.1:8000 \\
        --owner-key hsk_… --user-key hsk_… README.md          # creates the agent, its key, the relation
    .venv/bin/python examples/read_file_roundtrip.py --agent-id … --agent-key hak_… --user-key hsk_… --yes FILE

Settings may also come from the environment: HASHEE_URL, HASHEE_OWNER_KEY,
HASHEE_USER_KEY, HASHEE_AGENT_ID, HASHEE_AGENT_KEY, HASHEE_RELATION_ID. Key pairs and
the audit log (which also holds the device's replay record and pinned agent keys) are
kept in ``--state-dir`` (default ``~/.hashee-example/``), so a second run reuses the same
published keys.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hashee_sdk import (  # noqa: E402
    AgentRuntime,
    ApiError,
    AuditLog,
    HttpxTransport,
    KeyPair,
    LocalStore,
    Notice,
    PromptRequest,
    SdkError,
    UserClient,
)
from hashee_sdk.core import signing  # noqa: E402 - after the path is set, as a script
from hashee_sdk.rest import Transport, call_api  # noqa: E402

SCOPE = "filesystem:read"
AGENT_NAME = "FileReader (example)"
MAX_READ_BYTES = 65536
MANIFEST: dict[str, Any] = {
    "schema_version": "1.0", "agent_version": "1.0.0",
    "tools": [{
        "name": "read_file", "description_i18n_key": "agent.cap.read_file.description",
        "description_fallback": "Read a file you choose from this device",
        "input_schema": {"type": "object", "additionalProperties": False, "required": ["path"],
                         "properties": {"path": {"type": "string", "maxLength": 1024},
                                        "offset": {"type": "integer", "minimum": 0},
                                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_READ_BYTES}}},
        "permission_scope": SCOPE, "timeout_ms": 5000,
    }],
    "permission_scopes": [{"id": SCOPE, "label_i18n_key": "agent.scope.filesystem_read.label",
                           "sensitivity": "medium"}],
    "capability_flags": {"supports_artifacts": True},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="the file bob's device reads for the agent")
    parser.add_argument("--url", default=env("HASHEE_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--user-key", default=env("HASHEE_USER_KEY"), help="bob's hsk_ key")
    parser.add_argument("--owner-key", default=env("HASHEE_OWNER_KEY"), help="the owner's hsk_ key (to create the agent)")
    parser.add_argument("--agent-id", default=env("HASHEE_AGENT_ID"))
    parser.add_argument("--agent-key", default=env("HASHEE_AGENT_KEY"),
                        help="the agent's hak_ key; without it, `manage.py create_agent_key` makes one")
    parser.add_argument("--relation-id", default=env("HASHEE_RELATION_ID"))
    parser.add_argument("--state-dir", type=Path, default=Path("~/.hashee-example").expanduser(),
                        help="where the private keys and the audit log are kept (default ~/.hashee-example)")
    parser.add_argument("--yes", action="store_true", help="approve the prompt without asking (non-interactive)")
    parser.add_argument("--limit", type=int, default=None, help="read at most this many bytes")
    args = parser.parse_args(argv)
    if not args.user_key:
        parser.error("--user-key (or HASHEE_USER_KEY) is required")
    if not args.agent_id and not args.owner_key:
        parser.error("give --agent-id, or --owner-key to create an agent")
    return args


# --- bootstrap through the REST API ----------------------------------------------------


async def ensure_agent(args: argparse.Namespace) -> tuple[str, dict[str, Any], dict[str, str] | None]:
    """(agent_id, its manifest, the identity key when we are its owner): the given agent, or
    the owner's (created, then given an identity and a signed manifest)."""
    if args.agent_id:
        reader = HttpxTransport(args.url, args.user_key)
        agent = await call_api(reader, "GET", f"/agents/{args.agent_id}")
        await reader.aclose()
        return str(args.agent_id), dict(agent["capability_manifest"]), None
    owner = HttpxTransport(args.url, args.owner_key)
    try:
        agent_id, manifest = await find_or_create_agent(owner)
        identity = identity_key(args.state_dir)
        return agent_id, await ensure_signed(owner, agent_id, manifest, identity), identity
    finally:
        await owner.aclose()


async def ensure_signed(owner: Transport, agent_id: str, manifest: dict[str, Any],
                        identity: dict[str, str]) -> dict[str, Any]:
    """Publish our identity key for the agent and its manifest signed with it (SPEC §9.1)."""
    kid = signing.jwk_thumbprint(identity)
    try:
        current = (await call_api(owner, "GET", f"/agents/{agent_id}/identity"))["kid"]
    except ApiError as exc:
        if exc.status != 404:
            raise
        current = None
    if current != kid:
        # Not ours (another state dir made it): without its private key only a reset replaces it.
        body: dict[str, Any] = {"jwk": signing.public_of(identity),  # v1.2: proof that we hold the key
                                 "proof": signing.sign_identity_proof(identity, agent_id=agent_id),
                                 **({"reset": True} if current else {})}
        await call_api(owner, "PUT", f"/agents/{agent_id}/identity", json=body)
        print(f"[owner] identity key {kid} published{' (reset: users consent again)' if current else ''}")
    agent = await call_api(owner, "GET", f"/agents/{agent_id}")
    if agent.get("publisher_verified"):
        return dict(agent["capability_manifest"])
    major, minor, patch = (int(part) for part in str(manifest["agent_version"]).split("-")[0].split(".")[:3])
    signed = {**manifest, "agent_version": f"{major}.{minor}.{patch + 1}"}
    await call_api(owner, "PATCH", f"/agents/{agent_id}", json={
        "capability_manifest": signed, "capability_manifest_signature": signing.sign_manifest(signed, identity)})
    print(f"[owner] manifest {signed['agent_version']} published, signed by {kid}")
    return signed


async def find_or_create_agent(owner: Transport) -> tuple[str, dict[str, Any]]:
    """The owner's agent named AGENT_NAME, created on the first run only: a second run
    reuses it instead of adding another agent to the owner's list."""
    page = await call_api(owner, "GET", "/agents?" + urlencode({"owner": "me", "q": AGENT_NAME, "page_size": 100}))
    mine = [a for a in page["results"] if a["name"] == AGENT_NAME]
    if mine:
        print(f"reusing agent {mine[0]['agent_id']} ({AGENT_NAME})")
        return str(mine[0]["agent_id"]), dict(mine[0]["capability_manifest"] or MANIFEST)
    agent = await call_api(owner, "POST", "/agents", json={"name": AGENT_NAME, "capability_manifest": MANIFEST})
    print(f"created agent {agent['agent_id']} ({AGENT_NAME})")
    return str(agent["agent_id"]), MANIFEST


def ensure_agent_key(args: argparse.Namespace, agent_id: str) -> str:
    if args.agent_key:
        return str(args.agent_key)
    print("creating an agent key with `manage.py create_agent_key` (same machine and DATABASE_URL as the server)")
    completed = subprocess.run([sys.executable, str(ROOT / "manage.py"), "create_agent_key", agent_id],  # noqa: S603
                               capture_output=True, text=True, check=True, cwd=ROOT)
    return completed.stdout.strip().splitlines()[-1]


async def ensure_relation(user: Transport, agent_id: str, relation_id: str | None) -> str:
    """A live relation of bob with the agent that grants filesystem:read."""
    if relation_id:
        relation = await call_api(user, "GET", f"/h2a/relations/{relation_id}")
    else:
        page = await call_api(user, "GET", "/h2a/relations?page_size=100")
        live = [r for r in page["results"] if r["agent_id"] == agent_id and r["status"] != "revoked"]
        relation = live[0] if live else await call_api(user, "POST", "/h2a/relations",
                                                       json={"agent_id": agent_id, "granted_scopes": [SCOPE]})
    if SCOPE not in relation["granted_scopes"] or relation["status"] != "active":
        relation = await call_api(user, "PATCH", f"/h2a/relations/{relation['relation_id']}", json={
            "granted_scopes": sorted({*relation["granted_scopes"], SCOPE}),
            "acknowledged_manifest_version": relation["current_manifest_version"]})
    return str(relation["relation_id"])


def key_pair(state_dir: Path, name: str) -> KeyPair:
    """A key pair kept in ``state_dir/name.json`` (mode 0600): private keys stay here."""
    return KeyPair.from_secret(_private_file(state_dir / f"{name}.json", lambda: KeyPair.generate().secret()))


def identity_key(state_dir: Path) -> dict[str, str]:
    """The owner's private identity JWK, kept in ``state_dir/identity.jwk`` (mode 0600) — as
    ``manage.py manifest keygen`` would write it."""
    return _private_file(state_dir / "identity.jwk", signing.generate_private_jwk)


def _private_file(path: Path, make: Any) -> Any:
    if path.exists():
        return json.loads(path.read_text())
    value = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(value, handle)
    return value


# --- bob's device ----------------------------------------------------------------------


def terminal_prompt(auto_yes: bool) -> Any:
    def ask(request: PromptRequest) -> bool:
        what = f" ({request.tool_description})" if request.tool_description else ""
        publisher = (f"safety number {request.safety_number}" if request.safety_number
                     else "publisher unverified (the agent has no identity key)")
        print(f"\n[bob's device] {request.agent_name or 'agent ' + request.agent_id} wants to "
              f"{request.tool_name}{what} {json.dumps(request.arguments)}\n"
              f"  permission {request.scope} ({request.sensitivity}), manifest v{request.manifest_version}; "
              f"{publisher}"
              + ("\n  newly granted since this device last looked: confirm it here" if request.newly_granted else "")
              + (f"\n  you granted it {request.grant}" if request.grant != "always" else ""))
        if auto_yes:
            print("  Allow? [y/N] y (--yes)")
            return True
        return input("  Allow? [y/N] ").strip().lower() in ("y", "yes")

    return ask


def tell_bob(notice: Notice) -> None:
    """What the device tells bob besides prompts: a call refused without asking him (a paused
    permission, a grant he did not give), a used once-grant the server did not let it
    withdraw, a high grant unused for 90 days (with the offer to withdraw it)."""
    print(f"\n[bob's device] {notice.text}")


def read_file(arguments: dict[str, Any]) -> dict[str, Any]:
    """The real handler: read part of a local file as text."""
    path = Path(arguments["path"]).expanduser()
    offset, limit = int(arguments.get("offset", 0)), int(arguments.get("limit", MAX_READ_BYTES))
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read(limit + 1)
    return {"path": str(path), "content": data[:limit].decode("utf-8", "replace"), "bytes": min(len(data), limit),
            "truncated": len(data) > limit}


# --- the round trip ------------------------------------------------------------------


async def round_trip(args: argparse.Namespace) -> int:
    agent_id, manifest, identity = await ensure_agent(args)
    agent_key = ensure_agent_key(args, agent_id)
    user_http, agent_http = HttpxTransport(args.url, args.user_key), HttpxTransport(args.url, agent_key)
    try:
        relation_id = await ensure_relation(user_http, agent_id, args.relation_id)
        client = UserClient(transport=user_http, keys=key_pair(args.state_dir, "device"), device_id="example-device",
                            prompt=terminal_prompt(args.yes), handlers={"read_file": read_file},
                            audit=AuditLog(args.state_dir / "audit.sqlite3"), on_notice=tell_bob)
        agent = AgentRuntime(transport=agent_http, agent_id=agent_id, keys=key_pair(args.state_dir, f"agent-{agent_id}"),
                             manifest=manifest, identity_key=identity,
                             store=LocalStore(args.state_dir / f"agent-{agent_id}.sqlite3"))  # pins survive restarts
        await client.register_device()
        await agent.register_key()
        return await call_with_listeners(args, client, agent, agent_key, relation_id)
    finally:
        await user_http.aclose()
        await agent_http.aclose()


async def call_with_listeners(args: argparse.Namespace, client: UserClient, agent: AgentRuntime, agent_key: str,
                              relation_id: str) -> int:
    ready = [asyncio.Event(), asyncio.Event()]
    listeners = [asyncio.create_task(client.listen(args.url, args.user_key, connected=ready[0])),
                 asyncio.create_task(agent.listen(args.url, agent_key, connected=ready[1]))]
    try:
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in ready)), timeout=10)
        arguments: dict[str, Any] = {"path": str(Path(args.path).resolve())}
        if args.limit is not None:
            arguments["limit"] = args.limit
        print(f"[agent] read_file {arguments['path']} in relation {relation_id}")
        result = await agent.call_tool(relation_id, "read_file", arguments)
        number = await agent.safety_number(relation_id)
        print(f"[agent] safety number {number}" if number else "[agent] no identity key: no safety number")
        await client.unused_grants()  # told through tell_bob: high grants unused for 90 days
    finally:
        for task in listeners:
            task.cancel()
        await asyncio.gather(*listeners, return_exceptions=True)
    return report(result.status, result.reason, result.result)


def report(status: str, reason: str | None, result: Any) -> int:
    if status != "ok":
        print(f"[agent] {status}: {reason}")
        return 1
    print(f"[agent] got {result['bytes']} bytes{' (truncated)' if result['truncated'] else ''}:")
    print(result["content"])
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return asyncio.run(round_trip(args))
    except (SdkError, subprocess.CalledProcessError, TimeoutError) as exc:
        print(f"failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
