"""hashee-sdk installs on its own (`pip install ./sdk` into a fresh virtualenv) and, imported
there whole, loads neither Django nor any module of the server."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER = ("django", "rest_framework", "channels", "drf_spectacular", "hashee", "agents", "relations", "toolcalls",
          "portal", "deploy", "tests")

SCRIPT = """
import importlib, json, pkgutil, sys
import hashee_sdk

modules = [m.name for m in pkgutil.walk_packages(hashee_sdk.__path__, "hashee_sdk.")
           if not m.name.startswith("hashee_sdk.mcp")]  # the MCP bridge needs the optional mcp package
for name in modules:
    importlib.import_module(name)

@hashee_sdk.tool(scope="notes:read", sensitivity="low")
def read_note(title: str) -> str:
    return title

manifest = hashee_sdk.manifest_from_tools([read_note], agent_version="1.0.0")
server = set(json.loads(sys.argv[1]))
print(json.dumps({"from": hashee_sdk.__file__, "modules": len(modules), "tools": len(manifest["tools"]),
                  "server_modules_loaded": sorted(n for n in sys.modules if n.split(".")[0] in server)}))
"""


def test_the_package_installs_alone_and_imports_nothing_of_the_server(tmp_path: Path) -> None:
    source = shutil.copytree(ROOT / "sdk", tmp_path / "sdk",
                             ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".hashee"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(source)],
                   check=True, timeout=600, capture_output=True)

    done = subprocess.run([python, "-I", "-c", SCRIPT, json.dumps(SERVER)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=True)

    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["from"].startswith(str(venv)) and report["modules"] > 30 and report["tools"] == 1
    assert report["server_modules_loaded"] == []
