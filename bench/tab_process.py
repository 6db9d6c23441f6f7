"""The aiortc console tabs the bench runs each as its own process, so that their CPU is not
the agent's (browser_load.py, ring_tab.py): each takes Relay's WebSocket address (`--ws`,
with its token) and writes what it measured, JSON, to `--out`."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path


def tab_main(parser: argparse.ArgumentParser, main_async: Callable[..., Awaitable[dict]]) -> None:
    """Add `--ws` and `--out` to the script's own `parser`, read the command line, run
    `main_async(args)` and write the dict it returns to `--out` as JSON."""
    parser.add_argument("--ws", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.write_text(json.dumps(asyncio.run(main_async(args))))
