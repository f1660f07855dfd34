"""tools/README.md lists every script in tools/, and every ``tools/<script>`` the repository names exists."""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")
SCRIPT = re.compile(r"tools/([A-Za-z0-9_]+\.(?:py|sh))")
SKIP = {".git", ".venv", ".venv-tfprivacy", ".venv-colab", "build", "dist", "node_modules", "__pycache__"}


def _scripts() -> set[str]:
    return {name for name in os.listdir(TOOLS) if name.endswith((".py", ".sh"))}


def _index() -> str:
    with open(os.path.join(TOOLS, "README.md"), encoding="utf-8") as fh:
        return fh.read()


def _named_in_index(text: str) -> set[str]:
    return set(re.findall(r"`([A-Za-z0-9_]+\.(?:py|sh))`", text))


def test_the_index_lists_every_script_and_only_scripts_that_exist():
    scripts, listed = _scripts(), _named_in_index(_index())
    assert len(scripts) >= 10
    assert not scripts - listed, f"scripts in tools/ that tools/README.md does not list: {sorted(scripts - listed)}"
    assert not listed - scripts, f"tools/README.md lists scripts that are not in tools/: {sorted(listed - scripts)}"


def test_the_index_check_finds_a_missing_entry():
    text = _index().replace("`smoke_test.py`", "smoke test")
    assert "smoke_test.py" in _scripts() - _named_in_index(text)


def _references() -> dict[str, list[str]]:
    """``{script: [file that names tools/<script>, ...]}`` over the repository's text files."""
    found: dict[str, list[str]] = {}
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP and not d.startswith(".venv") and not d.endswith(".egg-info")]
        for name in files:
            if not name.endswith((".py", ".md", ".ipynb", ".sh", ".cfg", ".toml", ".txt")) and name not in (
                    "Makefile", "run"):
                continue
            path = os.path.join(folder, name)
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
            except (UnicodeDecodeError, OSError):
                continue
            for script in SCRIPT.findall(text):
                found.setdefault(script, []).append(os.path.relpath(path, ROOT))
    return found


def test_every_tools_script_the_repository_names_exists():
    references = _references()
    assert {"mnist_tuning.py", "check_python.sh"} <= set(references)  # the docs, the Makefile
    missing = {script: sorted(set(where)) for script, where in references.items()
               if not os.path.isfile(os.path.join(TOOLS, script))}
    assert not missing, f"tools/ scripts named but absent: {missing}"
