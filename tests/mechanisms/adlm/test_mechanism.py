"""AdLM / ILM mechanism: the ledger against hand calculations, noise modes, frozen noise, bad input."""

import gc
import math
import weakref

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfdpmech
from tfdpmech import AdLM, ILM, models
from tfdpmech.mechanisms.adlm import provable_epsilon_per_record


N, L = 240, 40


@pytest.fixture(scope="module")
def sample(mnist_sample):
    ds = mnist_sample
    return ds.x_train[:N], ds.y_train[:N], ds.x_train[N : N + 200], ds.y_train[N : N + 200]


@pytest.fixture(scope="module")
def relevance_model(sample):
    _, _, x_pub, y_pub = sample
    keras.utils.set_random_seed(1)
    model = models.mlp(first_units=16, hidden_units=8)
    model.compile("adam", loss=tfdpmech.TaylorCrossEntropy())
    model.fit(x_pub, y_pub, epochs=1, batch_size=50, verbose=0)
    return model


def small_model(**kwargs):
    return models.mlp(first_units=16, hidden_units=8, **kwargs)


def fitted_adlm(sample, relevance_model, **kwargs):
    x, y, _, _ = sample
    adlm = AdLM(0.1, 0.1, 0.2, L, seed=0, **kwargs)
    adlm.fit_relevance(relevance_model, x, y)
    return adlm


def test_ledger_matches_hand_calculation(sample, relevance_model):
    x, y, _, _ = sample
    adlm = fitted_adlm(sample, relevance_model)
    model = small_model()
    adlm.perturb(x, y, model)
    s = adlm.sensitivities
    assert s["delta_h0"] == 2 * 16 * 784  # reference_code on a Dense layer = 2·units·d
    assert s["delta_F"] == 10 * (8 + 64 / 4)
    expected = provable_epsilon_per_record(eps1=0.1, eps2=0.1, eps3=0.2, batch_size=L, d=784,
                                           delta_h0=s["delta_h0"], delta_f=s["delta_F"])
    assert adlm.ledger.epsilon_provable() == pytest.approx(expected, rel=1e-9)
    assert adlm.ledger.epsilon_claimed() == pytest.approx(0.4)
    assert [r.guarantee for r in adlm.ledger.releases] == ["proven"] * 3


def test_shared_modes_are_claimed_only(sample, relevance_model):
    x, y, _, _ = sample
    for mode in ("shared_frozen", "shared_per_step"):
        adlm = fitted_adlm(sample, relevance_model, noise_mode=mode)
        adlm.perturb(x, y, small_model(input_noise=mode == "shared_per_step"))
        assert adlm.ledger.epsilon_provable(epochs=3) is None
        assert adlm.ledger.is_reproduction
        assert "none proven" in adlm.ledger.summary(epochs=3)
    # per-step redraws compose over epochs under the paper's own lemmas (Lemmas 3–6 bound one batch)
    assert adlm.ledger.epsilon_claimed(epochs=3) == pytest.approx(0.1 + 3 * 0.1 + 0.2)


def test_relevance_model_trained_on_private_data_is_claimed(sample, relevance_model):
    x, y, _, _ = sample
    adlm = AdLM(0.1, 0.1, 0.2, L, seed=0)
    adlm.fit_relevance(relevance_model, x, y, trained_on_private_data=True)
    adlm.perturb(x, y, small_model())
    assert adlm.ledger.releases[0].guarantee == "claimed"
    assert adlm.ledger.epsilon_provable() is None


# --- noise: scales, modes, freezing -------------------------------------------------------
def test_feature_noise_scales_follow_beta(sample, relevance_model):
    x, y, _, _ = sample
    adlm = fitted_adlm(sample, relevance_model)
    data = adlm.perturb(x, y, small_model())
    beta = adlm.allocation().ratios((28, 28, 1))
    assert beta.sum() == pytest.approx(784)
    scales = adlm.sensitivities["delta_h0"] / (L * beta * 0.1)
    noise = (data.x_bar - x).reshape(N, -1) / scales.reshape(1, -1)
    # standardised Laplace(1): mean |.| = 1 over 240·784 draws
    assert np.mean(np.abs(noise)) == pytest.approx(1.0, rel=0.02)


def test_ilm_uses_identical_scales(sample):
    x, y, _, _ = sample
    ilm = ILM(0.1, 0.2, L, seed=0)
    data = ilm.perturb(x, y, small_model())
    scale = ilm.sensitivities["delta_h0"] / (L * 0.1)
    noise = (data.x_bar - x).reshape(-1) / scale
    assert np.mean(np.abs(noise)) == pytest.approx(1.0, rel=0.02)
    # ε1 unspent: ILM needs no relevance, and the paper does not say how ILM's budget is split
    assert ilm.ledger.epsilon_claimed() == pytest.approx(0.3)
    with pytest.raises(ValueError, match="no relevance"):
        ilm.fit_relevance(None, x, y)


def test_noise_modes_shapes(sample):
    x, y, _, _ = sample
    data = ILM(0.1, 0.2, L, seed=0, noise_mode="shared_frozen").perturb(x, y, small_model())
    offsets = data.x_bar - x
    np.testing.assert_allclose(offsets[0], offsets[1], rtol=1e-5, atol=1e-3)  # one draw shared by all
    phi_noise = data.phi_bar[..., 1] - (0.5 - y)
    np.testing.assert_allclose(phi_noise[0], phi_noise[5], atol=1e-4)
    data = ILM(0.1, 0.2, L, seed=0).perturb(x, y, small_model())
    assert not np.allclose(data.x_bar[0] - x[0], data.x_bar[1] - x[1])  # per record
    model = small_model(input_noise=True)
    data = ILM(0.1, 0.2, L, seed=0, noise_mode="shared_per_step").perturb(x, y, model)
    np.testing.assert_array_equal(data.x_bar, x)  # noise is drawn inside the model, per step
    noise_layer = model.get_layer("input_noise")
    assert float(tf.reduce_min(noise_layer.scales)) > 0


def test_only_order_one_perturbed_by_default(sample):
    x, y, _, _ = sample
    data = ILM(0.1, 0.2, L, seed=0).perturb(x, y, small_model())
    np.testing.assert_allclose(data.phi_bar[..., 0], math.log(2), rtol=1e-6)
    np.testing.assert_allclose(data.phi_bar[..., 2], 0.125)
    assert np.std(data.phi_bar[..., 1] - (0.5 - y)) > 1.0
    literal = ILM(0.1, 0.2, L, seed=0, perturb_orders=(0, 1, 2)).perturb(x, y, small_model())
    assert literal.phi_bar[..., 2].min() >= 1e-3 - 1e-9  # clamped: loss stays bounded below
    assert np.std(literal.phi_bar[..., 0]) > 1.0


def test_seeded_perturbation_is_reproducible(sample):
    x, y, _, _ = sample
    a = ILM(0.1, 0.2, L, seed=3).perturb(x, y, small_model())
    b = ILM(0.1, 0.2, L, seed=3).perturb(x, y, small_model())
    c = ILM(0.1, 0.2, L, seed=4).perturb(x, y, small_model())
    assert a.fingerprint == b.fingerprint != c.fingerprint
    np.testing.assert_array_equal(a.x_bar, b.x_bar)


def test_bias_noise(sample):
    x, y, _, _ = sample
    model = small_model()
    ilm = ILM(0.1, 0.2, L, seed=0)
    ilm.perturb(x, y, model)
    b_bar = model.get_layer("private_bias").b_bar.numpy()
    assert np.std(b_bar) > 0 and not np.allclose(b_bar, 1.0)
    model = small_model()
    ILM(0.1, 0.2, L, seed=0, bias_noise=False).perturb(x, y, model)
    np.testing.assert_array_equal(model.get_layer("private_bias").b_bar.numpy(), 1.0)


def test_perturb_keeps_no_reference_to_raw_data(sample):
    x, y, _, _ = sample
    x_raw, y_raw = x.copy(), y.copy()
    refs = [weakref.ref(x_raw), weakref.ref(y_raw)]
    ilm = ILM(0.1, 0.2, L, seed=0)
    data = ilm.perturb(x_raw, y_raw, small_model())
    del x_raw, y_raw
    gc.collect()
    assert all(r() is None for r in refs)
    assert data.n == N


# --- training through Keras: frozen noise, guards, saving ----------------------------------
def test_fit_logs_both_epsilons_and_noise_stays_frozen(sample, relevance_model, tmp_path):
    x, y, x_test, y_test = sample
    adlm = fitted_adlm(sample, relevance_model)
    model = small_model()
    data = adlm.perturb(x, y, model)
    b_bar = model.get_layer("private_bias").b_bar.numpy().copy()
    x_bar = data.x_bar.copy()
    model.compile(keras.optimizers.Adam(1e-3), loss=adlm.loss(), metrics=[tfdpmech.taylor_accuracy])
    history = model.fit(data.to_dataset(seed=0), epochs=2, verbose=0, callbacks=[adlm.callback(model, verbose=0)])
    assert history.history["epsilon_claimed"] == pytest.approx([0.4, 0.4])
    assert history.history["epsilon_provable"] == pytest.approx([adlm.ledger.epsilon_provable()] * 2)
    np.testing.assert_array_equal(model.get_layer("private_bias").b_bar.numpy(), b_bar)
    np.testing.assert_array_equal(data.x_bar, x_bar)
    # saving and loading gives identical predictions
    path = tmp_path / "adlm.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded.predict(x_test, verbose=0), model.predict(x_test, verbose=0), atol=1e-6)
    assert isinstance(loaded.loss, tfdpmech.TaylorCrossEntropy) and loaded.loss.batch_size == L


def test_callback_refuses_redrawn_noise(sample):
    x, y, _, _ = sample
    ilm = ILM(0.1, 0.2, L, seed=0)
    model = small_model()
    data = ilm.perturb(x, y, model)
    model.compile("adam", loss=ilm.loss())

    class Redraw(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            layer = model.get_layer("private_bias")
            layer.b_bar.assign(layer.b_bar + 1.0)

    with pytest.raises(RuntimeError, match="frozen noise changed"):
        model.fit(data.to_dataset(), epochs=1, verbose=0, callbacks=[Redraw(), ilm.callback(model, verbose=0)])


def test_shared_per_step_fit_redraws_noise(sample):
    x, y, _, _ = sample
    ilm = ILM(0.1, 0.2, L, seed=0, noise_mode="shared_per_step")
    model = small_model(input_noise=True)
    data = ilm.perturb(x, y, model)
    layer = model.get_layer("input_noise")
    flat = x[:2].reshape(2, -1)  # the MLP applies InputNoise after Flatten
    a = layer(flat, training=True) - flat
    b = layer(flat, training=True) - flat
    assert not np.allclose(a, b)
    np.testing.assert_allclose(a[0], a[1], rtol=1e-5, atol=1e-3)  # shared by the batch
    model.compile("adam", loss=ilm.loss())
    history = model.fit(data.to_dataset(), epochs=2, verbose=0, callbacks=[ilm.callback(model, verbose=0)])
    assert history.history["epsilon_claimed"] == pytest.approx([0.3, 0.4])
    assert all(math.isnan(v) for v in history.history["epsilon_provable"])


def test_partial_or_wrong_batches_are_refused(sample):
    x, y, _, _ = sample
    ilm = ILM(0.1, 0.2, L, seed=0)
    model = small_model()
    data = ilm.perturb(x, y, model)
    model.compile("adam", loss=ilm.loss())
    with pytest.raises(ValueError, match="batch_size=41 differs"):
        data.to_dataset(batch_size=L + 1)
    partial = tf.data.Dataset.from_tensor_slices((data.x_bar, data.phi_bar)).batch(L)
    with pytest.raises(ValueError, match="drop_remainder"):
        model.fit(partial, epochs=1, verbose=0)
    wrong = tf.data.Dataset.from_tensor_slices((data.x_bar, data.phi_bar)).batch(L // 2, drop_remainder=True)
    with pytest.raises(ValueError, match="calibrated for batch_size=40"):
        model.fit(wrong, epochs=1, verbose=0)


# --- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0, -1.0, math.inf, math.nan])
def test_bad_epsilon(eps):
    with pytest.raises(ValueError, match="eps2"):
        ILM(eps, 0.1, L)
    with pytest.raises(ValueError, match="eps1"):
        AdLM(eps, 0.1, 0.1, L)


def test_bad_epsilon_type_and_split():
    with pytest.raises(TypeError, match="eps3"):
        ILM(0.1, "0.2", L)
    with pytest.raises(ValueError, match="does not add up"):
        AdLM(0.1, 0.1, 0.1, L, epsilon=1.0)
    with pytest.raises(ValueError, match="split"):
        AdLM.from_total(1.0, L, split=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="noise_mode"):
        ILM(0.1, 0.1, L, noise_mode="per_batch")
    with pytest.raises(ValueError, match="perturb_orders"):
        ILM(0.1, 0.1, L, perturb_orders=(3,))


def test_bad_data(sample):
    x, y, _, _ = sample
    ilm = ILM(0.1, 0.2, L, seed=0)
    with pytest.raises(ValueError, match=r"x must lie in \[0, 1\]"):
        ilm.perturb(x * 255, y, small_model())
    x_nan = x.copy()
    x_nan[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ilm.perturb(x_nan, y, small_model())
    with pytest.raises(ValueError, match="one-hot"):
        ilm.perturb(x, y * 2, small_model())
    with pytest.raises(ValueError, match="classes"):
        ilm.perturb(x, y[:, :5], small_model())
    with pytest.raises(ValueError, match="records"):
        ilm.perturb(x, y[:-1], small_model())
    with pytest.raises(ValueError, match="exceeds the number of training records"):
        ILM(0.1, 0.2, 1000).perturb(x, y, small_model())


def test_unbounded_last_hidden_layer_is_refused(sample):
    x, y, _, _ = sample
    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(8, activation="relu"), keras.layers.Dense(10, use_bias=False)])
    with pytest.raises(ValueError, match="UnitClip"):
        ILM(0.1, 0.2, L, bias_noise=False).perturb(x, y, model)


def test_relevance_required_and_shape_checked(sample):
    x, y, _, _ = sample
    adlm = AdLM(0.1, 0.1, 0.2, L)
    with pytest.raises(ValueError, match="fit_relevance"):
        adlm.perturb(x, y, small_model())
    adlm.relevance = np.ones((10, 10))
    with pytest.raises(ValueError, match="relevance has shape"):
        adlm.perturb(x, y, small_model())


def test_shared_per_step_needs_noise_layer(sample):
    x, y, _, _ = sample
    with pytest.raises(ValueError, match="InputNoise"):
        ILM(0.1, 0.2, L, noise_mode="shared_per_step").perturb(x, y, small_model())


# --- the noise-free pipeline learns MNIST --------------------------------------------------
@pytest.mark.slow
def test_noise_free_taylor_pipeline_reaches_96_percent(mnist_sample):
    """Same model, same loss and data path as AdLM, with the noise off (bundled MNIST sample)."""
    ds = mnist_sample
    keras.utils.set_random_seed(0)
    model = models.mnist_cnn()
    coeffs = tfdpmech.losses.taylor_coefficients(ds.y_train)
    train = tf.data.Dataset.from_tensor_slices((ds.x_train, coeffs)).shuffle(8000, seed=0).batch(
        100, drop_remainder=True)
    model.compile(keras.optimizers.Adam(2e-3), loss=tfdpmech.TaylorCrossEntropy(batch_size=100),
                  metrics=[tfdpmech.taylor_accuracy])
    model.fit(train, epochs=5, verbose=0)
    _, accuracy = model.evaluate(ds.x_test, ds.y_test, verbose=0)
    assert accuracy >= 0.96


def test_clipping_noisy_inputs_is_post_processing(sample):
    x, y, _, _ = sample
    plain = ILM(0.1, 0.2, L, seed=0)
    clipped = ILM(0.1, 0.2, L, seed=0, clip_noisy_inputs=(-10, 10))
    a = plain.perturb(x, y, small_model())
    b = clipped.perturb(x, y, small_model())
    np.testing.assert_array_equal(b.x_bar, np.clip(a.x_bar, -10, 10))
    assert clipped.ledger.epsilon_provable() == plain.ledger.epsilon_provable()  # costs no privacy
    model = small_model(input_noise=True)
    ILM(0.1, 0.2, L, seed=0, noise_mode="shared_per_step", clip_noisy_inputs=(-10, 10)).perturb(x, y, model)
    noisy = model.get_layer("input_noise")(x[:4].reshape(4, -1), training=True).numpy()
    assert noisy.min() >= -10 and noisy.max() <= 10 and np.abs(noisy).max() == 10
    with pytest.raises(ValueError, match="clip_noisy_inputs"):
        ILM(0.1, 0.2, L, clip_noisy_inputs=(1, -1))


@pytest.mark.slow
def test_with_little_noise_the_private_pipeline_learns(mnist_sample):
    """The noise, not the pipeline, is what costs accuracy: at a huge ε ILM learns like non-private training."""
    ds = mnist_sample
    keras.utils.set_random_seed(0)
    ilm = ILM(1e6, 1e6, 100, seed=0)
    model = models.mlp()
    data = ilm.perturb(ds.x_train, ds.y_train, model)
    model.compile(keras.optimizers.Adam(5e-3), loss=ilm.loss())
    model.fit(data.to_dataset(seed=0), epochs=4, verbose=0)
    accuracy = np.mean(np.argmax(model.predict(ds.x_test, verbose=0), 1) == np.argmax(ds.y_test, 1))
    assert accuracy >= 0.85
