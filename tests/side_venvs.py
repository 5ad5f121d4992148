"""Virtualenvs of their own for the SDK, built from the registry with pip (its cache keeps a
rebuild fast) and reused while their inputs are unchanged:

* ``lowest``: hashee-sdk[mcp] on the lowest version of every dependency its ranges allow
  (``sdk/constraints-lowest.txt``), with pytest and hypothesis as requirements-dev.txt pins
  them: the SDK's tests run there once more (scripts/test).
* ``openai-agents``: hashee-sdk[mcp] beside the OpenAI Agents SDK
  (``examples/openai_agents/requirements.txt``): pip resolves the two together or fails, and
  ``examples/openai_agents/list_and_call.py`` runs there.

``python -m tests.side_venvs NAME`` builds one and prints its interpreter; tests call
:func:`side_venv`. The SDK is installed from a clean copy of ``sdk/`` (no build/ left in the
checkout), so a change to its code or ranges rebuilds the venv.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = Path(os.environ.get("HASHEE_RUN_DIR") or ROOT / ".run")
LOWEST = ROOT / "sdk" / "constraints-lowest.txt"
OPENAI_AGENTS = ROOT / "examples" / "openai_agents" / "requirements.txt"
PIP = ("-m", "pip", "install", "-q", "--disable-pip-version-check")
INSTALL_TIMEOUT_S = 900


def dev_pins(*names: str) -> list[str]:
    """requirements-dev.txt's pins of ``names`` (``pytest==…``), so the side venvs test with the same tools."""
    pins = [line.split("#")[0].strip() for line in (ROOT / "requirements-dev.txt").read_text().splitlines()]
    found = [pin for pin in pins if pin.split("==")[0].lower() in names]
    assert len(found) == len(names), f"requirements-dev.txt pins {found}, not all of {names}"
    return found


def _sdk_files() -> list[Path]:
    sdk = ROOT / "sdk"
    return sorted(p for p in sdk.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and "build" not in p.relative_to(sdk).parts and ".egg-info" not in str(p))


def _stamp(inputs: list[Path], extra: list[str]) -> str:
    digest = hashlib.sha256("\n".join(extra).encode())
    for path in inputs:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _recipes() -> dict[str, tuple[list[Path], list[str]]]:
    """name → (files whose change rebuilds it, pip arguments besides the SDK)."""
    return {
        "lowest": ([LOWEST], ["-c", str(LOWEST), *dev_pins("pytest", "hypothesis")]),
        "openai-agents": ([OPENAI_AGENTS], ["-r", str(OPENAI_AGENTS), *dev_pins("pytest")]),
    }


def side_venv(name: str) -> Path:
    """The interpreter of side venv ``name``, built first when missing or out of date (one
    builder at a time: pytest-xdist's workers may ask together)."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with (RUN_DIR / f"venv-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _built(name)


def _built(name: str) -> Path:
    inputs, args = _recipes()[name]
    venv = RUN_DIR / f"venv-{name}"
    stamp = venv / f".built-{_stamp([*inputs, *_sdk_files()], args)}"
    python = venv / "bin" / "python"
    if stamp.exists() and python.exists():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    with tempfile.TemporaryDirectory() as tmp:
        source = shutil.copytree(ROOT / "sdk", Path(tmp) / "sdk",
                                 ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".hashee"))
        done = subprocess.run([str(python), *PIP, f"{source}[mcp]", *args], capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"pip could not build the {name} venv:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    checked = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True, text=True, timeout=120,
                             check=False)
    if checked.returncode != 0:
        raise RuntimeError(f"the {name} venv has conflicting requirements:\n{checked.stdout}")
    stamp.touch()
    return python


if __name__ == "__main__":
    print(side_venv(sys.argv[1]))
