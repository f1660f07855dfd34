"""The authors' AdLM code path, one small function per step, each naming the source line it mirrors.

The code is ``haiphanNJIT/PrivateDeepLearning`` at ``77fb357`` (``AdLM/MNIST/AdLM.py`` and
``dpLRP_MNIST.py``); :class:`~tfdpmech.mechanisms.adlm.reference.AdLMReference` runs these
steps in order:

1. inputs scaled to [−1, 1] (``input_data.py:96``);
2. relevance: LRP on a LeNet-5 over 32×32 inputs padded with −1, averaged over 2,000 training
   images, sharpened ``((R − min)/(max − min))**4`` plus ``Lap(2·784/(ε1·|D|))``
   (``dpLRP_MNIST.py:22-26, 35-55, 87``); here the LeNet-5 is trained on public data and the
   relevance is computed with :func:`tfdpmech.mechanisms.adlm.lrp.lrp_relevance`;
3. budget ratios on the 32×32 grid ``β = 1024·R/ΣR`` with R and β floored at 1e-5, the inner
   28×28 read as ``β[i+2][j+2]`` (``AdLM.py:129-141, 80``);
4. every step one Laplace map of shape [1, 28, 28, 1], per pixel ``Lap(Δ2/(β·ε2))/L`` with
   ``Δ2 = 2·14·14·25 = 9,800``, broadcast to the whole batch, added, clipped to [−10, 10]
   (``AdLM.py:76-80, 91, 161-163, 290``);
5. the network conv 5×5×32 → max-pool → conv 5×5×64 → max-pool → FC-25 → batch norm with batch
   statistics (also at test) → ReLU → clip → FC-10 with bias (``AdLM.py:155-199``);
6. the loss: the Taylor polynomial ``log 2 + (½ − y)z + z²/8`` summed over batch and classes with
   clean labels, minus ``B·M·Σ(N/L ⊙ W_out)``, ``N ~ Lap(Δ3/ε3)`` drawn once,
   ``Δ3 = M(|h| + |h|²/4) = 1,812.5`` (``AdLM.py:92, 186-187, 263-268``);
7. Adam with learning rate 3e-4 (``AdLM.py:108, 272``), batches drawn as ``next_batch`` does
   (``input_data.py:113-135``); evaluation on clean test images in one batch (``AdLM.py:285-294``).
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from ...noise import laplace, make_rng, tf_laplace
from ...validation import check_batch_size, check_epsilon, check_one_hot, check_positive_int, check_unit_interval
from .lrp import lrp_relevance
from .networks import lenet5_relevance_model

__all__ = [
    "DELTA2_MNIST",
    "R_LOWERBOUND",
    "NOISY_INPUT_CLIP",
    "to_code_range",
    "pad_to_grid",
    "train_relevance_model",
    "averaged_relevance",
    "sharpen",
    "relevance_noise_scale",
    "private_sharpened_relevance",
    "budget_ratios_on_grid",
    "inner_crop",
    "input_noise_scales",
    "draw_noise_map",
    "perturb_inputs",
    "loss_sensitivity_code",
    "draw_weight_noise",
    "taylor_terms",
    "reference_loss",
    "reference_optimizer",
    "next_batch_indices",
    "BatchSampler",
]

DELTA2_MNIST = 2 * 14 * 14 * 25  # AdLM.py:91  "2*|feature_map|*|unit_patch| = 2*14*14*5*5" = 9,800
R_LOWERBOUND = 1e-5  # AdLM.py:103
NOISY_INPUT_CLIP = 10.0  # AdLM.py:163  tf.clip_by_value(z, -10, 10)
GRID = 32  # AdLM.py:95-96  image_size + padding = 28 + 4
PAD = 2  # AdLM.py:80  _beta[i+2][j+2]
RELEVANCE_SAMPLES = 2000  # dpLRP_MNIST.py:43  I[:2000]
RELEVANCE_D = 28 * 28  # dpLRP_MNIST.py:61  d = image_size**2
LEARNING_RATE = 3e-4  # AdLM.py:108


# ------------------------------------------------------------------------------------------------
# Step 1 -- data range
# ------------------------------------------------------------------------------------------------
def to_code_range(x01) -> np.ndarray:
    """Pixels in [0, 1] → [−1, 1], as ``images/127.5 − 1`` on raw bytes (``input_data.py:96``)."""
    return (np.asarray(x01, np.float32) * 2.0 - 1.0).astype(np.float32)


# ------------------------------------------------------------------------------------------------
# Step 2 -- relevance (dpLRP_MNIST.py)
# ------------------------------------------------------------------------------------------------
def pad_to_grid(x_code) -> np.ndarray:
    """28×28 images in [−1, 1] → 32×32, padded with −1 (``dpLRP_MNIST.py:26``)."""
    x = np.asarray(x_code, np.float32)
    return np.pad(x, ((0, 0), (PAD, PAD), (PAD, PAD), (0, 0)), constant_values=-1.0)


def train_relevance_model(x_public01, y_public, *, epochs: int = 15, seed: int | None = 0,
                          verbose: int = 0) -> keras.Sequential:
    """Train :func:`lenet5_relevance_model` on **public** images in [0, 1] (mapped to the code's range).

    The authors used a LeNet-5 pre-trained on the MNIST training set (99.23 %); training it on
    public data keeps its weights independent of the private records.
    """
    x = pad_to_grid(to_code_range(check_unit_interval(x_public01, "x_public")))
    y = check_one_hot(y_public, "y_public")
    if seed is not None:
        keras.utils.set_random_seed(int(seed))
    model = lenet5_relevance_model(y.shape[1], seed=seed)
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.CategoricalCrossentropy(from_logits=True))
    model.fit(x, y, epochs=epochs, batch_size=64, verbose=verbose, shuffle=True)
    return model


def averaged_relevance(relevance_model, x_grid, *, samples: int = RELEVANCE_SAMPLES, rng=None,
                       start: str = "all_logits") -> np.ndarray:
    """Mean LRP-ε (stabiliser 1) over a random sample of images.

    Mirrors ``dpLRP_MNIST.py:35-55, 70``: ``nn.lrp(ypred, 'epsilon', 1.)`` — seeded with all
    outputs (``start="all_logits"``) — summed over the first ``samples`` images of a random
    permutation, then averaged. Returns a (32, 32) map. On a LeNet-5 trained on 1,000 public
    images this seeding makes the padded background more relevant than the centre, unlike the
    authors' shipped relevance file; ``start="predicted_logit"`` gives the centre-high map.
    """
    rng = make_rng(rng)
    x = np.asarray(x_grid, np.float32)
    idx = rng.permutation(len(x))[:samples]  # dpLRP_MNIST.py:35-36, 43
    r = lrp_relevance(relevance_model, x[idx], start=start, mu=1.0, batch_size=250)
    return r.mean(axis=0)[..., 0].astype(np.float64)  # dpLRP_MNIST.py:70


def sharpen(r) -> np.ndarray:
    """``((R − min)/(max − min))**4`` over the whole map (``dpLRP_MNIST.py:73-87``).

    Data-dependent (min and max come from the data) and applied before the noise.
    """
    r = np.asarray(r, np.float64)
    lo, hi = float(r.min()), float(r.max())
    if not hi > lo:
        raise ValueError("the averaged relevance map is constant; the code's sharpening divides by max - min = 0")
    return (r - lo) ** 4 / (hi - lo) ** 4


def relevance_noise_scale(eps1: float, n: int, d: int = RELEVANCE_D) -> float:
    """``2·d/(ε1·|D|)`` with d = 784 and |D| the training-set size (``dpLRP_MNIST.py:61-63, 87``)."""
    return 2.0 * d / (check_epsilon(eps1, "eps1") * check_positive_int(n, "n"))


def private_sharpened_relevance(avg, eps1: float, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Sharpened map plus one Laplace draw per grid cell (``dpLRP_MNIST.py:87``). Returns (map, noise)."""
    s = sharpen(avg)
    noise = laplace(relevance_noise_scale(eps1, n), s.shape, make_rng(rng))
    return s + noise, noise


# ------------------------------------------------------------------------------------------------
# Step 3 -- budget ratios (AdLM.py:129-141, 80)
# ------------------------------------------------------------------------------------------------
def budget_ratios_on_grid(r, floor: float = R_LOWERBOUND) -> np.ndarray:
    """``β = G²·R/ΣR`` on the G×G grid with R and β floored (``AdLM.py:129-141``, infl = 1)."""
    r = np.maximum(np.asarray(r, np.float64), floor)  # AdLM.py:132-133
    beta = r.size * r / r.sum()  # AdLM.py:134, 139
    return np.maximum(beta, floor)  # AdLM.py:140-141


def inner_crop(beta_grid) -> np.ndarray:
    """The 28×28 ratios the input noise uses: ``_beta[i+2][j+2]`` (``AdLM.py:80``)."""
    b = np.asarray(beta_grid)
    return b[PAD:b.shape[0] - PAD, PAD:b.shape[1] - PAD]


# ------------------------------------------------------------------------------------------------
# Step 4 -- one shared noise map per step (AdLM.py:73-82, 161-163, 290)
# ------------------------------------------------------------------------------------------------
def input_noise_scales(beta, delta2: float, eps2: float, batch_size: int) -> np.ndarray:
    """Per-pixel Laplace scale ``Δ2/(β·ε2)/L`` (``AdLM.py:80``).

    With Δ2 = 9,800, ε2 = 0.075 and L = 1,800 this is 72.59/β.
    """
    beta = np.asarray(beta, np.float64)
    if np.any(~(beta > 0)):
        raise ValueError("budget ratios beta must all be > 0")
    return float(delta2) / (beta * check_epsilon(eps2, "eps2")) / check_batch_size(batch_size)


def draw_noise_map(scales: tf.Tensor, generator: tf.random.Generator) -> tf.Tensor:
    """One Laplace map of shape [1, H, W, 1], shared by the batch (``AdLM.py:76-80``, ``290``).

    ``generator`` is a :class:`tf.random.Generator`: its state advances on every call, so each
    training step gets a fresh map, also inside a ``tf.function``.
    """
    scales = tf.convert_to_tensor(scales, tf.float32)
    shape = tf.concat([[1], tf.shape(scales), [1]], axis=0)
    return tf_laplace(shape, 1.0, generator) * scales[None, ..., None]


def perturb_inputs(x, noise_map, clip: float = NOISY_INPUT_CLIP) -> tf.Tensor:
    """``clip(x + noise, −10, 10)``: the map broadcast over the batch (``AdLM.py:161-163``)."""
    return tf.clip_by_value(tf.cast(x, tf.float32) + noise_map, -clip, clip)


# Step 5 -- the network (AdLM.py:32-60, 155-199) is tfdpmech.mechanisms.adlm.networks.authors_mnist_network.


# ------------------------------------------------------------------------------------------------
# Step 6 -- loss (AdLM.py:92, 150, 186-187, 263-268)
# ------------------------------------------------------------------------------------------------
def loss_sensitivity_code(num_classes: int = 10, hidden_units: int = 25) -> float:
    """``Δ3 = M·(|h| + |h|²/4)`` (``AdLM.py:92``); 1,812.5 for M = 10, |h| = 25."""
    return float(num_classes * (hidden_units + hidden_units ** 2 / 4.0))


def draw_weight_noise(delta3: float, eps3: float, hidden_units: int, num_classes: int, rng) -> np.ndarray:
    """``N ~ Lap(Δ3/ε3)`` of shape [|h|, M], drawn **once** at graph build (``AdLM.py:150, 186``)."""
    return laplace(delta3 / check_epsilon(eps3, "eps3"), (hidden_units, num_classes), make_rng(rng))


def taylor_terms(z, y) -> tf.Tensor:
    """``log 2 + (½ − y)·z + z²/8`` per example and class.

    The code writes ``relu(z) − z·y + log 2 − ½|z| + z²/8`` (``AdLM.py:263-268``); the two are
    equal for every z.
    """
    z = tf.cast(z, tf.float32)
    return math.log(2.0) + (0.5 - tf.cast(y, tf.float32)) * z + 0.125 * tf.square(z)


def reference_loss(z, y, w_out, weight_noise, batch_size_l: int) -> tf.Tensor:
    """``Σ_{batch, classes} taylor − B·M·Σ(N/L ⊙ W_out)`` with clean labels (``AdLM.py:187, 268``).

    The code minimises the un-reduced [B, M] tensor ``taylor − Σ(N/L ⊙ W_out)``; TensorFlow
    differentiates its sum, so the scalar noise term counts B·M times.
    """
    terms = taylor_terms(z, y)
    count = tf.cast(tf.size(terms), tf.float32)
    noise_term = tf.reduce_sum(tf.cast(weight_noise, tf.float32) / float(batch_size_l) * w_out)
    return tf.reduce_sum(terms) - count * noise_term


def reference_optimizer(learning_rate: float = LEARNING_RATE) -> keras.optimizers.Optimizer:
    """Adam with learning rate 3e-4 and TF1's ε = 1e-8 (``AdLM.py:108, 272``); the decay is unused."""
    return keras.optimizers.Adam(learning_rate, epsilon=1e-8)


# ------------------------------------------------------------------------------------------------
# Step 7 -- batches (input_data.py:113-135)
# ------------------------------------------------------------------------------------------------
class BatchSampler:
    """Index arrays of exactly ``batch_size``, as ``DataSet.next_batch`` draws them (``input_data.py:120-135``):
    consecutive slices of a permutation, reshuffled when the next slice would run past the end (the rest of
    that pass is skipped).

    Its whole state is ``(permutation, position, rng.bit_generator.state)``: :meth:`state` returns it and
    :meth:`set_state` puts it back, so a run resumed at any step draws the batches an unbroken one would.
    """

    def __init__(self, n: int, batch_size: int, rng):
        self.n, self.batch_size = check_positive_int(n, "n"), check_batch_size(batch_size, n=n)
        self.rng = make_rng(rng)
        self.perm, self.pos = self.rng.permutation(self.n), 0

    def next(self) -> np.ndarray:
        if self.pos + self.batch_size > self.n:  # input_data.py:124-131: a finished pass reshuffles
            self.perm, self.pos = self.rng.permutation(self.n), 0
        idx = self.perm[self.pos:self.pos + self.batch_size]
        self.pos += self.batch_size
        return idx

    def state(self) -> dict:
        """``{"perm", "pos", "rng"}``: the permutation, the position in it and the generator's state."""
        return {"perm": self.perm.copy(), "pos": int(self.pos), "rng": self.rng.bit_generator.state}

    def set_state(self, state: dict) -> None:
        perm = np.asarray(state["perm"])
        if perm.shape != (self.n,):
            raise ValueError(f"the saved batch order covers {perm.shape[0]} records, this run has {self.n}")
        self.perm, self.pos = perm.astype(self.perm.dtype), int(state["pos"])
        self.rng.bit_generator.state = state["rng"]


def next_batch_indices(n: int, batch_size: int, steps: int, rng):
    """Yield ``steps`` index arrays of :class:`BatchSampler` (``input_data.py:120-135``)."""
    sampler = BatchSampler(n, batch_size, rng)
    for _ in range(steps):
        yield sampler.next()
