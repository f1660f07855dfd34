"""Every module of the package stays small enough to read: at most 400 lines."""

import os

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tfdpmech")
MAX_LINES = 400


def _line_counts() -> dict[str, int]:
    counts = {}
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as fh:
                    counts[os.path.relpath(path, os.path.dirname(ROOT))] = sum(1 for _ in fh)
    return counts


def test_every_module_has_at_most_400_lines():
    counts = _line_counts()
    assert counts, f"no modules found under {ROOT}"
    offenders = {path: n for path, n in sorted(counts.items()) if n > MAX_LINES}
    assert not offenders, (f"modules over {MAX_LINES} lines (split them along their seams): "
                           + ", ".join(f"{path} ({n})" for path, n in offenders.items()))
