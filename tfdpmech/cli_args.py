"""The flag types of the ``tfdpmech`` command and the flags of ``tfdpmech bench``.

Every list flag is spelled one way: comma-separated (``--epsilons 0.5,2,8``, ``--seeds 0,1``,
``--methods a,b``, ``--dataset a,b``, ``--audit mia,canary``). :mod:`tfdpmech.cli` builds its parser
from these, and so does the fresh process of a bench memory probe (:mod:`tfdpmech.experiments.bench`).
"""

from __future__ import annotations

import argparse
import os

__all__ = ["add_bench_arguments", "audit_list", "comma_floats", "comma_ints", "comma_strings", "public_source"]


def comma_floats(text: str) -> tuple:
    try:
        return tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def comma_ints(text: str) -> tuple:
    try:
        return tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def comma_strings(text: str) -> tuple:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def audit_list(text: str) -> tuple:
    return () if text.strip().lower() in ("", "none", "off") else comma_strings(text)


def public_source(text: str):
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else text


def add_bench_arguments(parser) -> None:
    """The flags of ``tfdpmech bench`` (also read by its fresh-process memory probes)."""
    parser.add_argument("--out", default=os.path.join("bench", "results.json"))
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats per method (default 5)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--max-private", type=int, default=0, help="cap the private set (0: all 7,000)")
    parser.add_argument("--methods", type=comma_strings, default=None,
                        help="comma-separated methods (default: the bench's)")
    parser.add_argument("--no-memory", action="store_true", help="skip the fresh-process memory probes")
    parser.add_argument("--public", type=public_source, default=500,
                        help="public data as in compare: a record count kept out of the private set, or a source "
                             "(digits); default 500, where the public model alone stays below DP-SGD's accuracy, so "
                             "reaching DP-SGD's accuracy needs the private records")
    parser.add_argument("--no-dpsgd-speed", action="store_true",
                        help="skip the DP-SGD engine speed table (examples/s per engine and clipping path)")
    parser.add_argument("--no-sources", action="store_true",
                        help="skip the data-source table (a DP fit from a NumPy memmap ÷ the same records in memory)")
    parser.add_argument("--no-scale", action="store_true",
                        help="skip the functional head's scale table (10^4 to 10^6 records, MirroredStrategy 2 ÷ 1 device)")
