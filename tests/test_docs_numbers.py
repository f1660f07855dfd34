"""Every result number in README.md is found in a committed report that the README links nearby.

The rule, applied to README.md (and, in the negative tests, to small synthetic READMEs):

* The text is split into sections at its Markdown headings. A section's reports are the folders
  ``docs/results/<folder>`` its links point to (``docs/results/<folder>`` or a file inside it); a
  folder without its own ``results.md`` stands for every report below it (``dpsgd_stacks/``).
* Fenced code blocks, inline code spans and link targets are ignored (commands, versions, paths).
* **Result tables**: a Markdown table with at least one body cell containing ``%``. Every number
  with a decimal point, and every number followed by ``%``, in its body rows is checked; the header
  row (settings such as ``ε = 0.25``) is not.
* **Everywhere else** (sentences, other tables): every number followed by ``%`` or by ``×`` (a
  speed-up; not the ``×`` of a size such as ``8×8``) is checked,
  with the numbers chained to it by ``/``, ``–``, ``-`` or ``±`` (``86.70 / 86.65 / 87.60 %``
  checks all three, ``90.8–91.0 %`` both ends).
* Not checked: integers without ``%`` (counts, seconds, sizes, seeds), decimals in sentences that
  are not followed by ``%`` or ``×`` (ε and δ used as settings, versions), anything in code.
* A checked number must be found in one of the section's reports: anywhere in its ``results.md``,
  or in its ``results.json`` (``results.json.gz`` where the report is compressed; a folder holds one of the two):
  the runs' and the summary's result fields
  (accuracy, ε target / claimed / provable, δ, MIA advantage, the canary audit; not the learning
  curves, seconds or memory, whose many values would match almost any number), or every number of
  a ``results.json`` without runs (``tfdpmech bench``). A report number y matches when y (or 100·y
  for an accuracy or MIA fraction), written with as many decimals as the README number (Python's
  formatting or rounding half up), gives the README number: ``86.98`` matches ``86.98`` and
  ``0.8698``, ``90.5`` matches ``90.53``. A section with a checked number and no report link fails.

Numbers measured outside committed reports do not belong in the README; they go to
docs/results.md (or the mechanism pages) marked "not measured in a committed report".
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")

_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
NUMBER = re.compile(rf"(?<![\w.]){_NUM}(?![\w])")
CHAINED = re.compile(rf"(?<![\w.])({_NUM}(?:\s*(?:/|–|-|±)\s*{_NUM})*)\s*(?:%|×(?!\s*\d))")
REPORT_LINK = re.compile(r"docs/results/([A-Za-z0-9_.\-]+)")
LINK_TARGET = re.compile(r"\]\(([^)]*)\)")


def _strip(line: str) -> str:
    """The line without inline code spans and link targets (their text is kept)."""
    line = re.sub(r"`[^`]*`", " ", line)
    return LINK_TARGET.sub("]", line)


def _sections(text: str) -> list[tuple[str, list[str]]]:
    """(heading, lines) per section, fenced code removed."""
    sections, heading, lines, fenced = [], "(top)", [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.startswith("#"):
            sections.append((heading, lines))
            heading, lines = line.strip("# ").strip(), []
            continue
        lines.append(line)
    sections.append((heading, lines))
    return sections


def _is_table_row(line: str) -> bool:
    return line.strip().startswith("|")


def _is_separator(line: str) -> bool:
    return bool(re.fullmatch(r"\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*", line.strip()))


def checked_numbers(lines: list[str]) -> list[tuple[str, str]]:
    """(number, line) for every number the rule checks in these lines of one section."""
    out, i = [], 0
    while i < len(lines):
        if _is_table_row(lines[i]):
            j = i
            while j < len(lines) and _is_table_row(lines[j]):
                j += 1
            table = lines[i:j]
            body = [r for r in table[1:] if not _is_separator(r)]
            is_result_table = any("%" in _strip(r) for r in body)
            for row in body:
                clean = _strip(row)
                if is_result_table:
                    nums = [m.group(0) for m in NUMBER.finditer(clean) if "." in m.group(0)]
                    nums += [n for m in CHAINED.finditer(clean) for n in NUMBER.findall(m.group(1))]
                else:
                    nums = [n for m in CHAINED.finditer(clean) for n in NUMBER.findall(m.group(1))]
                out += [(n, row) for n in dict.fromkeys(nums)]
            i = j
            continue
        clean = _strip(lines[i])
        nums = [n for m in CHAINED.finditer(clean) for n in NUMBER.findall(m.group(1))]
        out += [(n, lines[i]) for n in dict.fromkeys(nums)]
        i += 1
    return out


def linked_reports(lines: list[str], root: str = ROOT) -> list[str]:
    """The report folders (each holding a results.md) that these lines link to."""
    folders = []
    for line in lines:
        for name in REPORT_LINK.findall(line):
            folder = os.path.join(root, "docs", "results", name.rstrip("."))
            if os.path.isfile(folder):  # a link to docs/results/README.md etc. is no report
                continue
            if not os.path.isdir(folder):
                raise AssertionError(f"README links docs/results/{name}, which does not exist")
            found = sorted(d for d, _, files in os.walk(folder) if "results.md" in files)
            assert found, f"docs/results/{name} holds no results.md"
            folders += [f for f in found if f not in folders]
    return folders


RUN_FIELDS = re.compile(r"^(accuracy|accuracy_mean|accuracy_std|epsilon_target|epsilon_claimed|epsilon_provable|"
                        r"delta|mia_advantage|epsilon_lower_bound|correct|m|k_plus|k_minus)$")
FRACTION = re.compile(r"accuracy|mia")


def _numbers_in(obj, out: set, key: str = "", path: str = "", fields=None) -> None:
    """Numbers of a JSON value, each as (value, is_fraction); with ``fields``, only under matching keys."""
    if isinstance(obj, bool) or obj is None:
        return
    if isinstance(obj, dict):
        for k, value in obj.items():
            _numbers_in(value, out, str(k), f"{path}/{k}", fields)
        return
    if isinstance(obj, (list, tuple)):
        if key.endswith("_curve") or key.endswith("curve_mean"):  # learning curves are not results
            return
        for value in obj:
            _numbers_in(value, out, key, path, fields)
        return
    if fields is not None and not fields.match(key):
        return
    if isinstance(obj, (int, float)) and math.isfinite(obj):
        out.add((float(obj), bool(FRACTION.search(path))))
    elif isinstance(obj, str):
        out.update((float(n.replace(",", "")), False) for n in NUMBER.findall(obj))


@functools.lru_cache(maxsize=None)
def report_numbers(folder: str) -> frozenset:
    """The numbers of a report folder: all of results.md as written; from results.json(.gz) the runs'
    and the summary's result fields (accuracy, ε, δ, MIA advantage, the canary audit) or, for a
    results.json without runs (``tfdpmech bench``), every number. Accuracies and MIA advantages
    are fractions there and also match as percentages."""
    found: set = set()
    with open(os.path.join(folder, "results.md"), encoding="utf-8") as f:
        _numbers_in(f.read(), found)
    path = results_file(folder)
    if path is not None:
        with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
        if "runs" in data:
            for part in ("runs", "summary"):
                _numbers_in(data.get(part) or [], found, "", part, RUN_FIELDS)
        else:
            _numbers_in(data, found)
    return frozenset(found)


def results_file(folder: str) -> str | None:
    """The report's ``results.json``, else its compressed ``results.json.gz``, else None; a folder holding both holds
    two reports (the one ``results.md`` describes and a stale one), which fails."""
    found = [os.path.join(folder, name) for name in ("results.json", "results.json.gz")
             if os.path.exists(os.path.join(folder, name))]
    assert len(found) < 2, (f"{folder} holds both results.json and results.json.gz: one of them is a stale report; "
                            "keep the one its results.md was written from")
    return found[0] if found else None


@functools.lru_cache(maxsize=None)
def _formatted(folder: str, decimals: int) -> frozenset[str]:
    out = set()
    scale = 10 ** decimals
    for y, is_fraction in report_numbers(folder):
        for v in ((y, 100 * y) if is_fraction else (y,)):
            out.add(f"{v:.{decimals}f}")
            out.add(f"{math.floor(v * scale + 0.5) / scale:.{decimals}f}")
    return frozenset(out)


def found_in(number: str, folders: list[str]) -> bool:
    plain = number.replace(",", "")
    decimals = len(plain.split(".")[1]) if "." in plain else 0
    return any(plain in _formatted(f, decimals) for f in folders)


def unsupported_numbers(text: str, root: str = ROOT) -> list[str]:
    """One message per checked number that no report linked in its section contains."""
    problems = []
    for heading, lines in _sections(text):
        numbers = checked_numbers(lines)
        if not numbers:
            continue
        folders = linked_reports(lines, root)
        for number, line in numbers:
            if not folders:
                problems.append(f"[{heading}] {number}: the section links no docs/results/<folder> report: {line.strip()}")
            elif not found_in(number, folders):
                names = ", ".join(os.path.relpath(f, os.path.join(root, "docs", "results")) for f in folders)
                problems.append(f"[{heading}] {number}: in none of {names}: {line.strip()}")
    return problems


# --- the README ---------------------------------------------------------------------------------


def test_every_result_number_in_the_readme_is_in_a_report_it_links():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    problems = unsupported_numbers(text)
    assert not problems, "README numbers without a linked report:\n" + "\n".join(problems)


def test_the_readme_states_results_that_the_rule_checks():
    """The rule is not vacuous on the real README: its headline table is checked."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    checked = [n for _, lines in _sections(text) for n, _ in checked_numbers(lines)]
    assert len(checked) >= 20, checked


def test_the_readme_is_a_short_product_page():
    """Install, set-up, use, methods, the headline results (whole MNIST, the seed papers, today's architectures) and
    the guarantees fit on one page; the rest is in docs/."""
    with open(README, encoding="utf-8") as f:
        assert len(f.read().splitlines()) <= 180


# --- the rule itself, on synthetic READMEs ------------------------------------------------------

SYNTHETIC = """# tool

## Results

From [the demo](docs/results/demo/results.md):

| method | ε = 1 |
|---|---|
| `dpsgd` | {cell} |

DP-SGD reaches {sentence} % at ε = 1, with δ = 1e-5 and seeds 0 and 1 (Python 3.11).
"""


def test_numbers_from_the_linked_report_pass_in_tables_and_sentences():
    text = SYNTHETIC.format(cell="87.48 % (provable 1)", sentence="87.5 / 91.83")
    assert unsupported_numbers(text) == []


def test_a_fractional_report_value_matches_its_percentage():
    # the demo's json stores accuracy 0.9455 for nonprivate seed 1 (results.md shows only the mean)
    assert found_in("94.55", linked_reports(["[d](docs/results/demo)"]))


@pytest.mark.parametrize("cell, sentence, bad", [
    ("12.34 %", "87.48", "12.34"),                 # a table cell no report contains
    ("87.48 % (provable 0.777)", "87.48", "0.777"),  # a decimal without % inside a result table
    ("87.48 %", "87.48 / 51.23", "51.23"),          # a chained number in a sentence
    ("87.48 %", "73.3", "73.3"),
])
def test_a_number_no_linked_report_contains_fails(cell, sentence, bad):
    problems = unsupported_numbers(SYNTHETIC.format(cell=cell, sentence=sentence))
    assert len(problems) == 1 and f"] {bad}:" in problems[0], problems


def test_a_result_in_a_section_without_a_report_link_fails():
    text = "# tool\n\n## Speed\n\nThe head is 25.1× faster and reaches 86.67 %.\n"
    problems = unsupported_numbers(text)
    assert len(problems) == 2 and all("links no docs/results" in p for p in problems), problems


def test_a_link_to_a_report_in_another_section_does_not_count():
    text = SYNTHETIC.format(cell="87.48 %", sentence="87.48") + "\n## Other\n\nIt reaches 87.48 %.\n"
    problems = unsupported_numbers(text)
    assert len(problems) == 1 and problems[0].startswith("[Other]"), problems


def test_settings_code_and_headers_are_not_checked():
    text = ("## Set-up\n\nPython 3.11, TensorFlow 2.15.1, ε = 0.25 and δ = 1e-5 as settings, 8×8 digits.\n\n"
            "```bash\npip install tfdpmech==0.1.0  # 99.99 %\n```\n\n"
            "| stack | TF 2.15 |\n|---|---|\n| Keras | 3.13 |\n")
    assert unsupported_numbers(text) == []


def test_every_committed_report_folder_holds_one_results_file():
    folders = sorted(folder for folder, _, files in os.walk(os.path.join(ROOT, "docs", "results"))
                     if "results.md" in files)
    assert len(folders) > 20
    both = [os.path.relpath(f, ROOT) for f in folders
            if {"results.json", "results.json.gz"} <= set(os.listdir(f))]
    assert not both, "report folders with both results.json and results.json.gz (one is stale): " + ", ".join(both)


def test_a_folder_with_two_results_files_fails(tmp_path):
    (tmp_path / "results.json").write_text('{"runs": []}', encoding="utf-8")
    assert results_file(str(tmp_path)) == str(tmp_path / "results.json")
    with gzip.open(tmp_path / "results.json.gz", "wt", encoding="utf-8") as f:
        f.write('{"runs": []}')
    with pytest.raises(AssertionError, match="holds both results.json and results.json.gz"):
        results_file(str(tmp_path))


def test_a_link_to_a_missing_report_folder_fails():
    with pytest.raises(AssertionError, match="does not exist"):
        unsupported_numbers("## R\n\n[x](docs/results/no_such_report) 50 %\n")
