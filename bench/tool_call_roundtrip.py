"""A whole tool call through a running server: agent → server → bob's device → server →
agent, with the SDK at both ends (envelope v2 both ways, the device's checks, its replay
record on disk, the low-sensitivity ``send_notification`` tool: no prompt), over the two sockets.

Run: DATABASE_URL=postgres://… REDIS_URL=redis://… .venv/bin/python bench/tool_call_roundtrip.py [--identity]
(``--identity``: the agent has an identity key and signs its manifest; one uvicorn worker from deploy/local.py; 127.0.0.1 only; a bounded number of calls, one
at a time). Prints the median and p95 of the round trip in milliseconds.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _stats import row  # noqa: E402

CALLS = 50  # with the warm-up, under the 60 tool calls per minute an agent may send
WARM_UP = 5
IDENTITY = "--identity" in sys.argv


def setup_world() -> dict[str, Any]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hashee.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from agents import services as agent_services
    from agents.apikey_services import api_key_create
    from agents.demo import DEMO_MANIFEST
    from relations import services as relation_services

    stamp = f"{int(time.time())}-{os.getpid()}"
    owner, user = User.objects.create(username=f"rt-owner-{stamp}"), User.objects.create(username=f"rt-bob-{stamp}")
    agent = agent_services.agent_create(owner=owner, name=f"round trip {stamp}", capability_manifest=DEMO_MANIFEST)[0]
    world: dict[str, Any] = {"agent_id": str(agent.pk), "manifest": DEMO_MANIFEST, "identity": None}
    if IDENTITY:
        world.update(identify(owner, agent.pk))
    relation = relation_services.relation_create(user=user, agent_id=agent.pk, granted_scopes=["notification:send"])
    return {**world, "relation_id": str(relation.pk), "agent_key": api_key_create(user=owner, agent=agent)[1],
            "user_key": api_key_create(user=user)[1]}


def identify(owner: Any, agent_id: Any) -> dict[str, Any]:
    """SPEC §9.1: an identity key and a manifest signed with it (the device then checks the
    signature once per version, and the runtime key's vouching once per key)."""
    from agents import identity as identity_services
    from agents import services as agent_services
    from agents.demo import DEMO_MANIFEST
    from hashee_sdk.core import signing

    private = signing.generate_private_jwk()
    identity_services.identity_key_publish(agent_id=agent_id, actor=owner, jwk=signing.public_of(private))
    manifest = {**DEMO_MANIFEST, "agent_version": "1.0.1"}
    agent_services.agent_update(agent_id=agent_id, actor=owner, capability_manifest=manifest,
                                capability_manifest_signature=signing.sign_manifest(manifest, private))
    return {"manifest": manifest, "identity": private}


async def round_trips(world: dict[str, Any], url: str, state: Path) -> list[float]:
    from hashee_sdk import AgentRuntime, AuditLog, HttpxTransport, KeyPair, UserClient

    user_http, agent_http = HttpxTransport(url, world["user_key"]), HttpxTransport(url, world["agent_key"])
    client = UserClient(transport=user_http, keys=KeyPair.generate(), device_id="bench", prompt=lambda request: True,
                        handlers={"send_notification": lambda arguments: {"shown": True}}, audit=AuditLog(state / "audit.db"))
    options = {"identity_key": world["identity"]} if world["identity"] is not None else {}
    agent = AgentRuntime(transport=agent_http, agent_id=world["agent_id"], keys=KeyPair.generate(),
                         manifest=world["manifest"], **options)
    await client.register_device()
    await agent.register_key()
    ready = [asyncio.Event(), asyncio.Event()]
    listeners = [asyncio.create_task(client.listen(url, world["user_key"], connected=ready[0])),
                 asyncio.create_task(agent.listen(url, world["agent_key"], connected=ready[1]))]
    samples = []
    try:
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in ready)), timeout=30)
        for i in range(WARM_UP + CALLS):
            started = time.perf_counter()
            result = await agent.call_tool(world["relation_id"], "send_notification", {"title": f"#{i}"}, timeout=30)
            assert result.ok, (result.status, result.reason)
            if i >= WARM_UP:
                samples.append(time.perf_counter() - started)
    finally:
        for task in listeners:
            task.cancel()
        await asyncio.gather(*listeners, return_exceptions=True)
        await user_http.aclose()
        await agent_http.aclose()
    return samples


def main() -> None:
    world = setup_world()
    from deploy.local import Deployment

    with Deployment(workers=1) as deployment, tempfile.TemporaryDirectory() as state:
        samples = asyncio.run(round_trips(world, deployment.urls[0], Path(state)))
    print(f"tool call round trip: 1 uvicorn worker, PostgreSQL, Redis; {os.cpu_count()} cores; "
          f"{CALLS} calls one at a time after {WARM_UP} warm-up; "
          f"{'an identified agent (signed manifest, vouched key)' if IDENTITY else 'an agent without identity key'}")
    print(row("agent → server → device → server → agent", samples, "ms"))


if __name__ == "__main__":
    main()
