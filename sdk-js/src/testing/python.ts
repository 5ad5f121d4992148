// Runs the Python SDK (test/interop.py) when a Python with hashee_sdk is at hand:
// HASHEE_PYTHON, else the repository's .venv. Returns undefined when there is none.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("../../../", import.meta.url));
const SCRIPT = fileURLToPath(new URL("../../test/interop.py", import.meta.url));

export function pythonPath(): string | undefined {
  const candidate = process.env["HASHEE_PYTHON"] ?? `${REPO}.venv/bin/python`;
  return existsSync(candidate) ? candidate : undefined;
}

/** The interop script's answer to `input`; throws with Python's stderr if it fails. */
export function runInterop(python: string, input: unknown): any {
  const result = spawnSync(python, [SCRIPT], {
    input: JSON.stringify(input), encoding: "utf8", timeout: 60_000, cwd: REPO,
    env: { ...process.env, PYTHONPATH: `${REPO}sdk:${REPO}`, DJANGO_SETTINGS_MODULE: "" },
  });
  if (result.status !== 0) throw new Error(`interop.py failed (${String(result.status)}): ${result.stderr}`);
  return JSON.parse(result.stdout);
}
