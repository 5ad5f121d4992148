"""hashee-sdk is a package to depend on: its sdist and wheel build (``python -m build``), the
wheel installs on its own into a fresh virtualenv, and there it is typed, says its version,
carries its license and changelog, runs its console scripts, and loads neither Django nor any
module of the server. The README's links work from the sdist."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
SERVER = ("django", "rest_framework", "channels", "drf_spectacular", "hashee", "agents", "relations", "toolcalls",
          "portal", "deploy", "tests")
SUBCOMMANDS = ("validate", "hash", "diff", "card", "keygen", "sign", "verify", "prove")

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

METADATA = """
import importlib.metadata as md, importlib.resources as res, json
import hashee_sdk
meta = md.metadata("hashee-sdk")
print(json.dumps({"version": hashee_sdk.__version__, "dist_version": md.version("hashee-sdk"),
                  "py_typed": res.files("hashee_sdk").joinpath("py.typed").is_file(),
                  "license": meta.get("License-Expression"), "classifiers": meta.get_all("Classifier"),
                  "urls": meta.get_all("Project-URL"), "license_files": meta.get_all("License-File")}))
"""


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path
    venv: Path

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    """The sdist and wheel of a clean copy of sdk/, and a fresh venv with only the wheel."""
    tmp = tmp_path_factory.mktemp("package")
    source = shutil.copytree(ROOT / "sdk", tmp / "sdk",
                             ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".hashee"))
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(tmp / "dist"), str(source)],
                   check=True, timeout=600, capture_output=True)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    (wheel,) = (tmp / "dist").glob("hashee_sdk-*.whl")
    (sdist,) = (tmp / "dist").glob("hashee_sdk-*.tar.gz")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    str(wheel)], check=True, timeout=600, capture_output=True)
    yield Built(sdist=sdist, wheel=wheel, venv=venv)


def test_the_package_installs_alone_and_imports_nothing_of_the_server(built: Built, tmp_path: Path) -> None:
    done = built.run(built.bin("python"), "-I", "-c", SCRIPT, json.dumps(SERVER), cwd=tmp_path)

    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["from"].startswith(str(built.venv)) and report["modules"] > 30 and report["tools"] == 1
    assert report["server_modules_loaded"] == []


def test_the_installed_package_is_typed_versioned_and_licensed(built: Built, tmp_path: Path) -> None:
    done = built.run(built.bin("python"), "-I", "-c", METADATA, cwd=tmp_path)

    assert done.returncode == 0, done.stderr[-3000:]
    meta = json.loads(done.stdout)
    written = re.search(r'__version__ = "([^"]+)"', (ROOT / "sdk/hashee_sdk/_version.py").read_text())
    assert written is not None
    assert meta["version"] == meta["dist_version"] == written.group(1) != "0.1.0"
    assert f"## {meta['version']}" in (ROOT / "sdk/CHANGELOG.md").read_text()
    assert built.wheel.name == f"hashee_sdk-{meta['version']}-py3-none-any.whl"
    assert meta["py_typed"] is True
    assert meta["license"] == "Apache-2.0" and meta["license_files"] == ["LICENSE"]
    assert {"Typing :: Typed", "Programming Language :: Python :: 3.11"} <= set(meta["classifiers"])
    assert meta["urls"]


def test_hashee_help_names_every_subcommand_of_the_manifest_cli(built: Built, tmp_path: Path) -> None:
    done = built.run(built.bin("hashee"), "--help", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert all(re.search(rf"^  {name} ", done.stdout, re.MULTILINE) for name in SUBCOMMANDS), done.stdout


def test_hashee_validates_an_example_and_fails_on_a_missing_file(built: Built, tmp_path: Path) -> None:
    example = ROOT / "examples" / "manifest.json"

    valid = built.run(built.bin("hashee"), "validate", str(example), cwd=tmp_path)
    missing = built.run(built.bin("hashee"), "manifest", "validate", "missing.json", cwd=tmp_path)

    assert valid.returncode == 0 and json.loads(valid.stdout)["data"]["valid"] is True
    assert missing.returncode == 1 and json.loads(missing.stdout)["error"]["code"] == "FILE_NOT_FOUND"


def test_hashee_and_manage_py_manifest_run_the_same_code(built: Built, tmp_path: Path) -> None:
    old, new = ROOT / "examples" / "manifest.json", ROOT / "examples" / "manifest-v2.json"

    for args in (("hash", str(new)), ("diff", str(old), str(new)), ("card", str(new), "--name", "Files")):
        console = built.run(built.bin("hashee"), *args, cwd=tmp_path)
        server = built.run(sys.executable, str(ROOT / "manage.py"), "manifest", *args, cwd=ROOT)

        assert console.returncode == server.returncode == 0, server.stderr[-2000:]
        assert json.loads(console.stdout) == json.loads(server.stdout)


def test_hashee_mcp_without_the_extra_says_how_to_install_it(built: Built, tmp_path: Path) -> None:
    done = built.run(built.bin("hashee-mcp"), "--help", cwd=tmp_path)

    assert done.returncode == 1
    assert "pip install 'hashee-sdk[mcp]'" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_every_relative_link_of_the_readme_is_a_file_of_the_sdist(built: Built) -> None:
    with tarfile.open(built.sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    readme = (ROOT / "sdk" / "README.md").read_text()
    links = {target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", readme)}
    relative = {link for link in links if link and not re.match(r"[a-z]+:", link)}

    assert relative >= {"CHANGELOG.md", "LICENSE", "examples/first_call.py"}
    assert relative <= names, sorted(relative - names)
    assert not any(link.startswith(("../", "/")) for link in relative)


def test_constraints_lowest_pins_exactly_the_lower_bound_of_every_dependency() -> None:
    project = tomllib.loads((ROOT / "sdk" / "pyproject.toml").read_text())["project"]
    declared = [Requirement(line) for line in [*project["dependencies"], *project["optional-dependencies"]["mcp"]]]
    lower = {req.name.lower(): next(s.version for s in req.specifier if s.operator == ">=") for req in declared}
    lines = (ROOT / "sdk" / "constraints-lowest.txt").read_text().splitlines()
    pins = [Requirement(line.split("#")[0]) for line in lines if line.split("#")[0].strip()]

    assert {pin.name.lower(): str(pin.specifier) for pin in pins} == {name: f"=={v}" for name, v in lower.items()}
