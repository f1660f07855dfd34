"""Convolutional RBM (Lee et al., ICML'09) as used by pCDBN (Phan et al. 2017, §2.2 and §3.1)."""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from .chebyshev import APPROXIMATIONS, approximation_alpha, check_degree, poly_eval
from ...validation import check_choice, check_positive_int, check_real

__all__ = ["ConvRBM", "BoxConstraint", "NORMALIZERS", "POOLINGS"]

NORMALIZERS = ("constant", "lrn", "batch_max")
POOLINGS = ("max", "probabilistic", "none")
DEFAULT_LRN = {"q": 2.0, "n": 5, "alpha": 1e-4, "beta": 0.75}  # paper §3.1 (AlexNet constants)


@keras.saving.register_keras_serializable(package="tfdpmech")
class BoxConstraint(keras.constraints.Constraint):
    """Clip every weight to ``[-bound, bound]``: keeps ``|a| <= Z`` and the perturbed polynomial on a compact set."""

    def __init__(self, bound: float = 1.0):
        if not bound > 0:
            raise ValueError(f"bound must be > 0, got {bound}")
        self.bound = float(bound)

    def __call__(self, w):
        return tf.clip_by_value(w, -self.bound, self.bound)

    def get_config(self):
        return {"bound": self.bound}


@keras.saving.register_keras_serializable(package="tfdpmech")
class ConvRBM(keras.layers.Layer):
    """Convolutional RBM with K filter groups, a shared visible bias and optional pooling.

    Energy (Eq. 4): ``E(v, h) = −Σ_k Σ_ij h^k_ij (W^k ∗ v)_ij − Σ_k b_k Σ_ij h^k_ij − c Σ v``.
    Conditionals (Eqs. 5–6): ``P(h=1|v) = σ(conv2d(v, W) + b)`` and
    ``P(v=1|h) = σ(conv2d_transpose(h, W) + c)`` with the same kernel ``(N_W, N_W, C_in, K)``.
    pCDBN's surrogate energy (Eqs. 12, 14) replaces h by ``σ̂(a/Z)``, a polynomial of degree L:
    per record ``Ê = −Σ_{k,i,j} a·σ̂(a/Z) − c·Σ v`` (:meth:`energy`).

    ``call`` is the inference path: hidden probabilities (exact sigmoid by default, as in the
    authors' code) followed by pooling, so a trained layer sits in an ordinary Keras model.

    Args:
        filters: K, the number of hidden groups.
        kernel_size: N_W.
        strides: convolution stride (1 in the paper; the authors' MNIST code uses 2 with "same").
        padding: ``"valid"`` (paper) or ``"same"``.
        visible_bias: True for one shared visible bias c (paper), False for none (code).
        approx: polynomial surrogate, one of :data:`tfdpmech.mechanisms.pcdbn.chebyshev.APPROXIMATIONS`.
        degree: L >= 1.
        normalizer: Z in ``X = a/Z``: ``"constant"`` (rigorous, default ``Z = ‖ṽ‖₁,max·w_max``),
            ``"lrn"`` (paper §3.1, ``max(|a|, (q + α Σ_window a²)^β)``) or ``"batch_max"`` (code:
            ``max(a)`` over the batch tensor). Only ``"constant"`` keeps Ê a polynomial in W.
        z: the constant Z; None computes ``(N_W²·C_in·visible_max + 1)·weight_bound``, which
            guarantees |a| <= Z inside the box.
        lrn: dict with ``q``, ``n``, ``alpha``, ``beta`` for ``normalizer="lrn"``.
        weight_bound: w_max of the box constraint ``|W|, |b|, |c| <= w_max``.
        visible_max: the declared input domain ``[0, visible_max]``.
        pooling: ``"max"`` (MaxPool on hidden probabilities; §3, step 3), ``"probabilistic"``
            (Lee et al.'s probabilistic max-pooling, P(pooling unit on)) or ``"none"``.
        pool_size: pooling block size.
        inference_activation: ``"sigmoid"`` (σ(a), code) or ``"poly"`` (σ̂(a/Z)).

    Input shape: ``(batch, N_V, N_V, C_in)`` in ``[0, visible_max]``.
    Output shape: ``(batch, N_H/p, N_H/p, K)`` (pooled) or ``(batch, N_H, N_H, K)``.

    Example:
        >>> rbm = ConvRBM(8, 5)
        >>> y = rbm(tf.zeros((2, 28, 28, 1)))  # (2, 12, 12, 8)
    """

    def __init__(self, filters: int, kernel_size: int, *, strides: int = 1, padding: str = "valid",
                 visible_bias: bool = True, approx: str = "paper_smoothstep", degree: int = 7,
                 normalizer: str = "constant", z: float | None = None, lrn: dict | None = None,
                 weight_bound: float = 1.0, visible_max: float = 1.0, pooling: str = "max", pool_size: int = 2,
                 inference_activation: str = "sigmoid", **kwargs):
        super().__init__(**kwargs)
        self.filters = check_positive_int(filters, "filters")
        self.kernel_size = check_positive_int(kernel_size, "kernel_size")
        self.strides = check_positive_int(strides, "strides")
        self.padding = check_choice(str(padding).lower(), "padding", ("valid", "same"))
        self.visible_bias_enabled = bool(visible_bias)
        self.approx = check_choice(approx, "approx", APPROXIMATIONS)
        self.degree = check_degree(degree)
        self.alpha = approximation_alpha(self.approx, self.degree)  # validates the pair early
        self.normalizer_kind = check_choice(normalizer, "normalizer", NORMALIZERS)
        if z is not None and not (isinstance(z, (int, float)) and z > 0 and math.isfinite(z)):
            raise ValueError(f"z must be a finite positive number or None, got {z!r}")
        self.z_arg = None if z is None else float(z)
        self.lrn = dict(DEFAULT_LRN, **(lrn or {}))
        weight_bound, visible_max = check_real(weight_bound, "weight_bound"), check_real(visible_max, "visible_max")
        if not weight_bound > 0:
            raise ValueError(f"weight_bound must be > 0, got {weight_bound}")
        if not visible_max > 0:
            raise ValueError(f"visible_max must be > 0, got {visible_max}")
        self.weight_bound = float(weight_bound)
        self.visible_max = float(visible_max)
        self.pooling = check_choice(pooling, "pooling", POOLINGS)
        self.pool_size = check_positive_int(pool_size, "pool_size")
        self.inference_activation = check_choice(inference_activation, "inference_activation", ("sigmoid", "poly"))

    # -- weights ------------------------------------------------------------------------------
    def build(self, input_shape):
        self.in_channels = int(input_shape[-1])
        self.visible_hw = (int(input_shape[1]), int(input_shape[2]))
        box = BoxConstraint(self.weight_bound)
        init = keras.initializers.RandomNormal(stddev=0.1)
        self.kernel = self.add_weight(name="kernel", shape=(self.kernel_size, self.kernel_size, self.in_channels,
                                                            self.filters), initializer=init, constraint=box,
                                      trainable=True)
        self.hidden_bias = self.add_weight(name="hidden_bias", shape=(self.filters,), initializer="zeros",
                                           constraint=box, trainable=True)
        self.visible_bias = self.add_weight(name="visible_bias", shape=(1,), initializer="zeros", constraint=box,
                                            trainable=self.visible_bias_enabled)
        super().build(input_shape)

    @property
    def patch_dim(self) -> int:
        """d = N_W²·C_in + 1: a receptive field with a trailing 1 for the hidden bias (a = w̃·ṽ in Eq. 12)."""
        return self.kernel_size**2 * self.in_channels + 1

    @property
    def z(self) -> float:
        """The constant normaliser Z (``normalizer="constant"``)."""
        if self.z_arg is not None:
            return self.z_arg
        return (self.kernel_size**2 * self.in_channels * self.visible_max + 1.0) * self.weight_bound

    def project(self) -> None:
        """Apply the box constraint to W, b and c (after every update of a custom loop)."""
        for w in (self.kernel, self.hidden_bias, self.visible_bias):
            w.assign(tf.clip_by_value(w, -self.weight_bound, self.weight_bound))

    def filter_vectors(self):
        """``w̃_k = (vec W^k, b_k)``, shape (K, d), in the order of :meth:`patches`."""
        w = tf.reshape(self.kernel, (-1, self.filters))  # (N_W·N_W·C_in, K), row-major (r, s, ch)
        return tf.transpose(tf.concat([w, self.hidden_bias[None, :]], axis=0))

    # -- conditionals -------------------------------------------------------------------------
    def preactivation(self, v):
        """``a = conv2d(v, W) + b`` (Eq. 5; cross-correlation matches v_{i+r−1, j+s−1} of Eq. 4)."""
        v = tf.cast(v, self.kernel.dtype)
        return tf.nn.conv2d(v, self.kernel, strides=self.strides, padding=self.padding.upper()) + self.hidden_bias

    def patches(self, v):
        """Receptive fields with a trailing 1, shape (batch, N_H, N_H, d); ``a = patches · w̃_k``."""
        v = tf.cast(v, tf.float32)
        k = self.kernel_size
        p = tf.image.extract_patches(v, sizes=[1, k, k, 1], strides=[1, self.strides, self.strides, 1],
                                     rates=[1, 1, 1, 1], padding=self.padding.upper())
        return tf.concat([p, tf.ones_like(p[..., :1])], axis=-1)

    def normalizer(self, a):
        """Z with the shape of ``a`` (the normaliser of §3.1)."""
        if self.normalizer_kind == "constant":
            return tf.fill(tf.shape(a), tf.constant(self.z, a.dtype))
        if self.normalizer_kind == "batch_max":  # authors' code: one scalar over the batch tensor
            return tf.fill(tf.shape(a), tf.maximum(tf.reduce_max(a), tf.constant(1e-12, a.dtype)))
        half = int(self.lrn["n"]) // 2
        channels = tf.shape(a)[-1]
        padded = tf.pad(tf.square(a), [[0, 0], [0, 0], [0, 0], [half, half]])
        window = tf.add_n([padded[..., m : m + channels] for m in range(2 * half + 1)])
        lrn = tf.pow(self.lrn["q"] + self.lrn["alpha"] * window, self.lrn["beta"])
        return tf.maximum(tf.abs(a), lrn)  # paper §3.1: guarantees |a/Z| <= 1

    def sigma_hat(self, a, alpha=None):
        """``σ̂(a/Z)`` with X clipped to [−1, 1] (Eq. 14)."""
        alpha = self.alpha if alpha is None else alpha
        return poly_eval(a / self.normalizer(a), alpha)

    def hidden_probs(self, v, approx: str = "exact"):
        """P(h=1|v): ``"exact"`` σ(a) (Eq. 5) or ``"poly"`` σ̂(a/Z) (Eq. 14)."""
        a = self.preactivation(v)
        return tf.sigmoid(a) if approx == "exact" else self.sigma_hat(a)

    def visible_probs(self, h):
        """``P(v=1|h) = σ(conv2d_transpose(h, W) + c)`` (Eq. 6), shape of the visible layer."""
        h = tf.cast(h, self.kernel.dtype)
        out_shape = tf.stack([tf.shape(h)[0], *self.visible_hw, self.in_channels])
        pre = tf.nn.conv2d_transpose(h, self.kernel, out_shape, strides=self.strides, padding=self.padding.upper())
        c = self.visible_bias[0] if self.visible_bias_enabled else 0.0
        return tf.sigmoid(pre + c)

    def gibbs_step(self, v, generator: tf.random.Generator, *, sample_h: bool = True, sample_v: bool = False):
        """One Gibbs step v → h → v′ with exact conditionals; returns (v′, P(h|v)).

        Randomness comes from ``generator`` (a ``tf.random.Generator``), so repeated calls inside a
        ``tf.function`` draw fresh samples.
        """
        ph = self.hidden_probs(v, "exact")
        h = tf.cast(generator.uniform(tf.shape(ph)) < ph, ph.dtype) if sample_h else ph
        pv = self.visible_probs(h)
        v_new = tf.cast(generator.uniform(tf.shape(pv)) < pv, pv.dtype) if sample_v else pv
        return v_new * self.visible_max, ph

    def energy(self, v, approx: str = "poly", alpha=None):
        """Per-record energy with h replaced by its mean (Eqs. 12/14): ``−Σ a·h(a) − c·Σ v``.

        Args:
            v: visible batch.
            approx: ``"poly"`` for Ê (σ̂(a/Z), Eq. 14) or ``"exact"`` for Ẽ (σ(a), Eq. 12).
            alpha: override the surrogate's monomial coefficients.

        Returns:
            shape (batch,).
        """
        v = tf.cast(v, self.kernel.dtype)
        a = self.preactivation(v)
        h = tf.sigmoid(a) if approx == "exact" else self.sigma_hat(a, alpha)
        c = self.visible_bias[0] if self.visible_bias_enabled else 0.0
        return -tf.reduce_sum(a * h, axis=[1, 2, 3]) - c * tf.reduce_sum(v, axis=[1, 2, 3])

    # -- inference ----------------------------------------------------------------------------
    def _pool(self, a, probs):
        p = self.pool_size
        if self.pooling == "none" or p == 1:
            return probs
        if self.pooling == "max":
            return tf.nn.max_pool2d(probs, p, p, "VALID")
        # probabilistic max-pooling (Lee et al. 2009): P(pool on) = 1 − 1/(1 + Σ_block e^{a})
        hh, ww = (tf.shape(a)[1] // p) * p, (tf.shape(a)[2] // p) * p
        blocks = tf.nn.space_to_depth(a[:, :hh, :ww, :], p)  # (B, H/p, W/p, p·p·K), order (dy, dx, k)
        s = tf.shape(blocks)
        blocks = tf.reshape(blocks, tf.stack([s[0], s[1], s[2], p * p, self.filters]))
        return tf.sigmoid(tf.reduce_logsumexp(blocks, axis=3))

    def call(self, inputs):
        a = self.preactivation(inputs)
        probs = tf.sigmoid(a) if self.inference_activation == "sigmoid" else self.sigma_hat(a)
        return self._pool(a, probs)

    def hidden_shape(self, input_shape):
        """(N_H, N_H') of the hidden layer before pooling."""
        h, w = int(input_shape[1]), int(input_shape[2])
        if self.padding == "same":
            return math.ceil(h / self.strides), math.ceil(w / self.strides)
        return (h - self.kernel_size) // self.strides + 1, (w - self.kernel_size) // self.strides + 1

    def compute_output_shape(self, input_shape):
        h, w = self.hidden_shape(input_shape)
        if self.pooling != "none" and self.pool_size > 1:
            h, w = h // self.pool_size, w // self.pool_size
        return (input_shape[0], h, w, self.filters)

    def get_config(self):
        config = super().get_config()
        config.update(
            filters=self.filters, kernel_size=self.kernel_size, strides=self.strides, padding=self.padding,
            visible_bias=self.visible_bias_enabled, approx=self.approx, degree=self.degree,
            normalizer=self.normalizer_kind, z=self.z_arg, lrn=dict(self.lrn), weight_bound=self.weight_bound,
            visible_max=self.visible_max, pooling=self.pooling, pool_size=self.pool_size,
            inference_activation=self.inference_activation,
        )
        return config
