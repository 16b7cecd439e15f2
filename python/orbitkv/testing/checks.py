"""The check lines the real-engine gates print: one line per check, ``ok``
or ``FAILED``, its name and the detail in parentheses, counted for the
gate's summary line."""

from __future__ import annotations

__all__ = ["CheckLines"]


class CheckLines:
    """``check`` prints and counts; ``total`` and ``passed`` count checks,
    ``failed`` lists the names of the failed ones."""

    def __init__(self) -> None:
        self.passed = self.total = 0
        self.failed: list[str] = []

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        """Print ``name``'s line (``ok`` truthy: passed) and count it;
        returns ``bool(ok)``."""
        self.total += 1
        self.passed += bool(ok)
        if not ok:
            self.failed.append(name)
        print(f"{'ok    ' if ok else 'FAILED'}  {name}" + (f"  ({detail})" if detail else ""), flush=True)
        return bool(ok)
