"""Writing a tuning sweep's outcome: ``tuning.json`` (every grid point and the choice) and ``tuning.md``."""

from __future__ import annotations

import json
import os


def write_tuning(out: str, result: dict, markdown_lines: list[str]) -> None:
    """``out/tuning.json`` holds ``result``; ``out/tuning.md`` the lines."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tuning.json"), "w") as fh:
        json.dump(result, fh, indent=2)
    with open(os.path.join(out, "tuning.md"), "w") as fh:
        fh.write("\n".join(markdown_lines) + "\n")
