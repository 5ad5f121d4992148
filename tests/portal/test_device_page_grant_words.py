"""The browser device page says a grant's options in the portal's words (issue 26): the same
grant reads the same on the connection page and on bob's device, in English and in Chinese.

The page's grantWords (portal/device_src/src/grantWords.ts, bundled by esbuild as the page's
build does) and the portal's option_words (portal/grant_display.py) are given the same grants,
and the page the texts the portal hands it (portal/browser_device.py). Until's moment is left
out: the portal says it in the site's time zone, the page in the device's. A narrowing the
portal's choices did not make is said by each as "within limits", never as the part of it
that would read wider than it is.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.utils import translation
from django.utils.translation import gettext

from portal.browser_device import device_texts
from portal.grant_choices import arguments_schema
from portal.grant_display import option_words

ROOT = Path(__file__).resolve().parents[2]
PAGE_SOURCES = ROOT / "portal" / "device_src"
LIMITED = "<within limits>"
TOOL = {"name": "read_file", "description_fallback": "Read a file", "permission_scope": "filesystem:read",
        "sensitivity": "medium",
        "input_schema": {"type": "object", "additionalProperties": False, "required": ["path"], "properties": {
            "path": {"type": "string", "maxLength": 512},
            "encoding": {"type": "string", "enum": ["utf-8", "latin-1", "ascii"]},
            "lines": {"type": "integer", "enum": [10, 100]}}}}
MANIFEST = {"tools": [TOOL]}
PREFIX = arguments_schema({"path": "/home/bob/docs/"}, {})
GRANTS: dict[str, dict[str, Any]] = {
    "once": {"once": True},
    "a folder": {"arguments": {"read_file": PREFIX}},
    "a folder of special characters": {"arguments": {"read_file": arguments_schema({"path": "C:\\My (docs) [1]+$^/"}, {})}},
    "one value": {"arguments": {"read_file": arguments_schema({}, {"encoding": ["utf-8"]})}},
    "some values": {"arguments": {"read_file": arguments_schema({}, {"encoding": ["utf-8", "ascii"]})}},
    "numbers": {"arguments": {"read_file": arguments_schema({}, {"lines": [10, 100]})}},
    "a folder and values, once": {"once": True, "arguments": {"read_file": arguments_schema(
        {"path": "/home/bob/"}, {"encoding": ["latin-1", "ascii"]})}},
    "a folder and a length (API)": {"arguments": {"read_file": {**PREFIX, "properties": {"path": {
        **PREFIX["properties"]["path"], "maxLength": 40}}}}},
    "a folder that may climb out (API)": {"arguments": {"read_file": {**PREFIX, "properties": {"path": {
        "type": "string", "pattern": "^/home/bob/docs/"}}}}},
    "a pattern, not a prefix (API)": {"arguments": {"read_file": {"type": "object", "required": ["path"], "properties": {
        "path": {"type": "string", "pattern": "^/home/.*/docs/", "not": PREFIX["properties"]["path"]["not"]}}}}},
    "an unrequired folder (API)": {"arguments": {"read_file": {k: v for k, v in PREFIX.items() if k != "required"}}},
    "nothing said (API)": {"arguments": {"read_file": {"type": "object"}}},
}

HARNESS = """
import { build } from "esbuild";
const [entry, sdk] = process.argv.slice(1);
globalThis.document = { documentElement: { lang: "en" } };
const bundled = await build({ entryPoints: [entry], alias: { "@hashee/sdk": sdk }, bundle: true, format: "esm",
  platform: "browser", write: false, logLevel: "error" });
const { grantWords } = await import("data:text/javascript;base64," + Buffer.from(bundled.outputFiles[0].text).toString("base64"));
let input = "";
for await (const chunk of process.stdin) input += chunk;
const { texts, grants } = JSON.parse(input);
process.stdout.write(JSON.stringify(Object.fromEntries(Object.entries(grants).map(([name, g]) => [name, grantWords(g, texts)]))));
"""


def page_words(texts: dict[str, Any]) -> dict[str, list[str]]:
    node = shutil.which("node")
    if node is None or not (PAGE_SOURCES / "node_modules" / "esbuild").is_dir():
        pytest.fail("Needs Node and the device page's packages (cd portal/device_src && npm ci; "
                    "scripts/check-device-bundle does it).", pytrace=False)
    done = subprocess.run([node, "--input-type=module", "-e", HARNESS, str(PAGE_SOURCES / "src" / "grantWords.ts"),
                           str(ROOT / "sdk-js" / "src" / "index.ts")], cwd=PAGE_SOURCES, capture_output=True, text=True,
                          input=json.dumps({"texts": texts, "grants": GRANTS}), timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    words: dict[str, list[str]] = json.loads(done.stdout)
    limited = _limited(str(texts["grant_limited"]))
    return {name: [LIMITED if limited.fullmatch(w) else w for w in lines] for name, lines in words.items()}


def portal_words() -> dict[str, list[str]]:
    limited = _limited(gettext("“%(tool)s” only within limits set outside this page"))
    said = {name: [html.unescape(re.sub(r"<[^>]+>", "", str(w))) for w in option_words("filesystem:read", g, MANIFEST)]
            for name, g in GRANTS.items()}
    return {name: [LIMITED if limited.fullmatch(w) else w for w in lines] for name, lines in said.items()}


def _limited(template: str) -> re.Pattern[str]:
    """Any line of ``template`` (a "within limits" text), whatever tool it names."""
    return re.compile(re.escape(template).replace(re.escape("%(tool)s"), ".+"))


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_the_page_says_each_grant_as_the_portal_does(language: str) -> None:
    with translation.override(language):
        texts = device_texts()
        portal = portal_words()

    page = page_words(texts)

    assert page == portal
    assert portal["a folder"] != [LIMITED] and portal["a folder and a length (API)"] == [LIMITED]


def test_in_english_a_grant_reads_in_plain_words() -> None:
    with translation.override("en"):
        page = page_words(device_texts())

    assert page["a folder and values, once"] == ["Only this time", "Only when path starts with /home/bob/",
                                                 "Only when encoding is one of: latin-1, ascii"]
    assert page["a folder of special characters"] == ["Only when path starts with C:\\My (docs) [1]+$^/"]
    assert page["one value"] == ["Only when encoding is utf-8"]
    assert page["numbers"] == ["Only when lines is one of: 10, 100"]
    assert page["a folder that may climb out (API)"] == [LIMITED]
