"""How :class:`~tfdpmech.mechanisms.input_perturbation.InputPerturbation` reads Kang et al.'s theory.

The constructor of the mechanism takes the everyday arguments (budget, data shape, λ, R, mode,
batch size, seed, ledger); the knobs that pick a theorem, set its constants, choose the
conventions the loss constants are derived with, reproduce the paper literally or relax its
checks live in one frozen :class:`InputPerturbationAssumptions`. The defaults are Theorem 1 with
the constants of L2-regularised logistic regression.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...validation import _describe, check_choice, check_instance, check_positive_real
from .calibration import CONDITIONS
from .constants import G_CONVENTIONS, L2_CONVENTIONS

__all__ = ["NOISE_STRUCTURES", "InputPerturbationAssumptions", "resolve_assumptions"]

NOISE_STRUCTURES = ("per_record", "shared")

_OWNER = "InputPerturbationAssumptions"


@dataclasses.dataclass(frozen=True)
class InputPerturbationAssumptions:
    """The theorem, its constants and conventions, and how strictly the proof's setting is enforced.

    Every field except ``l2_convention`` matters to ``mode="reference"`` only (the σ of Theorem 1 / 3
    and the checks around it); ``l2_convention`` says what the mechanism's ``l2`` means in both modes.

    Attributes:
        condition: ``"strong_convexity"`` (Theorem 1, Eq. 9) or ``"pl"`` (Theorem 3, Eq. 12).
        pl_constant: μ for ``condition="pl"``; None means λ (strong convexity implies PL with μ = λ).
        c: the constant of Eq. 9; None means ``(8 + 4ε/ln(1/δ))/κ``
            (:func:`~tfdpmech.mechanisms.input_perturbation.calibration.paper_constant`).
        kappa: the gap constant κ of Eq. 28 (1.0, a convention, not a bound).
        paper_literal_pl: reproduce Eq. 12 as printed (no √μ); needs ``condition="pl"``.
        G: the Lipschitz constant in place of the derived one (for models the theory does not cover).
        g_convention: ``"full"`` (``G = R·g + λD``) or ``"data_term"`` (``G = R·g``); see
            :func:`~tfdpmech.mechanisms.input_perturbation.constants.logistic_constants`.
        l2_convention: ``"half"`` (``l2`` is λ of (λ/2)‖θ‖²) or ``"keras"`` (``l2`` is the factor
            of ``keras.regularizers.L2``, λ = 2·l2).
        noise_structure: ``"per_record"`` (an independent z_i per record) or ``"shared"`` (one z for
            all records, Algorithm 1 read literally: no per-record protection; ``mode="reference"`` only).
        strict: raise (True) or warn (False) on a configuration the proof does not cover (a
            mini-batch, a step beyond T).

    Raises:
        ValueError: an unknown condition / convention / noise structure, c, κ, μ or G not finite
            and > 0, ``paper_literal_pl=True`` without ``condition="pl"``.
        TypeError: a number given as a string or bool, a flag that is not True / False.

    Example:
        >>> InputPerturbation(0.1, 1e-5, 100, mode="reference",                    # doctest: +SKIP
        ...                   assumptions=InputPerturbationAssumptions(condition="pl", pl_constant=0.05))
    """

    condition: str = "strong_convexity"
    pl_constant: float | None = None
    c: float | None = None
    kappa: float = 1.0
    paper_literal_pl: bool = False
    G: float | None = None
    g_convention: str = "full"
    l2_convention: str = "half"
    noise_structure: str = "per_record"
    strict: bool = True

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "condition", check_choice(self.condition, _name("condition"), CONDITIONS))
        set_(self, "pl_constant", _positive_or_none(self.pl_constant, "pl_constant",
                                                    "the PL constant μ of Theorem 3; None means λ"))
        set_(self, "c", _positive_or_none(self.c, "c", "the constant of Eq. 9; None derives it from ε, δ and κ"))
        set_(self, "kappa", check_positive_real(self.kappa, _name("kappa"),
                                                hint="κ is the gap constant of Eq. 28; 1.0 is the paper's convention"))
        set_(self, "paper_literal_pl", _flag(self.paper_literal_pl, "paper_literal_pl"))
        set_(self, "G", _positive_or_none(self.G, "G", "the Lipschitz constant; None derives it from λ, R and M"))
        set_(self, "g_convention", check_choice(self.g_convention, _name("g_convention"), G_CONVENTIONS))
        set_(self, "l2_convention", check_choice(self.l2_convention, _name("l2_convention"), L2_CONVENTIONS))
        set_(self, "noise_structure", check_choice(self.noise_structure, _name("noise_structure"), NOISE_STRUCTURES))
        set_(self, "strict", _flag(self.strict, "strict"))
        if self.paper_literal_pl and self.condition != "pl":
            raise ValueError("paper_literal_pl=True reproduces Eq. 12 of Theorem 3; pass condition='pl' with it")


def _name(field: str) -> str:
    return f"{_OWNER}.{field}"


def _positive_or_none(value, field: str, hint: str):
    return None if value is None else check_positive_real(value, _name(field), hint=f"{hint}")


def _flag(value, field: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{_name(field)} must be True or False, got {_describe(value)}; pass a bool")


def resolve_assumptions(assumptions) -> InputPerturbationAssumptions:
    """``assumptions`` checked; None gives the defaults (Theorem 1, L2-regularised logistic regression).

    Raises:
        TypeError: ``assumptions`` that is neither None nor an :class:`InputPerturbationAssumptions`.
    """
    if assumptions is None:
        return InputPerturbationAssumptions()
    return check_instance(assumptions, "assumptions", InputPerturbationAssumptions,
                          "pass assumptions=InputPerturbationAssumptions(...)")
