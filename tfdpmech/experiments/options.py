"""The comparison's ``options``: one reader of a per-ε value and one check of every option methods read.

An option is one value for every run, or ``{ε: value}`` (keys numbers) for a value per target ε;
the AdLM-family rows also take ``{"adlm" | "ilm" | "afrrs": value}``. :func:`check_options` runs in
:meth:`~tfdpmech.experiments.runner.CompareConfig.validate`, before any run starts, so a reader never
converts or guesses.
"""

from __future__ import annotations

import numbers

from ..validation import check_positive_int, check_positive_real, check_step_count

__all__ = ["COUNT_OPTIONS", "STEP_OPTIONS", "CHOICE_OPTIONS", "FRACTION_OPTIONS", "at_epsilon", "option_at", "check_options"]

# options that are counts (epochs, steps, batch sizes, dimensions), each a positive int wherever it is given
COUNT_OPTIONS = (
    "dpsgd_epochs", "scatter_epochs", "nonprivate_epochs", "pretrain_epochs", "head_epochs", "reference_epochs",
    "pcdbn_reference_epochs", "per_record_batch", "per_record_epochs", "kifer_steps", "scatter_units",
    "augmult_k", "finetune_epochs", "users", "records_per_user", "user_epochs", "text_epochs", "max_public",
    "sequence_length", "validation_size", "bands", "augmult_bands",
)
# step counts (the authors'-settings rows): an integer >= 1, else ValueError naming the option, the value and the fix
STEP_OPTIONS = {"steps": "the authors' code trains 80,001; pass a positive count such as --steps 8000",
                "eval_every": "pass the steps between evaluations as a positive count, e.g. 500"}
REAL_OPTIONS = ("gamma", "user_zipf", "scatter_bn_noise")  # positive reals
FRACTION_OPTIONS = ("ema_decay", "augmult_ema_decay")  # reals in (0, 1): the decays of a weight average
# one of the names listed (scatter_norm: tfdpmech.features.scatter_norm.NORMALISATIONS)
CHOICE_OPTIONS = {"augmentation": ("crop", "crop_flip"), "scatter_norm": ("group", "private_bn")}


def _per_epsilon(value) -> bool:
    return isinstance(value, dict) and bool(value) and all(
        isinstance(k, numbers.Real) and not isinstance(k, bool) for k in value)


def at_epsilon(value, epsilon, default=None):
    """``value``, or for a per-ε ``{ε: value}`` the entry at ``epsilon`` (``default`` when it has none)."""
    if not _per_epsilon(value):
        return value
    return next((v for k, v in value.items() if epsilon is not None and abs(float(k) - float(epsilon)) < 1e-12),
                default)


def option_at(options: dict, epsilon, option: str, default):
    """A run's setting at ``epsilon``: ``options[option]`` as one value or ``{ε: value}``, else ``default``."""
    return at_epsilon((options or {}).get(option, default), epsilon, default)


def check_options(options: dict) -> None:
    """Every step option and count option a positive int, every real option a positive real, every decay in (0, 1)
    and every choice one of its names, wherever given.

    Raises:
        TypeError / ValueError: naming ``options[name]`` (and the ε or kind key) and the value (a step option:
            ValueError with the fix).
    """
    for name, value in (options or {}).items():
        if name in STEP_OPTIONS:
            check_step_count(value, f"options[{name!r}]", STEP_OPTIONS[name])
        if name in CHOICE_OPTIONS:
            entries = value.items() if _per_epsilon(value) else [(None, value)]
            for key, entry in entries:
                if entry not in CHOICE_OPTIONS[name]:
                    where = f"options[{name!r}]" + ("" if key is None else f"[{key!r}]")
                    raise ValueError(f"{where} = {entry!r}; use one of {CHOICE_OPTIONS[name]}")
        if name in COUNT_OPTIONS or name in REAL_OPTIONS or name in FRACTION_OPTIONS:
            entries = value.items() if isinstance(value, dict) else [(None, value)]
            for key, entry in entries:
                where = f"options[{name!r}]" + ("" if key is None else f"[{key!r}]")
                if name in COUNT_OPTIONS:
                    check_positive_int(entry, where)
                else:
                    check_positive_real(entry, where)
                if name in FRACTION_OPTIONS and not entry < 1:
                    raise ValueError(f"{where} = {entry!r}: a weight average's decay is in (0, 1); e.g. 0.999")
