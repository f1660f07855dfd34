"""pCDBN's Chebyshev-expanded, perturbed CRBM energy and its training modes (§3.1–3.2, Eqs. 12–16).

Phan, Wu, Dou, "Preserving Differential Privacy in Convolutional Deep Belief Networks", Machine
Learning 2017. What the paper claims, what we prove and why: ``docs/mechanisms/pcdbn.md``.

Modes (the baselines CDBN and TCDBN are those of §4):

* ``"exact"`` — CDBN baseline: exact-sigmoid CRBM trained by persistent contrastive divergence on
  the data. No DP.
* ``"noiseless"`` — TCDBN baseline: the polynomial energy Ê (Eq. 14) without noise, mini-batch
  contrastive training on the data. No DP.
* ``"private"`` — rigorous functional mechanism (Zhang et al. 2012): the monomial coefficients
  of Ê over the *whole* dataset (with a constant Z, Ê is a polynomial in the filter weights) get
  ``Lap(Δ/ε)`` noise once (Algorithm 1 step 2, Lemma 1); training then
  minimises ``Ē(W)/n − Ê_neg(W)`` with negative chains started from noise and never reads private
  data again (post-processing). Provable ε-DP.

The authors' code path (noise on five shared polynomial coefficients scaled by a per-batch Δ) is
the reference mode :class:`~tfdpmech.mechanisms.pcdbn.reference.PCDBNReference`.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from ...accounting.ledger import PrivacyLedger, Release, ledger_or_new
from ...contract import release
from .conv_rbm import ConvRBM
from ...noise import make_rng
from ...released_data import array_fingerprint
from ...validation import check_array, check_batch_size, check_choice, check_epsilon, check_positive_int, check_real
from .monomials import (
    MAX_MONOMIALS,
    _exact_coefficients,
    check_functional_feasible,
    energy_orders,
    monomial_table,
)

__all__ = ["ChebyshevEnergy", "ENERGY_MODES", "energy_sensitivity", "check_domain"]

ENERGY_MODES = ("exact", "noiseless", "private")


def check_domain(x, visible_max: float, name: str = "x") -> np.ndarray:
    """Check inputs lie in the declared domain ``[0, visible_max]`` that Δ assumes.

    Raises:
        ValueError: NaN/inf or values outside the domain.
    """
    arr = check_array(x, name, ndim_min=4)
    lo, hi = float(arr.min()), float(arr.max())
    if lo < -1e-6 or hi > visible_max + 1e-6:
        raise ValueError(
            f"{name} must lie in the declared domain [0, {visible_max:g}] (the sensitivity Δ assumes it), got "
            f"values in [{lo:g}, {hi:g}]; scale with public bounds (tfdpmech.data.scale_to_unit) or declare "
            "visible_max on the ConvRBM"
        )
    return arr.astype(np.float32)


def energy_sensitivity(layer: ConvRBM, input_shape) -> float:
    """Δ of the shared noisy polynomial with constant Z (Lemma 1 applied to the monomial coefficients).

    Per record the coefficient L1 norm is at most
    ``N_H²·Σ_l |α_l|·R^{l+1}/Z^l + N_V²·C_in·v_max`` with ``R = N_W²·C_in·v_max + 1`` the largest
    ‖ṽ‖₁ over the declared domain (never over the data; Lemma 2's Eq. 15 takes a max over records
    and a W- and data-dependent Z); Δ is twice that. One polynomial shared by all K filters makes the
    max over groups of Eq. 15 valid (one release, then post-processing).
    """
    nh, nw = layer.hidden_shape(input_shape)
    big_r = layer.kernel_size**2 * int(input_shape[-1]) * layer.visible_max + 1.0
    z = layer.z
    hidden = nh * nw * sum(abs(a) * big_r ** (l + 1) / z**l for l, a in enumerate(layer.alpha))
    visible = (int(np.prod(input_shape[1:])) * layer.visible_max) if layer.visible_bias_enabled else 0.0
    return float(2.0 * (hidden + visible))  # Lemma 1: Δ <= 2 max_t Σ|λ_φt|


# --------------------------------------------------------------------------- the objective
class ChebyshevEnergy:
    """The CRBM training objective of one pCDBN layer, in one of :data:`ENERGY_MODES`.

    Steps (``mode="private"``, Algorithm 1 steps 1–2):

    1. :meth:`prepare`: S_γ and s_0 over the full dataset in float64, λ_γ; Δ from the domain
       (:func:`energy_sensitivity`); ``Lap(Δ/ε)`` drawn once per coefficient; only λ̄ kept, as
       non-trainable variables.
    2. :meth:`fit`: epochs of ``Ē(W)/n − mean Ê(v_neg; W) + l1·|W|₁`` with persistent negative
       chains from Bernoulli(½) noise, then the box projection. No private data is read.

    Args:
        layer: a :class:`~tfdpmech.layers.ConvRBM` (built on first use).
        mode: one of :data:`ENERGY_MODES`.
        epsilon: ε of this layer (private mode); must be None otherwise.
        seed: seed of the once-only noise and of the negative chains (None: OS entropy).
        neg_chains: number of persistent negative chains.
        gibbs_steps: Gibbs steps per update of the chains.
        l1: L1 weight penalty (paper: unspecified).
        max_monomials: refuse monomial expansions (private mode) larger than this.
        component: name of the release in the ledger.
        ledger: the :class:`~tfdpmech.accounting.ledger.PrivacyLedger` the release is recorded in
            (pCDBN's; a new one if None).

    Raises:
        ValueError / TypeError: unknown mode, ε <= 0 or missing for a private mode, ε given for a
            non-private mode, private mode with a non-constant normaliser.

    Reference: Phan, Wu, Dou, Machine Learning 2017, §3 (Algorithm 1, Eqs. 12–16), Lemmas 1–2.
    """

    def __init__(self, layer: ConvRBM, mode: str = "private", *, epsilon: float | None = None, seed=None,
                 neg_chains: int = 32, gibbs_steps: int = 1, l1: float = 0.0, max_monomials: int = MAX_MONOMIALS,
                 component: str = "crbm_energy", ledger: PrivacyLedger | None = None):
        if not isinstance(layer, ConvRBM):
            raise TypeError(f"layer must be a tfdpmech ConvRBM, got {type(layer).__name__}")
        self.layer = layer
        if mode == "reference":
            raise ValueError("ChebyshevEnergy has no 'reference' mode: the authors' code path is "
                             "tfdpmech.mechanisms.pcdbn.PCDBNReference(epsilon, ...)")
        self.mode = check_choice(mode, "mode", ENERGY_MODES)
        self.private = self.mode == "private"
        if self.private:
            if epsilon is None:
                raise ValueError(f"mode={mode!r} needs epsilon > 0 for this layer")
            self.epsilon = check_epsilon(epsilon)
        else:
            if epsilon is not None:
                raise ValueError(f"mode={mode!r} is a non-private baseline; pass epsilon=None")
            self.epsilon = None
        if self.mode == "private" and layer.normalizer_kind != "constant":
            raise ValueError(
                f"mode='private' needs normalizer='constant' (a data- and W-dependent Z breaks the polynomial form "
                f"and Δ of Lemma 2), got normalizer={layer.normalizer_kind!r}"
            )
        self.seed = seed
        self._rng = make_rng(seed)
        self.neg_chains = check_positive_int(neg_chains, "neg_chains")
        self.gibbs_steps = check_positive_int(gibbs_steps, "gibbs_steps")
        self.l1 = check_real(l1, "l1", minimum=0.0)
        self.max_monomials = check_positive_int(max_monomials, "max_monomials")
        self.component = component
        self.ledger = ledger_or_new(ledger)
        self.release: Release | None = None
        self.n: int | None = None
        self.sensitivity: float | None = None
        self._prepared = False

    # -- step 1 -------------------------------------------------------------------------------
    def prepare(self, x) -> Release | None:
        """Run the once-only step on the full training input of this layer.

        Args:
            x: every training record, mapped through the frozen lower layers, in the domain.

        Returns:
            the privacy :class:`~tfdpmech.accounting.ledger.Release` (None for non-private modes).

        Raises:
            RuntimeError: called twice (the budget is taken).
            ValueError: inputs outside the declared domain, or an infeasible expansion.
        """
        if self._prepared:
            raise RuntimeError("prepare() already ran: the noise is drawn once per layer; create a new ChebyshevEnergy")
        x = check_domain(x, self.layer.visible_max)
        if not self.layer.built:
            self.layer(tf.constant(x[:1]))
        self.input_shape = tuple(x.shape)
        self.n = len(x)
        self._tf_gen = tf.random.Generator.from_seed(int(self._rng.integers(2**31)))
        chains = self._tf_gen.uniform((self.neg_chains,) + tuple(x.shape[1:])) < 0.5
        self.v_neg = tf.Variable(tf.cast(chains, tf.float32) * self.layer.visible_max, trainable=False)
        if self.mode == "private":
            self._prepare_functional(x)
        self._prepared = True
        return self.release

    def _prepare_functional(self, x) -> None:
        layer = self.layer
        count = check_functional_feasible(layer, self.max_monomials)
        coeffs = _exact_coefficients(layer, x)  # S_γ over all records, float64
        self.sensitivity = energy_sensitivity(layer, x.shape)  # domain bounds only
        scale = self.sensitivity / self.epsilon
        d = layer.patch_dim
        self.orders = energy_orders(layer.alpha)
        self._tables = {m: tf.constant(monomial_table(d, m)) for m in self.orders}
        record = Release(
            component=self.component, mechanism="laplace", epsilon_claimed=self.epsilon,
            neighbours="replace_one", protects="record",
            epsilon_provable=self.epsilon,
            basis=("functional mechanism (Zhang et al. 2012, Lemma 1) on the monomial coefficients of the "
                   "Chebyshev-expanded energy with constant Z over the full dataset, perturbed once; Δ from the "
                   "declared domain [0, visible_max]; one noisy polynomial shared by all K filters (Lemma 2's max "
                   "over groups holds for one shared release); "
                   "training with data-free negative chains is post-processing"),
            sensitivity=self.sensitivity, noise_scale=scale,
            details={"n": self.n, "monomials": count + int(layer.visible_bias_enabled), "orders": self.orders,
                     "z": layer.z, "approx": layer.approx, "degree": layer.degree, "fingerprint": None},
        )
        # Lap(Δ/ε) once per coefficient (Lemma 1), recorded in the release that draws it
        released = release(self.ledger, record, value={key: np.asarray(lam, dtype=np.float64)
                                                           for key, lam in coeffs.items()}, rng=self._rng,
                           details_of=lambda noisy, noise: {
                               "fingerprint": array_fingerprint(np.concatenate([np.ravel(noisy[k]) for k in noisy]))})
        del coeffs  # raw λ and S are not kept
        noisy, self.release = released.value, released.record
        self._lambda_bar = {m: tf.Variable(noisy[m].astype(np.float32), trainable=False, name=f"lambda_bar_{m}")
                            for m in self.orders}
        self._lambda_c = tf.Variable(np.float32(noisy["c"]), trainable=False, name="lambda_bar_c")

    # -- the objective ------------------------------------------------------------------------
    def polynomial_energy(self):
        """``Ē(W) = Σ_k Σ_m Σ_γ λ̄_γ w̃_k^γ + λ̄_c c`` from the frozen noisy coefficients."""
        self._require("private")
        w = self.layer.filter_vectors()  # (K, d)
        total = self._lambda_c * self.layer.visible_bias[0] if self.layer.visible_bias_enabled else 0.0
        for m in self.orders:
            mono = tf.reduce_prod(tf.gather(w, self._tables[m], axis=1), axis=-1)  # (K, M_m)
            total += tf.reduce_sum(mono * self._lambda_bar[m][None, :])
        return total

    def _cd_energy(self, v):
        # CRBM CD gradient: h held at P(h|v) (Eq. 4 with h = E[h|v])
        layer = self.layer
        a = layer.preactivation(v)
        h = tf.stop_gradient(tf.sigmoid(a))
        c = layer.visible_bias[0] if layer.visible_bias_enabled else 0.0
        return -tf.reduce_sum(a * h, axis=[1, 2, 3]) - c * tf.reduce_sum(v, axis=[1, 2, 3])

    def _advance_chains(self):
        v = self.v_neg
        for _ in range(self.gibbs_steps):
            v, _ = self.layer.gibbs_step(v, self._tf_gen, sample_h=True, sample_v=True)
        self.v_neg.assign(tf.stop_gradient(v))

    def loss(self, v=None):
        """The scalar objective of one step (gradients w.r.t. the layer's weights).

        Args:
            v: a batch of training inputs (exact, noiseless); must be None in
                private mode, whose objective reads no data.
        """
        if not self._prepared:
            raise RuntimeError("call prepare(x) first")
        if self.mode == "private":
            if v is not None:
                raise ValueError("mode='private' reads no private data after prepare(); call loss() without v")
            data_term = self.polynomial_energy() / self.n
        elif v is None:
            raise ValueError(f"mode={self.mode!r} trains on batches: pass v")
        neg = self.v_neg
        if self.mode == "exact":
            out = tf.reduce_mean(self._cd_energy(tf.cast(v, tf.float32))) - tf.reduce_mean(self._cd_energy(neg))
        elif self.mode == "noiseless":
            out = tf.reduce_mean(self.layer.energy(v)) - tf.reduce_mean(self.layer.energy(neg))
        else:
            out = data_term - tf.reduce_mean(self.layer.energy(neg))
        if self.l1:
            out += self.l1 * tf.reduce_sum(tf.abs(self.layer.kernel))
        return out

    # -- step 2 -------------------------------------------------------------------------------
    def fit(self, x, *, epochs: int = 1, batch_size: int = 128, learning_rate: float = 0.01,
            optimizer=None, verbose: int = 0) -> list[float]:
        """Prepare (once) and train the layer; returns the mean loss per epoch.

        In private mode ``x`` is read only by :meth:`prepare`; each epoch runs
        ``ceil(n / batch_size)`` data-free steps.
        """
        if not self._prepared:
            self.prepare(x)
        epochs = check_positive_int(epochs, "epochs")
        batch_size = check_batch_size(batch_size, n=self.n)
        opt = optimizer or keras.optimizers.Adam(learning_rate)
        variables = [self.layer.kernel, self.layer.hidden_bias]
        if self.layer.visible_bias_enabled:
            variables.append(self.layer.visible_bias)
        steps = math.ceil(self.n / batch_size)

        @tf.function
        def step(v):
            if self.mode in ("exact", "noiseless", "private"):
                self._advance_chains()
            with tf.GradientTape() as tape:
                loss = self.loss(v if self.mode != "private" else None)
            grads = tape.gradient(loss, variables)
            opt.apply_gradients(zip(grads, variables))
            self.layer.project()  # box constraint (pitfall 8)
            return loss

        history = []
        order_rng = np.random.default_rng(int(self._rng.integers(2**31)))
        dummy = tf.zeros((1,))
        for epoch in range(epochs):
            losses = []
            if self.mode == "private":
                for _ in range(steps):
                    losses.append(float(step(dummy)))
            else:
                x_arr = np.asarray(x, dtype=np.float32)
                perm = order_rng.permutation(self.n)
                for i in range(steps):
                    idx = perm[i * batch_size : (i + 1) * batch_size]
                    if len(idx) < batch_size:
                        continue
                    losses.append(float(step(tf.constant(x_arr[idx]))))
            history.append(float(np.mean(losses)) if losses else float("nan"))
            if verbose:
                print(f"[{self.component}] epoch {epoch + 1}/{epochs} loss {history[-1]:.5g}")
        return history

    # -- export ---------------------------------------------------------------------------------
    def export_coefficients(self, noisy: bool = True) -> dict:
        """The released noisy coefficients λ̄ (safe to save), keyed by order, plus ``"c"``.

        Raises:
            ValueError: ``noisy=False`` (noise-free statistics are never exported: they are the
                data's own) or a mode without released coefficients.
        """
        if not noisy:
            raise ValueError("noise-free statistics are never exported (they are the private data's own); "
                             "call export_coefficients(noisy=True) for the released, perturbed λ̄")
        self._require("private")
        out = {m: self._lambda_bar[m].numpy() for m in self.orders}
        out["c"] = float(self._lambda_c.numpy())
        return out

    def _require(self, mode):
        if self.mode != mode or not self._prepared:
            raise ValueError(f"this needs mode={mode!r} after prepare(); this objective has mode={self.mode!r}")
