"""Input perturbation for DP-ERM: Gaussian noise on the features, drawn once, before ``model.fit``.

Kang, Liu, Niu, Tong, Zhang, Wang, "Input Perturbation: A New Paradigm between Central and Local
Differential Privacy", arXiv:2002.08570 (2020). What the paper claims, what we prove and why:
``docs/mechanisms/input_perturbation.md``.

Algorithm 1 (§4), as steps of :meth:`InputPerturbation.perturb` and the recipe in
:mod:`tfdpmech.mechanisms.input_perturbation.training`:

1. Check the data: ``n >= 2`` rows, ``‖x_i‖ <= R`` (a public bound; §3.2 assumes R = 1; clipping
   only on request), labels in the declared classes.
2. The loss constants from public quantities only: ``Δ = λ``, ``D = sqrt(2 ln M / λ)``,
   ``G = R·sup|φ'| + λD``, ``β = R²·sup φ'' + λ`` (:func:`logistic_constants`).
3. ``σ`` from Theorem 1 / 3 (§5.1 Eq. 9, §5.3 Eq. 12; ``mode="reference"``) or from a per-record
   Gaussian mechanism (``mode="private"``).
4. Noise drawn ONCE (Algorithm 1, lines 3–5): ``x̃_i = x_i + z_i`` (``per_record``, default) or
   ``x̃_i = x_i + z`` (``shared``, the algorithm read literally). The noise and the raw data are not
   kept.
5. ``θ_0 = 0``; ``T`` steps of full-batch projected gradient descent on the noisy data (lines 7–9;
   :func:`~tfdpmech.mechanisms.input_perturbation.models.linear_model`,
   :class:`~tfdpmech.mechanisms.input_perturbation.training.InputPerturbationBudget`).

Privacy: ``mode="reference"`` is the guarantee *claimed* by Theorem 1 / 3; the published proof
(Appendix A.1) has gaps (Eq. 18 writes the variance Cσ² instead of C²σ², Eq. 27 lower-bounds a
signed scalar, Eqs. 30–31 compose T steps that share one noise draw), so the ledger records no
provable ε for it. ``mode="private"`` is *proven*: each record's features go through an independent
Gaussian mechanism with L2 sensitivity 2R (replace-one inside the R-ball), accounted with
``dp_accounting``; the model is post-processing, for any optimizer, batch size or model. Labels are
public unless ``label_epsilon`` randomizes them (k-ary randomized response).

The pieces: :mod:`.calibration` (Theorems 1 / 3), :mod:`.constants` (logistic-regression constants),
:mod:`.records` (clipping, labels), :mod:`.feature_release` (the ledger entry), :mod:`.training` (the
T-step recipe), and :mod:`tfdpmech.accounting.gaussian` (the proven per-record Gaussian calibration;
``dp_accounting`` is imported on use).
"""

from __future__ import annotations

import warnings

import keras
import numpy as np

from ...accounting.gaussian import ACCOUNTANTS, sigma_local_gaussian
from ...accounting.ledger import PrivacyLedger, ledger_or_new
from ...contract import Mechanism, PreparedFit, release
from ...release_on_fit import release_on_fit
from .models import linear_model, paper_mlp
from ...noise import make_rng
from ...released_data import array_fingerprint
from ...validation import (
    ReleasedData,
    check_array,
    check_choice,
    check_delta,
    check_epsilon,
    check_instance,
    check_positive_int,
    warn_unproven_mode,
)
from .assumptions import NOISE_STRUCTURES, InputPerturbationAssumptions, resolve_assumptions
from .calibration import (
    curvature_factor,
    epsilon_paper_accountant,
    paper_constant,
    paper_shape,
    sigma_input_perturbation,
)
from .constants import logistic_constants
from .feature_release import feature_release
from .records import check_labels_in_classes, clip_rows, randomized_response
from .training import InputPerturbationBudget, fit_dp_erm

__all__ = ["MODES", "NOISE_STRUCTURES", "InputPerturbation"]

MODES = ("reference", "private")  # Theorem 1/3 as published (claimed) / per-record Gaussian (proven)
NORM_TOL = 1e-6  # relative slack on ‖x‖ <= R for float round-off

class InputPerturbation(Mechanism):
    """Input perturbation (Kang et al. 2020) as a once-only step before ``model.fit``.

    Args:
        epsilon: target ε > 0 (with ``label_epsilon``: the total of features and labels).
        delta: δ ∈ (0, 1); 1/n² is a common choice (§6 leaves δ unstated).
        epochs: T, the number of full-batch gradient-descent steps the noise is calibrated for.
        n: the number of training records, if known in advance (checked against the data).
        num_classes: 2 (binary, sigmoid) or M > 2 (multinomial, softmax; outside the paper's theory).
        l2: regularisation strength λ (strong convexity Δ = λ; see ``assumptions.l2_convention``).
        feature_norm_bound: R, the public bound on every ‖x_i‖.
        mode: ``"private"`` (the default: a per-record Gaussian mechanism on the features, proven) or
            ``"reference"`` (σ of Theorem 1 / 3, claimed only; warns
            :class:`~tfdpmech.privacy_warnings.UnprovenModeWarning` once per process).
        batch_size: None for full batch (the proof's setting); a smaller batch is an error in
            ``mode="reference"`` when ``assumptions.strict``, else a warned extrapolation (n → B, T → all steps).
        label_epsilon: with ``mode="private"``, randomize labels with this ε (k-RR); the features then
            get ``epsilon − label_epsilon``. None: labels are public and the guarantee covers features.
        clip: clip rows to ‖x‖ <= R instead of refusing them (recorded in the ledger).
        accountant: ``"analytic"`` (exact, default), ``"rdp"`` or ``"pld"`` for ``mode="private"``.
        assumptions: an :class:`~tfdpmech.mechanisms.input_perturbation.assumptions.InputPerturbationAssumptions`
            (theorem, constants c, κ, μ, G, conventions, shared noise, strictness); None: Theorem 1 with
            the constants of L2-regularised logistic regression.
        seed: None (OS entropy, the default) or an int for tests; never stored with the model.
        ledger: a :class:`~tfdpmech.accounting.ledger.PrivacyLedger` to record into (a new one by default).

    Raises:
        ValueError / TypeError: ε <= 0, δ ∉ (0, 1), epochs < 1, n < 2, λ or R <= 0, an unknown mode,
            ``mode="private"`` with shared noise, ``label_epsilon`` outside ``mode="private"`` or not below
            ``epsilon``, ``assumptions`` not an ``InputPerturbationAssumptions``, an unknown keyword.

    Example:
        >>> ip = InputPerturbation(epsilon=1.0, delta=1 / n**2, epochs=100, l2=0.01)   # doctest: +SKIP
        >>> model = tfdpmech.make_private(ip.make_linear_model(x_train.shape[1]), ip)  # doctest: +SKIP
        >>> model.compile()                             # plain SGD, step 1/β̂ (fit_dp_erm)  # doctest: +SKIP
        >>> model.fit(x_train, y_train)                 # perturbed once, then T steps  # doctest: +SKIP
        >>> print(ip.ledger.summary())                                               # doctest: +SKIP

    Reference: Kang et al., "Input Perturbation: A New Paradigm between Central and Local
    Differential Privacy", arXiv:2002.08570, Algorithm 1.
    """

    settings = ("mode", "epsilon", "delta", "epochs", "n", "batch_size", "accountant", "num_classes")
    paper = "Kang et al. 2020, Input Perturbation (arXiv:2002.08570)"
    modes = ("private", "reference")
    described = {"sigma": "release.noise_scale", "delta": "delta"}

    def __init__(self, epsilon, delta, epochs, *, n=None, num_classes: int = 2, l2: float = 0.01,
                 feature_norm_bound: float = 1.0, mode: str = "private", batch_size=None, label_epsilon=None,
                 clip: bool = False, accountant: str = "analytic",
                 assumptions: InputPerturbationAssumptions | None = None, seed=None,
                 ledger: PrivacyLedger | None = None):
        self.assumptions = a = resolve_assumptions(assumptions)
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        self.epochs = check_positive_int(epochs, "epochs")
        self.n = None if n is None else check_positive_int(n, "n", minimum=2)
        self.mode = check_choice(mode, "mode", MODES)
        if self.mode != "private":
            warn_unproven_mode(type(self).__name__, self.mode)
        self.noise_structure = a.noise_structure
        self.condition = a.condition
        self.constants = logistic_constants(l2, feature_norm_bound, num_classes=num_classes,
                                            g_convention=a.g_convention, l2_convention=a.l2_convention)
        self.num_classes = self.constants.num_classes
        self.feature_norm_bound = self.constants.feature_norm_bound
        self.G = self.constants.G if a.G is None else a.G
        self.curvature = self.constants.strong_convexity if a.pl_constant is None else a.pl_constant
        self.c = a.c
        self.kappa = a.kappa
        self.paper_literal_pl = a.paper_literal_pl
        curvature_factor(self.curvature, self.condition, self.paper_literal_pl)
        self.clip = bool(clip)
        self.batch_size = None if batch_size is None else check_positive_int(batch_size, "batch_size")
        self.accountant = check_choice(accountant, "accountant", ACCOUNTANTS)
        self.strict = a.strict
        if self.mode == "private" and self.noise_structure == "shared":
            raise ValueError(
                "mode='private' needs noise_structure='per_record': one noise vector shared by all "
                "records is revealed by any one known record, so no per-record guarantee holds"
            )
        if label_epsilon is not None:
            if self.mode != "private":
                raise ValueError("label_epsilon (randomized labels) is part of mode='private' only")
            label_epsilon = check_epsilon(label_epsilon, "label_epsilon")
            if label_epsilon >= self.epsilon:
                raise ValueError(
                    f"label_epsilon={label_epsilon:g} must be smaller than epsilon={self.epsilon:g}, which is the "
                    "total of the feature and label budgets"
                )
        self.label_epsilon = label_epsilon
        self.feature_epsilon = self.epsilon - (label_epsilon or 0.0)
        self.ledger = ledger_or_new(ledger)
        self.seed = seed
        self._rng = make_rng(seed)
        # state set by perturb()
        self.sigma: float | None = None
        self.d: int | None = None
        self.n_effective: int | None = None
        self.T_effective: int | None = None
        self.learning_rate_hint: float | None = None
        self.fingerprint: str | None = None
        self.released: ReleasedData | None = None
        self.release: Release | None = None
        self.perturbations = 0
        self.steps_taken = 0
        self.rows_clipped = 0
        self.model_kind = "linear"

    # -- σ ------------------------------------------------------------------------------------------
    def calibrate(self, n: int) -> float:
        """σ for ``n`` training records in this object's mode (no noise drawn).

        Raises:
            ValueError: n < 2, a mini-batch where the proof needs full batch (strict), bad inputs.
        """
        n = check_positive_int(n, "n", minimum=2)
        self.n_effective, self.T_effective = n, self.epochs
        if self.mode == "private":
            return sigma_local_gaussian(self.feature_epsilon, self.delta, self.feature_norm_bound,
                                        accountant=self.accountant)
        self.n_effective, self.T_effective = paper_shape(n, self.epochs, self.batch_size, strict=self.strict)
        return sigma_input_perturbation(
            self.feature_epsilon, self.delta, self.n_effective, self.T_effective, self.G, self.curvature,
            condition=self.condition, c=self.c, kappa=self.kappa, paper_literal_pl=self.paper_literal_pl,
        )

    def epsilon_after(self, steps: int) -> float:
        """ε spent after ``steps`` gradient steps: the accountant of Theorem 1's proof
        (:func:`epsilon_paper_accountant`) or, in ``mode="private"``, the fixed ε of the feature
        release (independent of the steps)."""
        if self.sigma is None:
            raise RuntimeError("call perturb() first: σ is set when the noise is drawn")
        if self.mode == "private":
            return self.release.epsilon_provable
        return epsilon_paper_accountant(
            self.sigma, self.delta, self.n_effective, int(steps), self.G, self.curvature, kappa=self.kappa,
            condition=self.condition, paper_literal_pl=self.paper_literal_pl,
        )

    # -- Algorithm 1, lines 3-5: the once-only perturbation -----------------------------------------
    def perturb(self, x, y, *, charge_new_budget: bool = False):
        """Check, (optionally) clip, calibrate and perturb the features once; record the release.

        Args:
            x: features, shape (n, d), every row with ‖x_i‖ <= R.
            y: labels: {0, 1} or {−1, +1} for binary; class ids in [0, M) or one-hot for M > 2.
            charge_new_budget: allow a second perturbation by this object; its ε is charged
                again in the ledger (sequential composition).

        Returns:
            ``(x_noisy, y_train)``: float32 noisy features (n, d), and labels for Keras: float32
            {0, 1} of shape (n,) for binary, int32 class ids for M > 2 (randomized if
            ``label_epsilon``). No reference to ``x``, ``y`` or the noise is kept.

        Raises:
            RuntimeError: a second perturbation without ``charge_new_budget=True``.
            ValueError / TypeError: n < 2, n differing from the declared ``n``, rows with norm above
                R (unless ``clip=True``), labels outside the declared classes, NaN/inf, a
                mini-batch in strict mode, dp_accounting missing for ``mode="private"``.
        """
        if self.perturbations and not charge_new_budget:
            raise RuntimeError(
                "this InputPerturbation already perturbed a dataset and spent its budget; a second noisy copy of the "
                "same data would average the noise away. Pass charge_new_budget=True to charge a new ε in the ledger "
                "(the releases compose), or create a new InputPerturbation for different data"
            )
        # Step 1 -- checks (the assumptions of §3.2 and Theorem 1)
        x = check_array(x, "x", ndim_min=2)
        if x.ndim != 2:
            raise ValueError(f"x must be 2-D (n records, d features), got shape {x.shape}; flatten the features first")
        n, d = x.shape
        if n < 2:
            raise ValueError(f"x has n={n} record(s); DP-ERM needs n >= 2 (the sensitivity is over n(n-1))")
        if self.n is not None and n != self.n:
            raise ValueError(
                f"x has {n} records but the mechanism was declared with n={self.n}; calibrate with the n you train "
                "on (split before perturbing, no validation_split: Eq. 9's σ depends on n)"
            )
        labels = check_labels_in_classes(y, self.num_classes, n)
        R = self.feature_norm_bound
        x = x.astype(np.float64)  # a new array: the caller's x is never modified
        norms = np.linalg.norm(x, axis=1)
        over = int(np.count_nonzero(norms > R * (1.0 + NORM_TOL)))
        clipped = False
        if over:
            if not self.clip:
                raise ValueError(
                    f"{over} row(s) of x have L2 norm above feature_norm_bound={R:g} (largest {norms.max():.4g}); "
                    "scale the features with public bounds, or pass clip=True to clip rows to the bound (recorded in "
                    "the ledger). Never rescale by the data's own maximum norm"
                )
            clipped = True
        # rows within the round-off slack are projected too, so the sensitivity 2R holds exactly
        x, _ = clip_rows(x, R)
        del norms
        # Steps 2-3 -- constants and σ (Eq. 9 / 12, or the per-record Gaussian mechanism)
        self.sigma = self.calibrate(n)
        # Step 4 -- one draw, frozen in the returned array (Algorithm 1, lines 3-5: noise added in advance)
        if self.noise_structure == "shared":
            warnings.warn(
                "noise_structure='shared' reproduces the paper literally: one noise vector for all records gives no "
                "per-record protection (one known record reveals it, and x̃_i − x̃_j = x_i − x_j exactly); use "
                "'per_record' outside reproduction runs", UserWarning, stacklevel=2,
            )
        self.d, self.rows_clipped, self.steps_taken = d, over if clipped else 0, 0
        self.perturbations += 1
        released = release(  # N(0, σ²) float64 noise (one row shared by all records in "shared"), then cast
            self.ledger, feature_release(self, n, d, clipped, charge_new_budget), value=x, rng=self._rng,
            shape=None if self.noise_structure == "per_record" else (d,),
            details_of=lambda noisy, noise: {"fingerprint": array_fingerprint(noisy.astype(np.float32))})
        x_noisy, self.release = released.value.astype(np.float32), released.record
        self.fingerprint = self.release.details["fingerprint"]
        del x, released
        if self.label_epsilon is not None:
            labels = randomized_response(labels, self.label_epsilon, self.num_classes, self._rng)
        y_out = labels.astype(np.float32) if self.num_classes == 2 else labels.astype(np.int32)
        self.released = ReleasedData(
            (x_noisy, y_out), source="InputPerturbation.perturb",
            fix="train on the (x_noisy, y) arrays perturb returned, unmodified (InputPerturbation.fit does)",
        )
        # smoothness of the noisy full-batch objective: post-processing of x̃, costs no privacy
        top = float(np.linalg.eigvalsh(x_noisy.T.astype(np.float64) @ x_noisy / n)[-1])
        self.learning_rate_hint = 1.0 / (self.constants.phi2 * top + self.constants.l2)
        return x_noisy, y_out

    # -- the recipe (Algorithm 1, lines 6-10) ---------------------------------------------------------
    def make_linear_model(self, d=None, *, use_bias: bool = False, regularize_bias: bool = True):
        """Linear DP-ERM model: zero init, L2(λ/2), projection onto ‖θ‖ <= D (Theorem 2 assumes ‖θ‖ <= D).

        See :func:`tfdpmech.mechanisms.input_perturbation.models.linear_model`.

        Raises:
            ValueError: an unregularised intercept with shared noise (zero privacy: it absorbs the shared z).
        """
        if use_bias and not regularize_bias and self.noise_structure == "shared":
            raise ValueError(
                "an unregularised intercept with noise_structure='shared' gives zero privacy: the intercept absorbs "
                "the shared shift and the weights equal the clean fit (docs/mechanisms/input_perturbation.md); use "
                "use_bias=False or regularize_bias=True, or noise_structure='per_record'"
            )
        d = self._need_d(d)
        self.model_kind = "linear"
        return linear_model(d, self.num_classes, l2=self.constants.l2, theta_bound=self.constants.theta_bound,
                            use_bias=use_bias, regularize_bias=regularize_bias)

    def make_mlp(self, d=None, *, hidden_units=None):
        """The paper's one-hidden-layer MLP (hidden size = input size); outside the paper's theory.

        In ``mode="reference"`` the claimed ε assumes G, Δ of logistic regression, which an MLP does
        not have (the paper's own MLP runs in §6 share this gap): a warning says so.
        """
        d = self._need_d(d)
        if self.mode == "reference":
            warnings.warn(
                "the paper's privacy theory assumes a convex (strongly convex or PL) loss with Lipschitz constant G; "
                "an MLP satisfies neither, so the claimed ε of mode='reference' does not apply to it (mode='private' "
                "covers any model)", UserWarning, stacklevel=2,
            )
        self.model_kind = "mlp"
        return paper_mlp(d, self.num_classes, hidden_units=hidden_units)

    def _need_d(self, d):
        if d is None:
            if self.d is None:
                raise ValueError("pass d (the number of features) or call perturb() first")
            return self.d
        return check_positive_int(d, "d")

    def private_model(self, model, **options):
        """``model`` whose first ``fit(x, y)`` perturbs once, then runs T steps (:func:`tfdpmech.make_private`)."""
        return release_on_fit(model, self, options, epochs=self.epochs)

    def prepare(self, model=None, x=None, y=None, *, learning_rate=None, charge_new_budget: bool = False) -> PreparedFit:
        """:meth:`perturb` ``(x, y)``, then ``fit()`` runs :meth:`fit`'s T steps on ``model`` (logits out; None:
        :meth:`make_linear_model`); ``learning_rate``, ``charge_new_budget``: :meth:`fit`'s, :meth:`perturb`'s."""
        if model is not None:
            check_instance(model, "model", keras.Model)  # before perturb spends the budget
        x_noisy, y_train = self.perturb(x, y, charge_new_budget=charge_new_budget)
        model = self.make_linear_model() if model is None else model

        def full_batch_descent(epochs, callbacks, **fit_kwargs):
            return self.fit(model, x_noisy, y_train, learning_rate=learning_rate, callbacks=callbacks,
                            epochs=epochs, **fit_kwargs)

        return PreparedFit(model, x_noisy, epochs=self.epochs, y=y_train, custom_fit=full_batch_descent)

    def callback(self, verbose: int = 0):  # the Keras callback that logs this mechanism's ε
        return InputPerturbationBudget(self, verbose=verbose)

    def fit(self, model, x_noisy, y, *, learning_rate=None, callbacks=(), verbose: int = 0, **fit_kwargs):
        """Plain SGD, T full-batch steps (Algorithm 1, lines 6-10): :func:`.training.fit_dp_erm`."""
        return fit_dp_erm(self, model, x_noisy, y, learning_rate=learning_rate, callbacks=callbacks,
                          verbose=verbose, **fit_kwargs)

    def report(self) -> dict:
        """σ, the constants, ε, δ, T, n, the layout, the mode and the guarantee in words."""
        if self.release is None:
            guarantee = "nothing released yet"
        elif self.mode == "reference":
            thm = "3" if self.condition == "pl" else "1"
            guarantee = (f"claimed by Kang et al. 2020 Thm {thm} (proof gaps, see docs/mechanisms/input_perturbation.md); "
                         "none proven")
        else:
            guarantee = ("formal (ε,δ)-DP w.r.t. " + ("whole records" if self.label_epsilon is not None else
                                                    "features (labels public)") + " by post-processing")
        c = self.c
        if c is None and self.mode == "reference":
            c = paper_constant(self.feature_epsilon, self.delta, self.kappa)
        return {
            "mechanism": "input_perturbation", "mode": self.mode,
            "noise_structure": self.noise_structure, "sigma": self.sigma, "c": c, "kappa": self.kappa,
            "G": self.G, "strong_convexity": self.curvature, "theta_bound": self.constants.theta_bound,
            "beta": self.constants.beta, "epsilon": self.epsilon, "delta": self.delta, "T": self.epochs,
            "n": self.n_effective, "d": self.d, "model": self.model_kind, "steps_taken": self.steps_taken,
            "rows_clipped": self.rows_clipped, "guarantee": guarantee, **self.ledger.to_dict(),
        }

    def __repr__(self) -> str:
        return (f"InputPerturbation(epsilon={self.epsilon:g}, delta={self.delta:g}, epochs={self.epochs}, "
                f"mode={self.mode!r}, noise_structure={self.noise_structure!r}, sigma={self.sigma})")
