"""Poisson-sampled DP-SGD: the sampling that the DP-SGD privacy proof is about.

DP-SGD's amplification-by-sampling argument (Abadi et al., "Deep Learning with Differential
Privacy", CCS 2016, §3.1 "Moments accountant" with "each lot formed by independently picking
each example with probability q = L/N"; Mironov, Talwar & Zhang, "Rényi Differential Privacy of
the Sampled Gaussian Mechanism", 2019, §3) holds for **Poisson sampling**: at every step each of
the n records joins the batch independently with probability q. Shuffled fixed-size batches
(``tf.data.shuffle().batch()``) are a different sampling scheme for which that bound is not
proven; :class:`~tfdpmech.mechanisms.dpsgd.ShuffledDPSGD` therefore records its Poisson ε as *claimed* and
the any-order bound as *provable*. This module trains with real Poisson batches, so the Poisson ε
is **proven**.

What runs at step t (Abadi et al., Algorithm 1, with the Poisson lot):

1. Sample: ``B_t = {i : U_i < q}``, ``U_i ~ Uniform[0, 1)`` independent (:class:`PoissonSampler`),
   drawn from the run's secret sampling key and the global step t (the optimizer's step count), so
   a second ``fit`` continues the stream and no draw is repeated.
   ``|B_t| ~ Binomial(n, q)``; it may be 0 or larger than the expected size ``q·n``.
2. Pad ``B_t`` with all-zero rows whose mask is 0: on tfdpmech's engine on one device to the next
   multiple of 8 (the train step is traced once for any batch size), else to a fixed shape P (about
   ``q·n + 6·sd``, :func:`padded_batch_size`, so that it splits evenly across replicas); a batch larger
   than P is padded to the next multiple of P. Never cut: no record of ``B_t`` is dropped.
3. Clip each per-example gradient to L2 norm C (Algorithm 1 line "clip gradient"). A masked row
   adds exactly 0 to the sum: tfdpmech's engine selects it out (its input, loss and gradient are
   replaced by 0, so a row whose forward pass gives NaN adds no NaN); tensorflow-privacy's weighs
   its loss by 0.
4. Add ``N(0, σ²C²·I)`` to the **sum** of the clipped gradients and divide by the **expected**
   batch size ``L = q·n`` (Algorithm 1 line "add noise": ``(1/L)(Σ ḡ + N(0, σ²C²I))``).
   The actual size ``|B_t|`` is *not* used: it depends on whether a given record was sampled,
   and dividing the released noisy sum by it is not post-processing of the Gaussian mechanism
   the accountant analyses (it would release ``|B_t|``, which the proof does not cover, and an
   empty batch would divide by 0). ``L`` is public, so the division is post-processing.
5. Take an optimizer step with a standard Keras optimizer.

On tensorflow-privacy's engine the train step is its ``DPSequential`` / ``DPModel`` with the step above
(:mod:`.poisson_models`); the DP Keras optimizers (``"microbatch"``) divide by the number of
microbatches of a batch, so they are refused here.

Accounting: ``dp_accounting`` composes ``steps`` ``PoissonSampledDpEvent(q, GaussianDpEvent(σ))``
(add-or-remove-one adjacency) with its PLD accountant (default) or its RDP accountant, and σ is
the smallest noise multiplier whose ε does not exceed the target
(:func:`tfdpmech.accounting.poisson_dpsgd.poisson_dpsgd_noise_multiplier`). That ε is recorded as **proven** in
the :class:`~tfdpmech.accounting.ledger.PrivacyLedger`. The proof assumes the sampling
randomness is hidden from the adversary: a fixed ``seed`` is for reproducible experiments and must
be kept secret in a deployment (the default None draws OS entropy). The compiled model trains only
on batches this run drew, each at the step it was drawn for (:mod:`tfdpmech.mechanisms.dpsgd.runs.guards`).

Example:
    >>> dp = DPSGD(epsilon=1.0, delta=1e-5, expected_batch_size=1750, epochs=40, n=7000)
    >>> model = tfdpmech.make_private(tfdpmech.mechanisms.dpsgd.runs.recipe.tanh_mlp(), dp)
    >>> model.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True))  # the run's optimizer
    >>> model.fit(x_private, y_private)   # Poisson batches, the budget's epochs
    >>> dp.ledger.summary()   # provable ε = claimed ε <= 1

``dp.compile(model)`` and ``model.fit(dp.dataset(x, y), epochs=dp.epochs)`` run it as tensorflow-privacy's
``DPModel`` (``engine="tensorflow_privacy"``), which ``make_private`` does not install on a user's model.

Where the steps live: 1-2 in :mod:`tfdpmech.mechanisms.dpsgd.sampling.poisson_sampling`; 3-4 in :mod:`.train_step`
(tfdpmech's engine) and :mod:`.poisson_models` (tensorflow-privacy's); save and resume in :mod:`.run_state` and
:mod:`.resume`.

tensorflow-privacy and dp-accounting are imported only when this API is used.
"""

from __future__ import annotations

import secrets

import keras
import numpy as np

from ....accounting.poisson_dpsgd import (
    ACCOUNTANT_NAMES,
    ACCOUNTANTS,
    poisson_dpsgd_epsilon,
)
from ....accounting.gaussian import require_dp_accounting
from ....accounting.ledger import PrivacyLedger, Release
from ....validation import check_choice, check_delta, check_epsilon, check_positive_int, check_positive_real
from ..clipping.chunked_clipping import check_physical_batch_size
from .banded_run import BandedRun
from .base import DPSGDRun
from .optimizer_settings import LR_SCHEDULES, OptimizerSettings, resolve_optimizer
from .paths import PATHS, rebuildable
from .poisson_models import poisson_model_classes
from .private_model import private_dpsgd_model
from .poisson_calibration import PoissonCalibration
from ..sampling.poisson_units import PoissonUnits
from .run_state import saved_run
from .weight_average import averaging_optimizer
from .guards import guard_poisson_train_step
from ..sampling.poisson_sampling import (  # noqa: F401
    PAD_SDS,
    check_expected_batch_size,
    ROW_MULTIPLE,
    PoissonSampler,
    check_seed,
    pad_batch,
    padded_batch_size,
    poisson_dataset,
    run_dataset,
    sampling_key,
)

__all__ = ["PoissonSampler", "DPSGD", "padded_batch_size", "pad_batch", "poisson_dataset", "poisson_model_classes",
           "LR_SCHEDULES"]


class DPSGD(BandedRun, PoissonCalibration, PoissonUnits, DPSGDRun):
    """DP-SGD with Poisson sampling, σ calibrated to a target (ε, δ), the ε recorded as **proven**.

    One object is one training run, as for :class:`~tfdpmech.mechanisms.dpsgd.ShuffledDPSGD` (both are a
    :class:`~tfdpmech.mechanisms.dpsgd.runs.base.DPSGDRun`: the same model checks, loss handling, ``compile``,
    ``callback``): construction validates every argument and computes σ before any training;
    :meth:`compile` wraps the model in tensorflow-privacy's ``DPSequential`` / ``DPModel`` with the
    Poisson train step (or installs tfdpmech's own) and records the release; :meth:`dataset` gives
    the Poisson batches for ``model.fit(..., epochs=self.epochs)``.

    Args:
        epsilon: target ε > 0 of the whole run (None when ``noise_multiplier`` is given).
        delta: δ in (0, 1).
        expected_batch_size: L = q·n (give this or ``sampling_probability``).
        epochs: nominal epochs; one epoch is ``ceil(1/q)`` steps, so ``steps = epochs·ceil(1/q)``.
        n: number of private records; None (with :func:`tfdpmech.make_private`): the number the first ``fit``
            trains on (after ``validation_split``), σ then calibrated to it before anything is charged
            (:mod:`.poisson_calibration`). Required for ``compile``, ``dataset`` and a user-level run.
        sampling_probability: q in (0, 1] (instead of ``expected_batch_size``; L = q·n).
        noise_multiplier: σ, instead of ``epsilon``; the ledger then records the ε this σ gives.
        l2_norm_clip: per-example clipping norm C.
        optimizer: the Keras optimizer: ``"adam"`` or ``"sgd"`` with its default step size, or an
            :class:`~tfdpmech.mechanisms.dpsgd.OptimizerSettings` with the step size, SGD momentum, ``"cosine"``
            schedule (decay to 0 over the ``steps``) and weight average (Keras ``use_ema``; De et al.
            2022 average DP-SGD iterates the same way). Post-processing of the noisy steps: no
            privacy cost.
        path: ``"auto"``, ``"fast_clipping"`` or ``"vectorized"`` (tensorflow-privacy's two
            ``DPModel`` clipping paths; ``"microbatch"`` is refused: the DP optimizers divide by
            the batch's number of microbatches, not by L).
        accountant: ``"pld"`` (default, tighter) or ``"rdp"``.
        physical_batch_size: None (each Poisson batch in one piece) or the most records the train step
            processes at once: the batch is clipped in chunks of this size, their clipped sums added, the
            noise drawn once per logical step (memory bounded by the chunk; the update and ε unchanged).
        augmentation: None, or a Keras layer or a function ``fn(record, seed)`` applied to every view of a
            sampled record (:mod:`tfdpmech.mechanisms.dpsgd.sampling.augmentation`: ``random_crop``, ``random_flip``,
            ``compose``).
        augmentation_multiplicity: K >= 1 views of each sampled record, their gradients averaged and clipped
            once (De et al. 2022): the record still moves the sum by at most C, the ε is unchanged; a step
            computes K rows per sampled record (a chunk of ``physical_batch_size`` holds whole records' views).
        user_ids, records_per_user: a user-level run (:mod:`tfdpmech.mechanisms.dpsgd.sampling.user_sampling`):
            one user id per record and k >= 1; n is then the number of users, each step samples users with
            q = L / n, a sampled user contributes up to k of their records, summed and clipped once; the ε is for
            adding or removing one user with all of their records.
        bands: 1 (default): DP-SGD, independent noise every step. b > 1: BandMF (:mod:`.banded_run`): cyclic
            Poisson sampling over b partitions of the units with q_b = L / floor(n / b), noise correlated across steps
            by a b-banded strategy optimised for the run's steps, ε for ceil(steps / b) rounds at q_b. At most the
            steps of an epoch; tfdpmech's engine on one machine.
        seed: seeds the sampler and the noise (None: OS entropy). Keep it secret outside experiments.
        layer_registry, use_xla, ledger: as for ``ShuffledDPSGD``.

    Attributes:
        sampling_probability (q), expected_batch_size (L), steps_per_epoch, steps, padded_batch_size,
        noise_multiplier (σ), epsilon_achieved (the proven ε <= epsilon), release, ledger.

    Raises:
        ValueError / TypeError (before any training): q outside (0, 1], expected batch > n, both
            or neither of ``expected_batch_size`` / ``sampling_probability``, a target ε the
            accountant cannot certify at δ for these steps, ``path="microbatch"``, bad ε / δ / n /
            epochs / C / optimizer settings (named by their field). At :meth:`compile`: a model the Poisson path
            cannot train (subclassed, batch-mixing layers, unbuilt, softmax output with the
            default loss).
    """

    settings = (*DPSGDRun.settings, "sampling_probability", "expected_batch_size", "accountant", "bands")
    sampling = "poisson"

    def __init__(self, epsilon: float | None, delta: float, expected_batch_size: int | None = None, epochs: int = 1,
                 n: int | None = None, *, sampling_probability: float | None = None,
                 noise_multiplier: float | None = None, l2_norm_clip: float = 1.0,
                 optimizer: str | OptimizerSettings = "adam", path: str = "auto", accountant: str = "pld",
                 physical_batch_size: int | None = None, seed=None, layer_registry=None, use_xla: bool = False,
                 engine: str = "auto", ledger: PrivacyLedger | None = None, augmentation=None,
                 augmentation_multiplicity: int = 1, user_ids=None, records_per_user: int | None = None,
                 bands: int = 1):
        optimizer = resolve_optimizer(optimizer)
        self._set_units(augmentation, augmentation_multiplicity, user_ids, records_per_user, n)
        seed = check_seed(seed)
        if (epsilon is None) == (noise_multiplier is None):
            raise ValueError(
                "give exactly one of epsilon (σ is then calibrated to it) and noise_multiplier (its ε is then "
                f"computed); got epsilon={epsilon!r}, noise_multiplier={noise_multiplier!r}"
            )
        epsilon = None if epsilon is None else check_epsilon(epsilon)
        delta = check_delta(delta)
        epochs = check_positive_int(epochs, "epochs")
        if (expected_batch_size is None) == (sampling_probability is None):
            raise ValueError(
                "give exactly one of expected_batch_size (L) and sampling_probability (q = L / n); got "
                f"expected_batch_size={expected_batch_size!r}, sampling_probability={sampling_probability!r}"
            )
        if noise_multiplier is not None:
            noise_multiplier = check_positive_real(noise_multiplier, "noise_multiplier")
        self.given_expected_batch_size = sampling_probability is None
        # batch_size (the expected batch size, rounded) and every size below are set by calibrate(n)
        super().__init__(epsilon=epsilon, delta=delta, n=None, epochs=epochs, batch_size=None,
                         l2_norm_clip=l2_norm_clip, optimizer=optimizer, path=path, num_microbatches=None,
                         layer_registry=layer_registry, use_xla=use_xla, engine=engine, ledger=ledger)
        self.target_epsilon = epsilon
        self.momentum, self.lr_schedule = optimizer.momentum, optimizer.lr_schedule
        self.ema_momentum, self.ema_warmup = optimizer.ema_momentum, optimizer.ema_warmup
        self.accountant = check_choice(accountant, "accountant", ACCOUNTANTS)
        self.physical_batch_size = check_physical_batch_size(physical_batch_size)
        self._check_unit_chunks()
        self._set_bands(bands)
        self._defer_sizes(expected_batch_size, sampling_probability, noise_multiplier)
        if n is not None:  # else the first fit of a make_private model gives n (.poisson_calibration)
            self.calibrate(n)
        # the secret key of the batches, fixed for the run (batch t = f(key, t)): the seed's own key, so that
        # dataset(x, y) and dataset(x, y, seed=seed) draw the same batches (OS entropy without a seed); the
        # noise seed comes from a child of the same seed
        self._sampler_seed = seed
        self._noise_seed = None if seed is None else int(np.random.SeedSequence(seed).spawn(2)[1].generate_state(1)[0])
        self._sampling_key = sampling_key(self._sampler_seed)
        self.run_id = secrets.randbits(62)  # tags this run's batches (see _guard_train_step)

    _path_alternatives = "path='vectorized' or path='auto'"  # path='microbatch' is refused

    def _check_path(self, path) -> str:
        path = check_choice(path, "path", PATHS)
        if path == "microbatch":
            raise ValueError(
                "path='microbatch' (tensorflow-privacy's DP Keras optimizers) divides the noisy sum by the "
                "number of microbatches of each batch, not by the expected batch size, so it cannot run Poisson "
                "DP-SGD; use path='auto', or tfdpmech.mechanisms.dpsgd.ShuffledDPSGD (shuffled fixed-size batches, weaker provable ε)"
            )
        return path

    # -- accounting ----------------------------------------------------------------------------
    def epsilon_after_steps(self, steps: int) -> float:
        """Proven ε after ``steps`` steps with this run's σ, q, δ and accountant (0 for 0 steps)."""
        steps = int(steps)
        if steps <= 0:
            return 0.0
        self._require_n("epsilon_after_steps")
        q, events = self._accounted_steps(steps)  # ceil(steps / b) rounds at q_b for BandMF (.banded_run)
        return poisson_dpsgd_epsilon(self.noise_multiplier, self.delta, q=q, steps=events, accountant=self.accountant)

    def allowed_steps_per_epoch(self) -> set:
        """``ceil(1/q)`` Poisson draws per epoch."""
        return {self.steps_per_epoch}

    _poisson = True  # batches are padded Poisson batches (x, y, mask)

    def _global_batch_rows(self) -> int:
        """The padded Poisson batch P: sampled once over the whole dataset, then split across the replicas."""
        return self.padded_batch_size

    def _replica_split_message(self, rows: int, replicas: int) -> str:
        return (f"the padded Poisson batch of {rows} rows (from expected_batch_size={self.expected_batch_size:g} and "
                f"n={self.n}) does not split evenly across the strategy's {replicas} replicas; pass an "
                f"expected_batch_size whose padded size is a multiple of {replicas} (padded sizes are multiples of 8 "
                f"unless capped at n), or a strategy with a number of replicas dividing {rows}")

    def _divisor(self) -> float:
        """The public L the noisy sum is divided by: the expected batch size q·n."""
        return float(self.expected_batch_size)

    def _noise_seed_for_engine(self):
        return self._noise_seed

    carries_run = True  # a model it compiles carries the run in its optimizer (run_state.py)

    def run_state(self) -> dict:
        """The run as a compiled model's optimizer saves it (:func:`.run_state.saved_run`)."""
        return saved_run(self)

    def private_model(self, model, **options):
        """``model`` whose ``compile`` / ``fit`` train it as this run (:func:`tfdpmech.make_private`); any
        option is a TypeError (the constructor sets up the whole run), see also :func:`.private_dpsgd_model`."""
        if options:
            raise TypeError(f"make_private(model, DPSGD(...)) takes no further options, got {sorted(options)}; every "
                            "setting of a DP-SGD run is an argument of DPSGD(...)")
        return private_dpsgd_model(model, self)

    # -- model ---------------------------------------------------------------------------------
    def _resolve_path(self, model) -> str:
        if not rebuildable(model):
            raise ValueError(
                f"Poisson DP-SGD needs a Sequential or functional model (tensorflow-privacy's DPSequential / "
                f"DPModel), got the subclassed {type(model).__name__} {model.name!r}; rebuild it with "
                "keras.Sequential or the functional API, or pass engine='tfdpmech' (any model whose layers are called "
                "through Keras)"
            )
        return super()._resolve_path(model)

    def _dp_model(self, model, dp_keras_model, lr):
        sequential_cls, model_cls = poisson_model_classes()
        registry = (self.layer_registry if self.layer_registry is not None else lr.make_default_layer_registry()
                    ) if self.path == "fast_clipping" else None
        kwargs = dict(l2_norm_clip=self.l2_norm_clip, noise_multiplier=self.noise_multiplier, num_microbatches=None,
                      use_xla=self.use_xla, layer_registry=registry, expected_batch_size=self.expected_batch_size,
                      noise_seed=self._noise_seed, name=f"{model.name}_dpsgd_poisson")
        if isinstance(model, keras.Sequential):
            inputs = keras.Input(batch_shape=model.input_shape)
            dp_model = sequential_cls(layers=[inputs] + list(model.layers), **kwargs)
        else:
            dp_model = model_cls(inputs=model.inputs, outputs=model.outputs, **kwargs)
        if dp_model._enable_fast_peg_computation != (self.path == "fast_clipping"):  # pragma: no cover
            raise RuntimeError(f"tensorflow-privacy did not choose the {self.path!r} clipping path for this model")
        return dp_model

    def _optimizer(self, dp_optimizer_keras):
        # The schedule and the weight average read only the step count and the released noisy
        # gradients: post-processing, no privacy cost.
        lr = self.learning_rate
        if self.lr_schedule == "cosine":
            lr = keras.optimizers.schedules.CosineDecay(self.learning_rate, decay_steps=self.steps)
        return averaging_optimizer(self.optimizer_name, lr, momentum=self.momentum, ema_momentum=self.ema_momentum,
                                   ema_warmup=self.ema_warmup)

    def _guard_train_step(self, model) -> None:
        """Train only on this run's own batches, each at the step it was drawn for, within the accounted steps."""
        guard_poisson_train_step(self, model)

    def _make_release(self) -> Release:
        basis = (
            f"DP-SGD (Abadi et al. 2016, Algorithm 1) with Poisson sampling: every step includes each of the n={self.n} "
            f"{'users' if self.users is not None else 'records'} independently with probability "
            f"q={self.sampling_probability:.6g}; per-{'user' if self.users is not None else 'example'} clipping "
            f"C={self.l2_norm_clip:g}; Gaussian noise σ·C with σ={self.noise_multiplier:.6g} added to the clipped sum, "
            f"divided by the expected batch size L={self.expected_batch_size:g}. "
            + self._unit_basis()
            + "Proven ε: "
            f"{ACCOUNTANT_NAMES[self.accountant]} over {self.steps} Poisson-subsampled Gaussian steps (amplification "
            "by sampling; Mironov, Talwar & Zhang 2019), assuming the sampling randomness stays secret."
        )
        dp_accounting = require_dp_accounting("DP-SGD accounting")
        # the whole run as one dp_accounting event: a ledger holding several releases composes it
        # with the others (PLD / RDP) instead of adding ε's
        event = dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(self.sampling_probability,
                                                dp_accounting.GaussianDpEvent(self.noise_multiplier)),
            self.steps)
        details = {
            "accountant": ACCOUNTANT_NAMES[self.accountant],
            "sampling": "poisson",
            "sampling_probability": self.sampling_probability,
            "expected_batch_size": self.expected_batch_size,
            "padded_batch_size": self.padded_batch_size,
            "steps": self.steps,
            "steps_per_epoch": self.steps_per_epoch,
            "n": self.n,
            "epochs": self.epochs,
            "momentum": self.momentum,
            "lr_schedule": self.lr_schedule,
            "ema_momentum": self.ema_momentum,
            "ema_warmup": self.ema_warmup,
            "physical_batch_size": self.physical_batch_size,
            "augmentation_multiplicity": self.augmentation_multiplicity,
            "records_per_user": None if self.users is None else self.users.k,
            "records": self.n if self.users is None else self.users.n_records,
            "run_id": self.run_id,
        }
        mechanism, basis, event, details = self._noise_release(basis, event, details)
        return self._release(basis, self.epsilon_achieved, details, event=event, mechanism=mechanism)

    def __repr__(self) -> str:
        if self.n is None:
            return (f"DPSGD(target epsilon={self.epsilon}, delta={self.delta:g}, epochs={self.epochs}, n from the "
                    f"first fit, engine={self.engine!r})")
        return (f"DPSGD(target epsilon={self.epsilon:g}, delta={self.delta:g}, q={self.sampling_probability:.4g}"
                f", expected_batch_size={self.expected_batch_size:g}, epochs={self.epochs}, steps={self.steps}, "
                f"n={self.n}, noise_multiplier={self.noise_multiplier:.4g}, proven ε={self.epsilon_achieved:.4g} "
                f"({self.accountant.upper()}), engine={self.engine!r}, path={self.path!r})")
