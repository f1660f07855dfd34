"""pCDBN reference mode: the authors' code path step by step."""

import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.pcdbn import reference as pr
from tfdpmech.mechanisms.pcdbn import reference_steps as steps


def tiny(n=24, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 28, 28, 1)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, n)]
    return x, y


def test_chebyshev7_is_the_codes_polynomial():
    x = np.linspace(-1, 1, 11)
    expect = (-5 * x**7 + 21 * x**5 - 35 * x**3 + 35 * x + 16) / 32
    np.testing.assert_allclose(steps.chebyshev7(x).numpy(), expect, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(steps.dp_chebyshev(x, np.zeros(5), 800.0).numpy(), expect, rtol=1e-5, atol=1e-6)


def test_chebyshev7_gradient_is_finite_at_zero():
    # Blank MNIST borders under a zero bias give pre-activations of exactly 0; pow(x, 0)'s gradient
    # there is NaN on TF >= 2.16, which made every pre-training cost NaN under Keras 3.
    x = tf.constant([0.0, 0.5, -0.5])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(steps.dp_chebyshev(x, np.full(5, 1e-3), 800.0))
    grad = tape.gradient(y, x).numpy()
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad[0], (35 + 800.0 * 1e-3) / 32, rtol=1e-5)


def test_coefficient_noise_scaled_by_batch_delta():
    x = np.array([0.3])
    noise = np.array([1.0, 0, 0, 0, 0])
    got = steps.dp_chebyshev(x, noise, 2.0).numpy()
    expect = ((-5 + 2.0) * 0.3**7 + 21 * 0.3**5 - 35 * 0.3**3 + 35 * 0.3 + 16) / 32
    assert got[0] == pytest.approx(expect, rel=1e-5)
    draws = steps.draw_coefficient_noise(0.5, 100, np.random.default_rng(0))
    assert draws.shape == (5,)


def test_batch_delta_follows_get_delta():
    x, _ = tiny(4)
    d = float(steps.batch_delta(tf.constant(x), (5, 5, 1, 32)))
    ones = tf.ones((5, 5, 1, 32))
    a = tf.nn.conv2d(x, ones, 2, "SAME") + 1.0
    h = np.clip(steps.chebyshev7(a / tf.reduce_max(a)).numpy(), 0, 1)
    expect = 2 * np.abs(h.sum(axis=(1, 2))).max() + 2 * np.abs(x.sum(axis=(1, 2))).max()
    assert d == pytest.approx(expect, rel=1e-5)


def test_output_noise_scale():
    assert steps.output_noise_scale(0.2, 3600) == pytest.approx(1812.5 / 720)
    assert steps.output_noise_scale(0.5, 3600) == pytest.approx(1.00694, rel=1e-4)


def test_feature_noise_shared_by_the_batch_and_redrawn():
    gen = tf.random.Generator.from_seed(0)
    a, b = steps.draw_feature_noise(1.0, 25, gen), steps.draw_feature_noise(1.0, 25, gen)
    assert a.shape == (25,) and not np.allclose(a, b)


def test_decode_shape_and_range():
    h = tf.random.uniform((2, 14, 14, 32))
    k = tf.random.normal((5, 5, 1, 32))
    v = steps.decode(h, k, (28, 28)).numpy()
    assert v.shape == (2, 28, 28, 1) and v.min() >= 0 and v.max() <= 1


def test_reference_run_trains_only_the_head_after_pretraining_and_claims_only():
    x, y = tiny(24)
    ref = pr.PCDBNReference(0.5, batch_size=12, maps=(4, 8), pretrain_epochs=1, seed=0)
    seen = {}

    orig = ref._finetune

    def spy(*args, **kwargs):
        seen["enc"] = [e.kernel.numpy().copy() for e in ref._encoders()]
        return orig(*args, **kwargs)

    ref._finetune = spy
    hist = ref.fit(x, y, epochs=3, x_test=x, y_test=y, eval_every=1)
    for before, enc in zip(seen["enc"], ref._encoders()):
        np.testing.assert_array_equal(before, enc.kernel.numpy())  # conv layers frozen in fine-tuning
    assert hist["epoch"] == [0, 1, 2, 3] and hist["step"][-1] == 6 and not hist["diverged"]
    assert ref.ledger.epsilon_claimed() == 0.5 and ref.ledger.epsilon_provable() is None
    rel = ref.ledger.releases[0]
    assert "labels used without noise" in rel.basis and rel.details["output_noise_scale"] == pytest.approx(
        1812.5 / (0.5 * 12))
    # no noise at test, batch statistics: deterministic on the same batch, batch-dependent otherwise
    a, b = ref.predict_logits(x), ref.predict_logits(x)
    np.testing.assert_array_equal(a, b)
    c = ref.predict_logits(np.concatenate([x[:12], np.zeros_like(x[12:])]))
    assert not np.allclose(a[0], c[0])
    with pytest.raises(ValueError, match="spent"):
        ref.fit(x, y, epochs=1)


def test_bad_input_refused():
    x, y = tiny(8)
    ref = pr.PCDBNReference(0.5, batch_size=4, maps=(2, 2), pretrain_epochs=1)
    with pytest.raises(ValueError, match="x"):
        ref.fit(x * 3, y, epochs=1)
    assert len(ref.ledger) == 0
    with pytest.raises(ValueError):
        pr.PCDBNReference(0.0)
