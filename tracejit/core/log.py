"""`TRACEJIT_LOG`: which diagnostic channels print to stderr, parsed in this one place.

    TRACEJIT_LOG=recompiles,guards python train.py

A name that is not a channel is an error that lists the channels (a misspelt channel
would otherwise print nothing, silently).
"""
from __future__ import annotations

import difflib
import os
import sys

CHANNELS = {
    "passes": "the graph after every pass, with the pass's time",
    "graph": "each graph a trace records",
    "guards": "each guard that misses, with its source line",
    "recompiles": "each new trace of a function, and why",
    "compile": "each kernel compiled or loaded from the disk cache, and its seconds",
}

_PARSED: dict = {}  # the variable's text -> its channels


def channels() -> frozenset:
    """The channels TRACEJIT_LOG names (ValueError for a name that is not one)."""
    text = os.environ.get("TRACEJIT_LOG", "")
    found = _PARSED.get(text)
    if found is None:
        names = {t.strip() for t in text.split(",") if t.strip()}
        unknown = sorted(names - set(CHANNELS))
        if unknown:
            listing = "\n".join(f"  {name:<11} {what}" for name, what in CHANNELS.items())
            near = [m for name in unknown for m in difflib.get_close_matches(name, CHANNELS, 1)]
            raise ValueError(f"TRACEJIT_LOG names {', '.join(map(repr, unknown))}, which "
                             f"{'is not a channel' if len(unknown) == 1 else 'are not channels'}"
                             + (f" (did you mean {', '.join(map(repr, near))}?)" if near else "")
                             + f"; the channels are (comma-separated):\n{listing}")
        found = _PARSED[text] = frozenset(names)
    return found


def enabled(channel: str) -> bool:
    return channel in channels()


def log(channel: str, message: str) -> None:
    """Print `message` on stderr when `channel` is on."""
    if channel not in CHANNELS:
        raise KeyError(channel)
    if channel in channels():
        print(f"[tracejit:{channel}] {message}", file=sys.stderr)
