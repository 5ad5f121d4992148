"""Run the MCP bridge of one relation (SPEC §10.2) as its own process:

    HASHEE_URL=http://127.0.0.1:8000 HASHEE_AGENT_ID=… HASHEE_AGENT_KEY=hak_… \\
        python -m hashee_sdk.mcp_server --relation REL_ID --manifest manifest.json            # stdio
    … python -m hashee_sdk.mcp_server --relation REL_ID --manifest manifest.json --http --port 8765
    … python -m hashee_sdk.mcp_server --manifest manifest.json --http --port 8765   # every relation

Over Streamable HTTP without ``--relation``, one process serves every relation of the agent,
``http://host:port/mcp/<relation_id>`` each (:mod:`hashee_sdk.mcp_agent`), with one runtime:
one socket, one key, one state folder.

Secrets come from the environment only (a command line is visible to every local user):
``HASHEE_AGENT_KEY`` (the agent's ``hak_`` key). The key goes only to ``POST /oauth/token``
and to publishing the runtime's key: every other request and the socket carry a short-lived
``hat_`` token (SPEC §10.3), renewed before it expires. ``--manifest`` (``HASHEE_MANIFEST``) is
the file the publisher publishes; it is read again when the agent's manifest changes.
``--state-dir`` keeps the runtime's key pair (mode 0600), its pins and its event cursor; by
default a folder of its own per agent, ``mcp-<agent id>`` in the SDK's state directory
(``HASHEE_STATE_DIR``, else ``$XDG_DATA_HOME/hashee``, else ``~/.local/share/hashee``), so two
bridges of different agents never share a key pair or a cursor; ``--identity-key`` (``HASHEE_IDENTITY_KEY``) names the agent's private
identity JWK file, when the runtime may sign its own key with it (SPEC §9.1). Several bridges
of one agent (several MCP hosts) need either that identity key or one ``--state-dir``: a user's
device trusts the runtime keys of an agent without identity that it saw first, and answers a
later one's calls ``denied: runtime_key_unpinned`` (the bridge warns at start when it
publishes its key beside others). Nothing is written to stdout but the protocol, and no key
or payload is logged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hashee_sdk.agent import AgentRuntime
from hashee_sdk.credentials import TokenSource
from hashee_sdk.crypto import KeyPair
from hashee_sdk.errors import SdkError
from hashee_sdk.mcp_bridge import McpBridge
from hashee_sdk.rest import HttpxTransport
from hashee_sdk.store import LocalStore, state_folder

if TYPE_CHECKING:
    from hashee_sdk.mcp_agent import McpAgentBridge

logger = logging.getLogger("hashee_sdk.mcp_server")
CONNECT_TIMEOUT_S = 15.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="python -m hashee_sdk.mcp_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--relation", default=env("HASHEE_RELATION_ID"),
                        help="the relation whose tools to serve (with --http, omit it to serve every relation "
                             "of the agent at /mcp/<relation_id>)")
    parser.add_argument("--manifest", type=Path, default=env("HASHEE_MANIFEST"), help="the agent's manifest (JSON)")
    parser.add_argument("--url", default=env("HASHEE_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--agent-id", default=env("HASHEE_AGENT_ID"))
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="where this bridge keeps its key pair and state (default: one folder per agent)")
    parser.add_argument("--identity-key", type=Path, default=env("HASHEE_IDENTITY_KEY"))
    parser.add_argument("--call-timeout", type=float, default=None, help="seconds a call may wait (default: the tool's)")
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    missing = [name for name, value in (("--relation", args.relation or args.http), ("--manifest", args.manifest),
                                        ("--agent-id", args.agent_id)) if not value]
    if missing or not env("HASHEE_AGENT_KEY"):
        parser.error(f"missing: {', '.join(missing + ([] if env('HASHEE_AGENT_KEY') else ['HASHEE_AGENT_KEY']))}")
    args.state_dir = (args.state_dir.expanduser() if args.state_dir is not None
                      else state_folder("mcp", args.agent_id))
    return args


def runtime_keys(state_dir: Path) -> KeyPair:
    """The runtime's key pair, kept in ``state_dir/runtime-keys.json`` (created mode 0600)."""
    path = state_dir / "runtime-keys.json"
    if path.exists():
        return KeyPair.from_secret(json.loads(path.read_text()))
    keys = KeyPair.generate()
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        json.dump(keys.secret(), handle)
    return keys


def read_json(path: Path) -> dict[str, Any]:
    value = json.loads(path.read_text())
    if not isinstance(value, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return value


async def serve(args: argparse.Namespace, *, bridge_class: type[McpBridge] = McpBridge) -> None:
    agent_key = os.environ["HASHEE_AGENT_KEY"]
    token = TokenSource.exchanging(args.url, agent_key)
    transport = HttpxTransport(args.url, token)
    args.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    runtime = AgentRuntime(transport=transport, agent_id=args.agent_id, keys=runtime_keys(args.state_dir),
                           manifest=read_json(args.manifest), store=LocalStore(args.state_dir / "runtime.sqlite3"),
                           identity_key=read_json(args.identity_key) if args.identity_key else None)
    bridge: McpBridge | McpAgentBridge
    if args.relation:  # stdio, or HTTP for one relation: nothing of the many-relation app is loaded
        bridge = bridge_class(runtime, args.relation, manifest_source=lambda: read_json(args.manifest),
                              call_timeout=args.call_timeout)
    else:
        from hashee_sdk.mcp_agent import McpAgentBridge

        bridge = McpAgentBridge(runtime, manifest_source=lambda: read_json(args.manifest),
                                call_timeout=args.call_timeout, bridge_class=bridge_class)
    connected = asyncio.Event()
    listener = asyncio.create_task(bridge.listen(args.url, token, connected=connected))
    try:
        keyed = HttpxTransport(args.url, agent_key)
        try:
            await runtime.register_key(transport=keyed)
        finally:
            await keyed.aclose()
        await asyncio.wait_for(connected.wait(), CONNECT_TIMEOUT_S)  # no change goes unseen once serving
        if args.http:
            await bridge.serve_http(host=args.host, port=args.port)
        else:
            assert isinstance(bridge, McpBridge)  # parse_args asks stdio for --relation
            await bridge.serve_stdio()
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        await transport.aclose()


def main(argv: list[str] | None = None, *, bridge_class: type[McpBridge] = McpBridge) -> int:
    """The command; ``bridge_class`` serves each relation (a subclass of McpBridge may, e.g.,
    add its own metrics)."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(serve(args, bridge_class=bridge_class))
    except (SdkError, OSError, ValueError, TimeoutError) as exc:
        print(f"mcp_server: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
