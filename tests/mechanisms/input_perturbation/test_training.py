"""The DP-ERM training recipe: Keras objective = numpy objective, projection, the T-step budget callback."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.input_perturbation import InputPerturbation, erm_objective
from tfdpmech.mechanisms.input_perturbation.models import L2BallConstraint, linear_model

from .helpers import synthetic


# --- Keras equivalence ---------------------------------------------------------------------------------
@pytest.mark.parametrize("num_classes", [2, 3])
def test_keras_objective_matches_numpy(num_classes):
    lam = 0.05
    rng = np.random.default_rng(4)
    x, y = synthetic(200, 6, seed=4)
    if num_classes == 3:
        y = rng.integers(0, 3, size=200)
    model = linear_model(6, num_classes, l2=lam)
    loss_fn = (keras.losses.BinaryCrossentropy(from_logits=True) if num_classes == 2
               else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    kernel = model.layers[-1].kernel
    xt = tf.constant(x, tf.float32)
    yt = tf.constant(y.reshape(-1, 1) if num_classes == 2 else y, tf.float32)
    for _ in range(3):
        theta = rng.normal(size=tuple(kernel.shape)) * 0.7
        kernel.assign(theta.astype(np.float32))
        with tf.GradientTape() as tape:
            value = loss_fn(yt, model(xt)) + tf.add_n(model.losses)
        grad = tape.gradient(value, kernel).numpy()
        ref, ref_grad = erm_objective(kernel.numpy(), x.astype(np.float32), y, lam, num_classes, return_grad=True)
        assert float(value) == pytest.approx(ref, abs=1e-6)
        np.testing.assert_allclose(grad, ref_grad, atol=1e-6)


# --- projection -------------------------------------------------------------------------------------------
def test_projection_after_every_step():
    x, y = synthetic(80, 4, scale=30.0)
    constraint = L2BallConstraint(0.3)
    w = tf.constant([[3.0], [4.0]])
    assert float(tf.norm(constraint(w))) == pytest.approx(0.3, rel=1e-6)
    assert np.array_equal(constraint(w * 0.01).numpy(), (w * 0.01).numpy())
    assert L2BallConstraint.from_config(constraint.get_config()).radius == 0.3
    with pytest.raises(ValueError, match="radius"):
        L2BallConstraint(0)

    ip = InputPerturbation(1.0, 1e-3, 6, l2=20.0, seed=0, mode="reference")  # D = sqrt(2 ln2 / 20) = 0.263
    xn, yn = ip.perturb(x, y)
    model = ip.make_linear_model()
    norms = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            norms.append(float(np.linalg.norm(model.layers[-1].kernel.numpy())))

    ip.fit(model, xn, yn, learning_rate=50.0, callbacks=[Record()])
    D = ip.constants.theta_bound
    assert len(norms) == 6 and max(norms) <= D * (1 + 1e-6) and max(norms) > 0.99 * D  # active


# --- callback --------------------------------------------------------------------------------------------
def test_callback_stops_at_T_and_logs_epsilon():
    x, y = synthetic(100, 4)
    T = 4
    ip = InputPerturbation(0.3, 1e-4, T, seed=0, mode="reference")
    xn, yn = ip.perturb(x, y)
    model = ip.make_linear_model()
    history = ip.fit(model, xn, yn, epochs=T + 5)
    eps = history.history["ip_epsilon"]
    assert len(eps) == T and ip.steps_taken == T
    assert eps[-1] <= 0.3 and eps[-1] == pytest.approx(0.3, rel=1e-4)
    assert all(a < b for a, b in zip(eps, eps[1:]))
    assert history.history["epsilon_claimed"][-1] == 0.3 and math.isnan(history.history["epsilon_provable"][-1])
    with pytest.raises(RuntimeError, match="T=4"):  # a further fit would take step T+1
        model.fit(xn, yn, batch_size=len(xn), epochs=1, verbose=0, callbacks=[ip.callback()])
    with pytest.raises(ValueError, match="fingerprint"):
        ip.fit(ip.make_linear_model(), xn + 1.0, yn)


def test_callback_warns_for_non_sgd_and_requires_perturbation():
    x, y = synthetic(40, 3)
    ip = InputPerturbation(0.3, 1e-3, 2, seed=0, mode="reference")
    with pytest.raises(RuntimeError, match="perturb"):
        ip.fit(linear_model(3), x, y)
    xn, yn = ip.perturb(x, y)
    model = ip.make_linear_model()
    model.compile(keras.optimizers.Adam(0.1), loss=keras.losses.BinaryCrossentropy(from_logits=True))
    with pytest.warns(UserWarning, match="not plain SGD"):
        ip.fit(model, xn, yn)
