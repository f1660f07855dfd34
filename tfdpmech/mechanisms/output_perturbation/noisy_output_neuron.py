"""Lu et al.'s per-query output perturbation as an inference-only Keras layer.

Lu, Asghar, Kaafar, Webb, Dickinson, "A Differentially Private Framework for Deep Learning with
Convexified Loss Functions", Algorithm 1 (lines 8–12), Theorem 6 and the budget split of §5.3.
Why the paper's version is claimed only and what ``mode="private"`` proves:
``docs/mechanisms/output_perturbation.md``.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from ...noise import tf_laplace
from ...validation import check_choice, check_epsilon, check_positive_int, check_positive_real, warn_unproven_mode
from ...layers.shape_preserving import ShapePreservingLayer

__all__ = ["NoisyOutputNeuron", "noise_calibration", "NOISE_TYPES", "GAUSSIAN_SPLITS", "OUTPUT_MODES"]

NOISE_TYPES = ("gaussian", "laplace")
GAUSSIAN_SPLITS = ("paper", "reference_code")
OUTPUT_MODES = ("reference", "private")  # one sampled logit (Algorithm 1) / every logit


def noise_calibration(epsilon_query: float, delta_z: float, num_classes: int, *, noise: str = "gaussian",
                      gaussian_split: str = "paper", mode: str = "private") -> dict:
    """Per-step budgets and the noise scale for one query.

    ``mode="reference"`` (Algorithm 1): ``ε_s = ε_n = ε_step`` with ``ε_step = ε/(2C+1)`` (Laplace,
    Theorem 6), ``ε/√(4C+1)`` (Gaussian, the split of §5.3) or ``ε/(2√C+1)`` (Gaussian, authors'
    code); the scale is ``Δz_T/ε_n`` (line 10). ``mode="private"``: independent noise on all C logits,
    Laplace ``b = C·Δz_T/ε`` (L1 sensitivity C·Δz_T) or Gaussian ``σ = √C·Δz_T/μ`` (L2 sensitivity
    √C·Δz_T); no sampling step.

    Returns:
        dict with ``epsilon_step``, ``epsilon_sampling``, ``epsilon_neuron`` (None in
        ``mode="private"``) and ``noise_scale`` (Laplace b or Gaussian σ).

    Raises:
        ValueError / TypeError: ε ≤ 0, Δz_T ≤ 0, C < 2, unknown noise, split or mode.
    """
    eps = check_epsilon(epsilon_query, "epsilon_query")
    dz = check_positive_real(delta_z, "delta_z")
    c = check_positive_int(num_classes, "num_classes", minimum=2)
    check_choice(noise, "noise", NOISE_TYPES)
    check_choice(gaussian_split, "gaussian_split", GAUSSIAN_SPLITS)
    check_choice(mode, "mode", OUTPUT_MODES)
    if mode == "private":
        scale = (c * dz / eps) if noise == "laplace" else (math.sqrt(c) * dz / eps)
        return {"epsilon_step": None, "epsilon_sampling": None, "epsilon_neuron": None, "noise_scale": scale}
    if noise == "laplace":
        divisor = 2 * c + 1  # Theorem 6
    elif gaussian_split == "paper":
        divisor = math.sqrt(4 * c + 1)  # §5.3, GDP composition (Theorem 3): √(C·(2ε)² + ε²)
    else:
        divisor = 2 * math.sqrt(c) + 1  # authors' code
    step = eps / divisor
    return {"epsilon_step": step, "epsilon_sampling": step, "epsilon_neuron": step, "noise_scale": dz / step}


@keras.saving.register_keras_serializable(package="tfdpmech")
class NoisyOutputNeuron(ShapePreservingLayer):
    """Perturb one output logit per query (Lu et al. Algorithm 1), or all of them; return softmax.

    Per row (= per query) and per call, with fresh randomness every time:

    * ``mode="reference"`` (Algorithm 1, lines 8–12): ``p = softmax(z)``; sample a neuron
      ``v ~ softmax(ε_s·p/(2Δp))`` (exponential mechanism, Gumbel-max); add ``η ~ Lap(Δz_T/ε_n)``
      or ``N(0, (Δz_T/ε_n)²)`` to ``z_v`` only; return ``softmax(ẑ)``. Theorem 6 is not a valid
      proof for C ≥ 3: the released ratios ``p̂_u/p̂_w`` of the unperturbed logits are exact. Treat
      its ε as *claimed*.
    * ``mode="private"``: independent noise on every logit, Laplace ``b = C·Δz_T/ε`` (ε-DP) or
      Gaussian ``σ = √C·Δz_T/μ`` (μ-GDP), then softmax. This is a proof *given* the sensitivity
      bound Δz_T, which itself is not proven for a full MLP (Eq. 18 and Corollary 1 are not bounds).

    For Gaussian noise ``epsilon_query`` is a GDP μ (§3.1, Theorems 2–3), not an (ε, δ) ε.

    The layer is inference-only: ``training=True`` raises. It has no trainable weights; the noise
    scale and budget split are Python floats in the config. Randomness comes from a
    ``tf.random.Generator`` whose state advances on every call (seeded for tests, OS entropy by
    default), so two calls on the same input differ. The sampled neuron and η are never exposed.
    Computations run in ``compute_dtype`` (float64 by default: at ε = 0.01 the noise scale reaches
    thousands); the output is cast back to the input dtype.

    Args:
        epsilon_query: budget of one query (ε for Laplace, μ for Gaussian), > 0.
        delta_z: sensitivity Δz_T of one logit.
        delta_p: sensitivity Δp of one probability (used by the sampling step), in (0, 1].
        num_classes: C ≥ 2.
        noise: ``"gaussian"`` or ``"laplace"``.
        gaussian_split: ``"paper"`` (√(4C+1)) or ``"reference_code"`` (2√C+1).
        mode: ``"private"`` (the default: every logit) or ``"reference"`` (one sampled logit, claimed
            only; warns :class:`~tfdpmech.privacy_warnings.UnprovenModeWarning` once per process).
        seed: seed of the generator; None draws from OS entropy.
        compute_dtype: ``"float64"`` or ``"float32"``.

    Input shape: ``(batch, C)`` logits. Output shape: ``(batch, C)`` probabilities.

    Raises:
        ValueError / TypeError: bad ε, Δz_T, Δp, C, noise, split, mode or dtype; logits with a
            last axis other than C; ``training=True``.

    Example:
        >>> noisy = NoisyOutputNeuron(epsilon_query=1.0, delta_z=0.3577, delta_p=1.0, num_classes=10)
        >>> probs = noisy(logits)  # fresh noise on every call
    """

    def __init__(self, epsilon_query: float, delta_z: float, delta_p: float, num_classes: int,
                 noise: str = "gaussian", gaussian_split: str = "paper", mode: str = "private",
                 seed: int | None = None, compute_dtype: str = "float64", **kwargs):
        super().__init__(**kwargs)
        self.epsilon_query = check_epsilon(epsilon_query, "epsilon_query")
        self.delta_z = check_positive_real(delta_z, "delta_z")
        self.delta_p = check_positive_real(delta_p, "delta_p")
        if self.delta_p > 1.0:
            raise ValueError(f"delta_p must lie in (0, 1] (a probability changes by at most 1), got {self.delta_p}")
        self.num_classes = check_positive_int(num_classes, "num_classes", minimum=2)
        self.noise = check_choice(noise, "noise", NOISE_TYPES)
        self.gaussian_split = check_choice(gaussian_split, "gaussian_split", GAUSSIAN_SPLITS)
        self.mode = check_choice(mode, "mode", OUTPUT_MODES)
        if self.mode != "private":
            warn_unproven_mode(type(self).__name__, self.mode)
        self.compute_dtype_name = check_choice(compute_dtype, "compute_dtype", ("float64", "float32"))
        if seed is not None:
            seed = check_positive_int(seed, "seed", minimum=0)
        self.seed = seed
        cal = noise_calibration(self.epsilon_query, self.delta_z, self.num_classes, noise=self.noise,
                                gaussian_split=self.gaussian_split, mode=self.mode)
        self.epsilon_step = cal["epsilon_step"]
        self.epsilon_sampling = cal["epsilon_sampling"]
        self.epsilon_neuron = cal["epsilon_neuron"]
        self.noise_scale = cal["noise_scale"]
        self._generator = (tf.random.Generator.from_seed(seed) if seed is not None
                           else tf.random.Generator.from_non_deterministic_state())

    def build(self, input_shape):
        last = input_shape[-1]
        if last is not None and int(last) != self.num_classes:
            raise ValueError(
                f"NoisyOutputNeuron was configured for num_classes={self.num_classes} but receives {int(last)} logits"
            )
        super().build(input_shape)

    def _gumbel(self, shape, dtype):
        tiny = np.finfo(dtype.as_numpy_dtype).tiny
        u = self._generator.uniform(shape, minval=tiny, maxval=1.0, dtype=dtype)
        return -tf.math.log(-tf.math.log(u))

    def _noise(self, shape, dtype):
        if self.noise == "laplace":
            return tf_laplace(shape, self.noise_scale, self._generator, dtype)
        return self._generator.normal(shape, dtype=dtype) * tf.constant(self.noise_scale, dtype)

    def call(self, inputs, training=None):
        if isinstance(training, (bool, np.bool_)) and training:
            raise ValueError(
                "NoisyOutputNeuron is inference-only: call it with training=False (attach it to a prediction "
                "model, never to the model being trained)"
            )
        dtype = tf.as_dtype(self.compute_dtype_name)
        z = tf.cast(inputs, dtype)
        shape = tf.shape(z)
        if self.mode == "private":
            z_hat = z + self._noise(shape, dtype)  # every logit: L1 sensitivity C·Δz_T, L2 √C·Δz_T
        else:
            # 2. p = softmax(z): noise-free, internal only
            p = tf.nn.softmax(z, axis=-1)
            # 3. exponential mechanism, utility p_v, sensitivity Δp (Alg. 1 line 9), via Gumbel-max
            scores = tf.constant(self.epsilon_sampling / (2.0 * self.delta_p), dtype) * p
            v = tf.argmax(scores + self._gumbel(shape, dtype), axis=-1)
            mask = tf.one_hot(v, self.num_classes, dtype=dtype)
            # 4.–5. one draw per row, added to the sampled logit only (Alg. 1 lines 10–11)
            eta = self._noise(tf.stack([shape[0], 1]), dtype)
            z_hat = z + mask * eta
        # 6. softmax of the perturbed logits
        return tf.cast(tf.nn.softmax(z_hat, axis=-1), inputs.dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            epsilon_query=self.epsilon_query, delta_z=self.delta_z, delta_p=self.delta_p,
            num_classes=self.num_classes, noise=self.noise, gaussian_split=self.gaussian_split,
            mode=self.mode, seed=self.seed, compute_dtype=self.compute_dtype_name,
        )
        return config
