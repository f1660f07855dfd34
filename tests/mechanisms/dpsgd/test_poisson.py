"""Tests for tfdpmech.mechanisms.dpsgd.runs.poisson: Poisson batches, the proven ledger ε, masked rows, training,
bad input.

``engine="auto"`` (tensorflow-privacy on the TensorFlow 2.15 stack, tfdpmech's own engine on Keras 3); the
train-step tests run for every engine that imports. Everything is small (n <= 300, tiny MLPs).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dp_accounting
import keras
import tensorflow as tf
from scipy import stats

from tfdpmech import data
from tfdpmech.accounting.poisson_dpsgd import poisson_dpsgd_epsilon, poisson_dpsgd_noise_multiplier
from tfdpmech.accounting.ledger import PrivacyLedger
from tfdpmech.mechanisms.dpsgd import OptimizerSettings
from tfdpmech.mechanisms.dpsgd.clipping import resolve_clipping
from tfdpmech.mechanisms.dpsgd.runs.paths import tf_privacy_available
from tfdpmech.mechanisms.dpsgd.runs.poisson import (
    DPSGD,
    PoissonSampler,
    pad_batch,
    padded_batch_size,
    poisson_dataset,
    poisson_model_classes,
)
from tfdpmech.mechanisms.dpsgd.runs.train_step import install_dp_train_step

pytestmark = pytest.mark.dpsgd
ENGINES = ["tfdpmech"] + (["tensorflow_privacy"] if tf_privacy_available() else [])

N, DELTA = 300, 1e-3


@pytest.fixture(scope="module")
def mnist_small():
    splits = data.load("mnist_sample")
    return splits.x_train[:N], splits.y_train[:N]


def tiny_mlp(units=16, activation="tanh"):
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Flatten(),
        keras.layers.Dense(units, activation=activation),
        keras.layers.Dense(10),
    ], name="tiny_mlp")


def tiny_conv():
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(2, 3, strides=4, activation="tanh"),
        keras.layers.Flatten(),
        keras.layers.Dense(10),
    ], name="tiny_conv")


# --- sampling -------------------------------------------------------------------------------

def test_batch_sizes_follow_binomial():
    # 4000 independent draws with a fixed seed: deterministic, so it cannot flake; the thresholds
    # are generous for Poisson sampling and fail for any fixed-size or shuffled batching.
    n, q, steps = 200, 0.1, 4000
    sizes = PoissonSampler(n, q, seed=1234).masks(steps).sum(axis=1)
    mean, var = n * q, n * q * (1 - q)
    assert abs(sizes.mean() - mean) < 6 * math.sqrt(var / steps)
    assert 0.85 < sizes.var() / var < 1.15
    # Kolmogorov–Smirnov distance to the Binomial(n, q) CDF on its support
    support = np.arange(n + 1)
    empirical = np.searchsorted(np.sort(sizes), support, side="right") / steps
    assert np.max(np.abs(empirical - stats.binom.cdf(support, n, q))) < 0.05
    # chi-square over the central bins (expected count >= 20 each), p far from 0
    bins = support[stats.binom.pmf(support, n, q) * steps >= 20]
    observed = np.array([np.sum(sizes == k) for k in bins], dtype=float)
    expected = stats.binom.pmf(bins, n, q) * steps
    chi2 = np.sum((observed - expected) ** 2 / expected)
    assert stats.chi2.sf(chi2, len(bins) - 1) > 1e-4


def test_every_record_can_appear_in_any_step():
    n, q, steps = 50, 0.2, 2000
    masks = PoissonSampler(n, q, seed=7).masks(steps)
    # every record appears, at about rate q (per-record count ~ Binomial(steps, q))
    counts = masks.sum(axis=0)
    assert counts.min() > 0
    assert np.all(np.abs(counts - steps * q) < 6 * math.sqrt(steps * q * (1 - q)))
    # no epoch structure: a record drawn at step t can be drawn again at t+1, and an "epoch"
    # of 1/q steps holds a record 0, 1 or several times (shuffled batching holds it exactly once)
    assert np.any(masks[:-1] & masks[1:], axis=0).all()
    per_epoch = masks[: (steps // 5) * 5].reshape(-1, 5, n).sum(axis=1)
    assert {0, 1, 2} <= set(np.unique(per_epoch).tolist())
    # an empty batch is possible and is kept (n=3, q=0.2: P(empty) = 0.512)
    sizes = PoissonSampler(3, 0.2, seed=0).masks(200).sum(axis=1)
    assert np.sum(sizes == 0) > 50


def test_same_seed_same_batches_and_q_one_takes_everything():
    a = [PoissonSampler(100, 0.3, seed=5).sample() for _ in range(2)]
    np.testing.assert_array_equal(a[0], a[1])
    assert len(PoissonSampler(40, 1.0, seed=0).sample()) == 40


def test_pad_batch_never_drops_a_record():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.eye(10, dtype=np.float32)
    xb, yb, mask = pad_batch(x, y, np.array([1, 4, 7]), 4)
    assert xb.shape == (4, 2) and mask.tolist() == [1, 1, 1, 0]
    np.testing.assert_array_equal(xb[:3], x[[1, 4, 7]])
    assert not xb[3].any() and not yb[3].any()
    xb, _, mask = pad_batch(x, y, np.arange(9), 4)  # larger than the padded shape: next multiple, not cut
    assert xb.shape == (12, 2) and mask.sum() == 9
    _, _, mask = pad_batch(x, y, np.array([], dtype=int), 4)  # empty batch: all padding
    assert mask.shape == (4,) and mask.sum() == 0


def test_padded_batch_size_covers_the_binomial_tail():
    size = padded_batch_size(7000, 1000 / 7000)
    assert size % 8 == 0
    assert stats.binom.sf(size, 7000, 1000 / 7000) < 1e-8
    assert padded_batch_size(10, 1.0) == 10


def test_dataset_yields_padded_poisson_batches_of_real_records():
    n, q = 60, 0.25
    x = np.random.default_rng(0).random((n, 3)).astype(np.float32)
    y = np.eye(4, dtype=np.float32)[np.arange(n) % 4]
    ds = poisson_dataset(x, y, q, 200, seed=3)
    sizes = []
    for xb, yb, mask in ds.as_numpy_iterator():
        real = mask.astype(bool)
        sizes.append(int(real.sum()))
        assert xb.shape[0] == padded_batch_size(n, q)
        assert not xb[~real].any()
        # every real row is one of the records, with its own label
        idx = [int(np.flatnonzero((x == row).all(axis=1))[0]) for row in xb[real]]
        np.testing.assert_array_equal(yb[real], y[idx])
        assert len(set(idx)) == len(idx)
    sizes = np.array(sizes)
    assert abs(sizes.mean() - n * q) < 6 * math.sqrt(n * q * (1 - q) / len(sizes))
    assert sizes.std() > 1  # sizes vary
    assert ds.options().autotune.enabled is False  # fixed buffers: no tuning thread for a fit's end to wait on


# --- accounting -----------------------------------------------------------------------------

def _independent_poisson_epsilon(sigma, q, steps, delta, accountant):
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    acc = (dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-3) if accountant == "pld"
           else dp_accounting.rdp.RdpAccountant())
    return acc.compose(event).get_epsilon(delta)


def _independent_epsilon_of_event(event, delta, accountant):
    acc = (dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-3) if accountant == "pld"
           else dp_accounting.rdp.RdpAccountant())
    return acc.compose(event).get_epsilon(delta)


def test_two_runs_in_one_ledger_compose_below_the_sum():
    ledger = PrivacyLedger()
    for seed in (0, 1):
        DPSGD(1.0, DELTA, expected_batch_size=60, epochs=3, n=N, accountant="rdp", seed=seed,
                     ledger=ledger).compile(tiny_mlp())
    total = ledger.provable()
    assert total.epsilon < 2.0  # composed by dp_accounting, not added
    event = dp_accounting.SelfComposedDpEvent(ledger.releases[0].event, 2)
    assert total.epsilon <= _independent_epsilon_of_event(event, total.delta, "rdp") * (1 + 1e-9)


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_ledger_proven_epsilon_is_dp_accountings_poisson_epsilon(accountant):
    dp = DPSGD(1.0, DELTA, expected_batch_size=60, epochs=3, n=N, accountant=accountant, seed=0)
    dp.compile(tiny_mlp())
    release = dp.ledger.releases[0]
    assert release.guarantee == "proven"
    q, steps = 60 / N, 3 * 5
    assert (dp.sampling_probability, dp.steps) == (q, steps)
    expected = _independent_poisson_epsilon(dp.noise_multiplier, q, steps, DELTA, accountant)
    assert release.epsilon_provable == pytest.approx(expected, rel=1e-9)
    assert release.epsilon_claimed == release.epsilon_provable
    assert dp.ledger.epsilon_provable() <= 1.0
    assert release.epsilon_provable == pytest.approx(1.0, rel=2e-3)  # σ is (near) the smallest that meets ε
    assert release.details["sampling"] == "poisson"
    # the release carries the run's dp_accounting event: the same ε when composed alone
    assert _independent_epsilon_of_event(release.event, DELTA, accountant) == pytest.approx(expected, rel=1e-9)
    assert _independent_poisson_epsilon(dp.noise_multiplier * 0.99, q, steps, DELTA, accountant) > 1.0


def test_pld_is_tighter_than_rdp_and_both_certify():
    q, steps = 0.1, 100
    s_pld = poisson_dpsgd_noise_multiplier(1.0, 1e-5, q=q, steps=steps, accountant="pld")
    s_rdp = poisson_dpsgd_noise_multiplier(1.0, 1e-5, q=q, steps=steps, accountant="rdp")
    assert s_pld < s_rdp
    assert poisson_dpsgd_epsilon(s_pld, 1e-5, q=q, steps=steps, accountant="pld") <= 1.0
    assert poisson_dpsgd_epsilon(s_rdp, 1e-5, q=q, steps=steps, accountant="rdp") <= 1.0


def test_noise_multiplier_given_records_its_epsilon():
    dp = DPSGD(None, DELTA, expected_batch_size=30, epochs=2, n=N, noise_multiplier=2.0, accountant="rdp")
    expected = _independent_poisson_epsilon(2.0, 0.1, 20, DELTA, "rdp")
    assert dp.epsilon_achieved == pytest.approx(expected, rel=1e-12)


# --- the train step ---------------------------------------------------------------------------

def _raw_model(engine, path, cls_index, *, expected_batch_size, clip=0.5, noise_multiplier=0.0, units=8):
    """One engine's Poisson train step on a tiny MLP (Sequential for cls_index 0, functional for 1)."""
    keras.utils.set_random_seed(0)
    base = tiny_mlp(units)
    loss = keras.losses.CategoricalCrossentropy(from_logits=True)
    if engine == "tfdpmech":
        model = base if cls_index == 0 else keras.Model(base.inputs, base.outputs)
        assert resolve_clipping(model, path) == path
        model.compile(keras.optimizers.SGD(1.0), loss=loss)
        return install_dp_train_step(model, loss=loss, l2_norm_clip=clip, noise_multiplier=noise_multiplier,
                                     divisor=expected_batch_size, clipping=path, noise_seed=1, require_mask=True)
    sequential_cls, model_cls = poisson_model_classes()
    from tensorflow_privacy.privacy.fast_gradient_clipping import layer_registry as lr
    registry = lr.make_default_layer_registry() if path == "fast_clipping" else None
    kwargs = dict(l2_norm_clip=clip, noise_multiplier=noise_multiplier, num_microbatches=None, use_xla=False,
                  layer_registry=registry, expected_batch_size=expected_batch_size, noise_seed=1)
    if cls_index == 0:
        model = sequential_cls(layers=[keras.Input(batch_shape=base.input_shape)] + list(base.layers), **kwargs)
    else:
        model = model_cls(inputs=base.inputs, outputs=base.outputs, **kwargs)
    assert model._enable_fast_peg_computation == (path == "fast_clipping")  # pylint: disable=protected-access
    model.compile(keras.optimizers.SGD(1.0), loss=loss)
    return model


def _step(model, x, y, mask):
    before = [v.numpy().copy() for v in model.trainable_variables]
    model.train_step((tf.constant(x), tf.constant(y), tf.constant(mask)))
    after = [v.numpy() for v in model.trainable_variables]
    for v, b in zip(model.trainable_variables, before):  # restore for the next comparison
        v.assign(b)
    return [b - a for a, b in zip(after, before)]  # = lr · noisy mean gradient


def _manual_clipped_mean(model, x, y, clip, divisor):
    loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True)
    total = [np.zeros(v.shape, np.float64) for v in model.trainable_variables]
    for i in range(len(x)):
        with tf.GradientTape() as tape:
            loss = loss_fn(y[i:i + 1], model(x[i:i + 1], training=True))
        grads = [g.numpy().astype(np.float64) for g in tape.gradient(loss, model.trainable_variables)]
        norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
        factor = min(1.0, clip / norm) if norm > 0 else 1.0
        total = [t + g * factor for t, g in zip(total, grads)]
    return [t / divisor for t in total]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("path,cls_index", [("fast_clipping", 0), ("fast_clipping", 1), ("vectorized", 0)])
def test_masked_rows_contribute_exactly_zero(engine, path, cls_index, mnist_small):
    x, y = mnist_small
    model = _raw_model(engine, path, cls_index, expected_batch_size=10.0)
    rng = np.random.default_rng(0)
    garbage_x = (rng.random((6,) + x.shape[1:]) * 50).astype(np.float32)  # far outside the data: huge gradients
    garbage_y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 6)]
    # all rows masked: no update at all (σ = 0), exactly
    deltas = _step(model, garbage_x, garbage_y, np.zeros(6, np.float32))
    assert all(not d.any() for d in deltas)
    # real rows + masked garbage == real rows alone == (1/L) Σ clip(g_i), L the expected batch size
    real_x, real_y = x[:5], y[:5]
    with_padding = _step(model, np.concatenate([real_x, garbage_x]), np.concatenate([real_y, garbage_y]),
                         np.array([1] * 5 + [0] * 6, np.float32))
    alone = _step(model, real_x, real_y, np.ones(5, np.float32))
    manual = _manual_clipped_mean(model, real_x, real_y, 0.5, 10.0)
    for a, b, m in zip(with_padding, alone, manual):
        np.testing.assert_allclose(a, b, atol=1e-6)
        np.testing.assert_allclose(a, m, atol=1e-5)


@pytest.mark.parametrize("engine", ENGINES)
def test_noise_is_added_with_std_sigma_c_over_expected_batch(engine, mnist_small):
    x, y = mnist_small
    model = _raw_model(engine, "vectorized", 0, expected_batch_size=20.0, noise_multiplier=3.0)
    deltas = _step(model, x[:4], y[:4], np.zeros(4, np.float32))  # empty batch: pure noise
    flat = np.concatenate([d.ravel() for d in deltas])
    assert flat.std() == pytest.approx(3.0 * 0.5 / 20.0, rel=0.05)  # 8·784 + ... ≈ 6400 draws
    assert abs(flat.mean()) < 4 * flat.std() / math.sqrt(flat.size)


# --- training end to end ----------------------------------------------------------------------

def test_tiny_fit_runs_the_accounted_steps_and_stops_there(mnist_small):
    x, y = mnist_small
    keras.utils.set_random_seed(0)
    ledger = PrivacyLedger()
    dp = DPSGD(4.0, DELTA, expected_batch_size=50, epochs=2, n=N,
                      optimizer=OptimizerSettings(learning_rate=3e-3), seed=0, accountant="rdp", ledger=ledger)
    model = dp.compile(tiny_mlp())
    assert dp.path == "fast_clipping"
    history = model.fit(dp.dataset(x, y), epochs=dp.epochs, verbose=0, callbacks=[dp.callback(verbose=0)])
    assert int(model.optimizer.iterations.numpy()) == dp.steps == 12
    assert np.isfinite(history.history["loss"]).all()
    assert history.history["dpsgd_epsilon_spent"][-1] == pytest.approx(dp.epsilon_achieved, rel=1e-9)
    # the ledger composes the release's event with dp_accounting and keeps the smallest valid bound:
    # never above the calibrated ε (here RDP-calibrated, so PLD finds a smaller one)
    assert ledger.epsilon_provable() <= dp.epsilon_achieved <= 4.0
    with pytest.raises(tf.errors.InvalidArgumentError, match="budget spent"):
        model.fit(dp.dataset(x, y), epochs=1, verbose=0)


def test_vectorized_path_trains(mnist_small):
    x, y = mnist_small
    dp = DPSGD(4.0, DELTA, expected_batch_size=100, epochs=1, n=N, path="vectorized", accountant="rdp",
                      seed=0)
    model = dp.compile(tiny_mlp(8))
    assert dp.path == "vectorized" and dp.release.details["path"] == "vectorized"
    if dp.engine == "tensorflow_privacy":
        assert not model._enable_fast_peg_computation  # pylint: disable=protected-access
    model.fit(dp.dataset(x, y), epochs=1, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == dp.steps == 3
    auto = DPSGD(4.0, DELTA, expected_batch_size=100, epochs=1, n=N, accountant="rdp")
    auto.compile(tiny_conv())
    # auto on a Conv2D net: tensorflow-privacy 0.9.0's registry has no Conv2D (per-example gradients),
    # tfdpmech has ghost norms for it
    assert auto.path == ("vectorized" if auto.engine == "tensorflow_privacy" else "fast_clipping")


# --- bad input (all before any training) ------------------------------------------------------

@pytest.mark.parametrize("q", [0.0, -0.1, 1.5, float("nan")])
def test_q_outside_unit_interval(q):
    with pytest.raises(ValueError, match=r"sampling_probability must lie in \(0, 1\]"):
        DPSGD(1.0, DELTA, sampling_probability=q, epochs=1, n=N)
    with pytest.raises(ValueError, match=r"q must lie in \(0, 1\]"):
        poisson_dpsgd_epsilon(1.0, DELTA, q=q, steps=10)


def test_expected_batch_larger_than_n():
    with pytest.raises(ValueError, match=r"expected_batch_size=301 exceeds .* n=300.*expected_batch_size <= 300"):
        DPSGD(1.0, DELTA, expected_batch_size=301, epochs=1, n=N)


def test_batch_size_and_q_together_or_neither():
    with pytest.raises(ValueError, match="exactly one of expected_batch_size"):
        DPSGD(1.0, DELTA, expected_batch_size=30, sampling_probability=0.1, epochs=1, n=N)
    with pytest.raises(ValueError, match="exactly one of expected_batch_size"):
        DPSGD(1.0, DELTA, epochs=1, n=N)
    with pytest.raises(ValueError, match="exactly one of epsilon"):
        DPSGD(None, DELTA, expected_batch_size=30, epochs=1, n=N)


def test_uncertifiable_epsilon():
    # q = 1, 50 steps, δ = 1e-10: even σ = SIGMA_MAX gives ε ≈ 0.005 > 0.001
    with pytest.raises(ValueError, match=r"epsilon=0.001 cannot be certified at delta=1e-10 .*raise epsilon or "
                                         r"delta, or train fewer steps"):
        DPSGD(1e-3, 1e-10, sampling_probability=1.0, epochs=50, n=N, accountant="rdp")


def test_models_the_poisson_path_cannot_train():
    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__()
            self.flat = keras.layers.Flatten()
            self.dense = keras.layers.Dense(10)

        def call(self, x):
            return self.dense(self.flat(x))

    sub = Subclassed()
    sub(np.zeros((1, 28, 28, 1), np.float32))  # builds its weights on Keras 2 and 3 alike
    with pytest.raises(ValueError, match="path='microbatch'.*cannot run Poisson"):
        DPSGD(1.0, DELTA, expected_batch_size=30, epochs=1, n=N, path="microbatch")
    if DPSGD(1.0, DELTA, expected_batch_size=30, epochs=1, n=N).engine == "tensorflow_privacy":
        # tensorflow-privacy rebuilds the model as a DPSequential / DPModel: a subclassed model cannot be,
        # and its registry has no Conv2D
        with pytest.raises(ValueError, match="Sequential or functional model.*rebuild it"):
            DPSGD(1.0, DELTA, expected_batch_size=30, epochs=1, n=N).compile(sub)
        with pytest.raises(ValueError, match="path='fast_clipping' cannot train"):
            DPSGD(1.0, DELTA, expected_batch_size=30, epochs=1, n=N, path="fast_clipping").compile(tiny_conv())
    else:  # tfdpmech's engine trains the model itself (a subclassed one too); a layer without ghost norms is refused
        dp = DPSGD(1.0, DELTA, expected_batch_size=30, epochs=1, n=N)
        assert dp.compile(sub) is sub and dp.path == "fast_clipping"
        random = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Reshape((28, 28)),
                                   keras.layers.GRU(4, dropout=0.5), keras.layers.Dense(10)])
        dp = DPSGD(1.0, DELTA, expected_batch_size=30, epochs=1, n=N, path="fast_clipping")
        with pytest.raises(ValueError, match=r"path='fast_clipping' \(ghost norms\).*GRU"):
            dp.compile(random)
        assert not dp.ledger.releases
    batch_mixing = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                                     keras.layers.BatchNormalization(), keras.layers.Dense(10)])
    with pytest.raises(ValueError, match="mixes the examples of a batch"):
        DPSGD(1.0, DELTA, expected_batch_size=30, epochs=1, n=N).compile(batch_mixing)


def test_dataset_of_the_wrong_size(mnist_small):
    x, y = mnist_small
    dp = DPSGD(1.0, DELTA, expected_batch_size=30, epochs=1, n=N)
    with pytest.raises(ValueError, match="calibrated for n=300"):
        dp.dataset(x[:100], y[:100])
