"""Values as text: one short line for the golden report and the report's tables."""

from __future__ import annotations

from typing import Any


def flatten(x: Any) -> list:
    """Nested lists as one flat list; anything else as a list of itself."""
    if isinstance(x, list | tuple):
        return [y for item in x for y in flatten(item)]
    return [x]


def is_number(x: Any) -> bool:
    """An int or float, not a bool."""
    return isinstance(x, int | float) and not isinstance(x, bool)


def short(value: Any, limit: int = 48) -> str:
    """None as a dash, floats to 6 significant digits, numeric lists flat to 4, cut at `limit`."""
    if value is None:
        return "—"
    if isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, list | tuple):
        flat = flatten(value)
        if len(flat) > 1 and all(is_number(v) for v in flat):
            text = "[" + ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in flat)
            text += "]"
        else:
            text = str(list(value))
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
