"""What the gates and tests read from docs/adapters.md, so that the
documented text is the one that runs: the ``--kv-transfer-config`` JSON
the real-vLLM gates configure vLLM with, and the engine compatibility
table that the locks and the installed engines are checked against."""

from __future__ import annotations

import json
import os
import re

__all__ = ["ADAPTERS", "CONFIG_MARK", "TABLE_MARK", "compatibility_table", "documented_config"]

#: docs/adapters.md of this checkout.
ADAPTERS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))), "docs", "adapters.md")
#: The comment in docs/adapters.md right before the kv-transfer-config JSON block.
CONFIG_MARK = "<!-- make e2e-vllm runs this kv-transfer-config -->"
#: The comment in docs/adapters.md right before the compatibility table.
TABLE_MARK = "<!-- make vllm-contract and test_engine_locks check this table -->"


def _text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def documented_config(path: str = ADAPTERS) -> dict:
    """The JSON of the first fenced ```json block after CONFIG_MARK.
    Raises ``ValueError`` naming the file when the mark or the block is
    missing (``json.JSONDecodeError``, a ValueError, when it is not JSON)."""
    text = _text(path)
    at = text.find(CONFIG_MARK)
    m = re.compile(r"```json\n(.*?)```", re.S).search(text, at) if at >= 0 else None
    if m is None:
        raise ValueError(f"{path}: no ```json block after {CONFIG_MARK!r}")
    return json.loads(m.group(1))


def compatibility_table(path: str = ADAPTERS) -> list[dict[str, str]]:
    """The rows of the Markdown table after TABLE_MARK, one dict per row
    keyed by the header's cells (cells stripped of spaces, kept as
    written: backquotes too). Raises ``ValueError`` naming the file when
    the mark or the table's rows are missing."""
    text = _text(path)
    at = text.find(TABLE_MARK)
    if at < 0:
        raise ValueError(f"{path}: no {TABLE_MARK!r}")
    rows = []
    for line in text[at + len(TABLE_MARK):].lstrip("\n").splitlines():
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    if len(rows) < 3:
        raise ValueError(f"{path}: the table after {TABLE_MARK!r} has no rows")
    return [dict(zip(rows[0], r)) for r in rows[2:]]
