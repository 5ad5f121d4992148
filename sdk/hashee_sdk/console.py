"""The console script ``hashee-mcp``: the MCP bridge (:mod:`hashee_sdk.mcp_server`), or, when
the optional ``mcp`` package is not installed, one line saying how to install it (exit 1)
rather than a traceback."""

from __future__ import annotations

import sys

MCP_MISSING = ("hashee-mcp: the MCP bridge needs the official `mcp` package, an optional dependency; "
               "install it with: pip install 'hashee-sdk[mcp]'")


def mcp_main(argv: list[str] | None = None) -> int:
    try:
        from hashee_sdk import mcp_server
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("mcp"):  # mcp, mcp_types: anything else is a real bug
            raise
        print(MCP_MISSING, file=sys.stderr)
        return 1
    return mcp_server.main(argv)


if __name__ == "__main__":
    sys.exit(mcp_main())
