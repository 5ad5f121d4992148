"""From nothing to a first tool call with the SDK's helpers only (issue 25): sdk/examples/
first_call.py, as the SDK README's quick start shows it, run against a live demo server. The
owner creates the agent, registers an identity, publishes a signed manifest and issues the
runtime's key; bob's device connects with a scope; the agent calls the tool — no raw REST.

``HASHEE_SDK_PYTHON`` runs the example on another interpreter (scripts/test: the venv of the
lowest dependency versions sdk/pyproject.toml allows), the server staying on this one."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hashee_sdk import ApiError, Owner
from hashee_sdk.core.signing import generate_private_jwk, jwk_thumbprint
from tests.e2e.live import ROOT, LiveServer, sqlite_demo_server
from tests.side_venvs import side_venv

EXAMPLE = ROOT / "sdk" / "examples" / "first_call.py"
README = ROOT / "sdk" / "README.md"

pytestmark = pytest.mark.sqlite_only


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with sqlite_demo_server(tmp_path_factory.mktemp("first-call")) as live:
        yield live


def sdk_python() -> str:
    return os.environ.get("HASHEE_SDK_PYTHON") or sys.executable


def test_the_readme_quick_start_is_the_example_as_run() -> None:
    assert EXAMPLE.read_text() in README.read_text()


def run_first_call(server: LiveServer, python: str, cwd: Path, env: dict[str, str], *, user: str = "bob") -> None:
    """``user``'s first device serves the call (a second device of one user would need approving)."""
    user_key = server.bob_key if user == "bob" else \
        server.manage("create_api_key", user, "--create-user").strip().splitlines()[-1]
    done = subprocess.run([python, str(EXAMPLE), server.url, server.alice_key, user_key, user],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)

    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "groceries: milk, eggs, coffee"
    with server.api(server.alice_key) as alice:
        mine = alice.get("/agents", params={"owner": "me", "q": "Notes"}).json()["results"]
        for notes in (agent for agent in mine if agent["name"] == "Notes"):
            agent = alice.get(f"/agents/{notes['agent_id']}").json()
            keys = alice.get(f"/agents/{notes['agent_id']}/credentials").json()["results"]
            assert agent["capability_manifest_version"] == 2 and agent["publisher_verified"] is True
            assert len(keys) == 1
    assert (cwd / ".hashee" / "owner" / "identity.jwk").stat().st_mode & 0o777 == 0o600


def test_the_quick_start_goes_from_nothing_to_a_first_tool_call(server: LiveServer, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "sdk")}  # this checkout's package, as `pip install ./sdk`

    run_first_call(server, sdk_python(), tmp_path, env)


def test_a_venv_beside_the_openai_agents_sdk_gets_its_first_tool_call_too(server: LiveServer, tmp_path: Path) -> None:
    """The package as pip installed it beside openai-agents (no PYTHONPATH to this checkout)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}

    run_first_call(server, str(side_venv("openai-agents")), tmp_path, env, user="carol")


def test_the_owner_helpers_keep_the_servers_rules(server: LiveServer) -> None:
    """alice's Owner: a dry run stores nothing; once an identity is registered an unsigned
    manifest is refused with the server's code; a rotation needs the old key; a revoked
    hak_ key stops working at once and listings never show a secret."""
    manifest = {"schema_version": "1.0", "agent_version": "1.0.0", "tools": [], "permission_scopes": []}

    async def main() -> None:
        async with Owner(server.url, server.alice_key) as owner:
            agent_id = str((await owner.create_agent("Owner helpers", manifest))["agent_id"])
            dry = await owner.publish(agent_id, {**manifest, "agent_version": "1.0.1"}, dry_run=True)
            first, second = generate_private_jwk(), generate_private_jwk()
            await owner.register_identity(agent_id, first)
            with pytest.raises(ApiError) as unsigned:
                await owner.publish(agent_id, {**manifest, "agent_version": "1.0.2"})
            with pytest.raises(ApiError) as unrotated:
                await owner.register_identity(agent_id, second)
            rotated = await owner.register_identity(agent_id, second, rotate_from=first)
            published = await owner.publish(agent_id, {**manifest, "agent_version": "1.0.3"}, sign_with=second,
                                            expected_version=1)
            agent_key = await owner.issue_agent_key(agent_id, name="runtime")
            (listed,) = await owner.agent_keys(agent_id)
            with server.api(agent_key) as runtime:
                before = runtime.get(f"/agents/{agent_id}/keys").status_code
                await owner.revoke_agent_key(agent_id, listed["key_id"])
                after = runtime.get(f"/agents/{agent_id}/keys").status_code

        assert dry["dry_run"] is True and dry["capability_manifest_version"] == 2  # what it would be
        assert unsigned.value.code == "MANIFEST_SIGNATURE_REQUIRED"
        assert unrotated.value.code == "IDENTITY_KEY_EXISTS"
        assert rotated["kid"] == jwk_thumbprint(second)
        assert published["capability_manifest_version"] == 2 and published["publisher_verified"] is True  # the dry run stored nothing
        assert agent_key.startswith("hak_") and listed["name"] == "runtime" and "secret" not in listed
        assert (before, after) == (200, 401)

    asyncio.run(main())
