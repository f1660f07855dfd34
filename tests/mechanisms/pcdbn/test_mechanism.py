"""PrivateCDBN through make_private: the layer-by-layer training, its ledger, baselines, seeds, a saved model."""

import keras
import numpy as np
import pytest

from tfdpmech import make_private
from tfdpmech.mechanisms.pcdbn.conv_rbm import ConvRBM
from tfdpmech.mechanisms.pcdbn import PrivateCDBN, cdbn_network


def trained(layers, mech, x, y, *, shape=(28, 28, 1), fc_units=None, **fit):
    """make_private → compile → fit on a cdbn_network of ``layers``; the model and fit's History."""
    model = make_private(cdbn_network(layers, shape, mech.num_classes, fc_units=fc_units,
                                      head_mechanism=mech.head_mechanism), mech)
    model.compile(metrics=["accuracy"])
    return model, model.fit(x, y, **fit)


# --- the builder (pCDBN Algorithm 1) ----------------------------------------------------------
@pytest.fixture(scope="module")
def mnist(mnist_sample):
    ds = mnist_sample
    return ds.x_train[:300], ds.y_train[:300]


def test_builder_private_ledger_composes_and_model_saves(mnist, tmp_path):
    x, y = mnist
    cdbn = PrivateCDBN(mode="private", epsilon=3.0, split=(0.25, 0.25, 0.5), pretrain_epochs=1, batch_size=100, seed=0)
    model, history = trained([ConvRBM(4, 5, approx="chebyshev_sigmoid", degree=1),
                              ConvRBM(4, 3, approx="chebyshev_sigmoid", degree=1)], cdbn, x, y, fc_units=10)
    assert [r.component for r in cdbn.ledger.releases] == ["crbm_layer_1", "crbm_layer_2", "random_fc", "output_layer"]
    assert model.privacy_ledger is cdbn.ledger
    assert cdbn.ledger.epsilon_claimed() == pytest.approx(3.0)
    assert cdbn.ledger.epsilon_provable() == pytest.approx(3.0)
    assert sorted(history.history) == ["crbm_layer_1_loss", "crbm_layer_2_loss"] and history.epoch == [0]
    assert model.output_shape == (None, 10) and not model.trainable_weights
    loss, accuracy = model.evaluate(x, y, verbose=0)  # compiled by the first fit, for evaluate
    assert np.isfinite(loss) and accuracy == pytest.approx(np.mean(np.argmax(model.predict(x, verbose=0), 1)
                                                                    == np.argmax(y, 1)))
    path = tmp_path / "pcdbn.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded(x[:4]).numpy(), model(x[:4]).numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="released once"):
        model.fit(x, y)
    with pytest.raises(RuntimeError, match="already spent"):
        model.fit()
    assert len(cdbn.ledger) == 4


def test_builder_baselines_and_reference_moved(mnist):
    x, y = mnist
    with pytest.raises(ValueError, match="PCDBNReference"):
        PrivateCDBN(mode="reference", epsilon=0.5)
    base = PrivateCDBN(mode="noiseless", pretrain_epochs=1, batch_size=100, seed=0)
    trained([ConvRBM(4, 5, degree=3)], base, x, y)
    assert base.epsilon_provable() is None and len(base.ledger) == 0
    assert "non-private" in base.report()["note"]


def test_builder_seed_reproducible(mnist):
    x, y = mnist
    preds = []
    for _ in range(2):
        cdbn = PrivateCDBN(mode="noiseless", pretrain_epochs=1, batch_size=100, seed=4)
        preds.append(trained([ConvRBM(2, 5, degree=3)], cdbn, x[:100], y[:100])[0](x[:8]).numpy())
    np.testing.assert_allclose(preds[0], preds[1], atol=1e-5)


@pytest.mark.slow
def test_mnist_smoke_private_above_chance_at_eps8(mnist_sample):
    ds = mnist_sample
    cdbn = PrivateCDBN(mode="private", epsilon=8.0, split=(0.1, 0.9), fc_scale=16.0, pretrain_epochs=1,
                       batch_size=200, head_ridge=1e-2, seed=0)
    model, _ = trained([ConvRBM(8, 5, approx="chebyshev_sigmoid", degree=1)], cdbn, ds.x_train, ds.y_train,
                       fc_units=10)
    acc = np.mean(np.argmax(model.predict(ds.x_test, verbose=0), 1) == np.argmax(ds.y_test, 1))
    assert acc > 0.2  # chance is 0.1; measured 0.32 with this seed on 8,000 records
    assert cdbn.epsilon_provable() == pytest.approx(8.0)


def test_gaussian_head_option_checked_before_any_budget_and_recorded():
    with pytest.raises(ValueError, match="needs delta"):
        PrivateCDBN(epsilon=1.0, head_mechanism="gaussian")
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (60, 8, 8, 1)).astype(np.float32)
    cdbn = PrivateCDBN(num_classes=3, epsilon=2.0, pretrain_epochs=1, batch_size=30, head_mechanism="gaussian",
                       head_delta=1e-5, seed=0)
    with pytest.raises(TypeError, match=r"FeatureMap\(clip_norm=True\)"):  # the Gaussian head needs its map
        make_private(cdbn_network([ConvRBM(2, 3, approx="chebyshev_sigmoid", degree=1)], (8, 8, 1), 3), cdbn)
    model, _ = trained([ConvRBM(2, 3, approx="chebyshev_sigmoid", degree=1)], cdbn, x, rng.integers(3, size=60),
                       shape=(8, 8, 1))
    head = cdbn.ledger.releases[-1]
    assert head.component == "output_layer" and head.mechanism == "gaussian" and head.delta == 1e-5
    assert cdbn.ledger.delta() == 1e-5 and cdbn.ledger.epsilon_provable() == pytest.approx(2.0)
    assert model.predict(x[:4], verbose=0).shape == (4, 3)


@pytest.mark.parametrize("network, match", [
    (lambda: keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(3)]), "ConvRBM"),
    (lambda: keras.Sequential([keras.Input((8, 8, 1)), ConvRBM(2, 3), keras.layers.Dense(3)]), "Flatten"),
    (lambda: keras.Sequential([keras.Input((8, 8, 1)), ConvRBM(2, 3), keras.layers.Flatten(), keras.layers.Dense(4)]),
     "4 units"),
    (lambda: keras.Sequential([keras.Input((8, 8, 1)), ConvRBM(2, 3), keras.layers.Flatten(),
                               keras.layers.Dense(3, activation="softmax")]), "'softmax'"),
    (lambda: keras.Sequential([keras.Input((8, 8, 1)), ConvRBM(2, 3), keras.layers.Flatten(),
                               keras.layers.Dense(5, activation="relu"), keras.layers.Dense(3)]), "sigmoid Dense"),
    (lambda: keras.Sequential([ConvRBM(2, 3), keras.layers.Flatten(), keras.layers.Dense(3)]), "keras.Input"),
    (lambda: keras.Model(*(lambda i: (i, keras.layers.Dense(3)(keras.layers.Flatten()(ConvRBM(2, 3)(i)))))(
        keras.Input((8, 8, 1)))), "keras.Sequential"),
])
def test_a_model_of_another_shape_is_refused_by_make_private(network, match):
    cdbn = PrivateCDBN(num_classes=3, epsilon=1.0, seed=0)
    with pytest.raises(TypeError, match=match):
        make_private(network(), cdbn)
    assert len(cdbn.ledger) == 0 and cdbn.parts is None


def test_split_length_and_a_second_model_are_checked_before_any_release():
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0, 1, (40, 8, 8, 1)).astype(np.float32), rng.integers(3, size=40)
    with pytest.raises(ValueError, match=r"2 fractions for the model's 3 components"):
        make_private(cdbn_network([ConvRBM(2, 3), ConvRBM(2, 3)], (16, 16, 1), 3),
                     PrivateCDBN(num_classes=3, epsilon=1.0, split=(0.5, 0.5)))
    with pytest.raises(ValueError, match=r"exactly the model's components"):
        make_private(cdbn_network([ConvRBM(2, 3)], (8, 8, 1), 3),
                     PrivateCDBN(num_classes=3, epsilon=1.0, split={"crbm_layer_2": 0.5, "output_layer": 0.5}))
    cdbn = PrivateCDBN(num_classes=3, epsilon=1.0, pretrain_epochs=1, batch_size=20, seed=0)
    model = make_private(cdbn_network([ConvRBM(2, 3, approx="chebyshev_sigmoid", degree=1)], (8, 8, 1), 3), cdbn)
    with pytest.raises(TypeError, match="the model it was given first"):
        make_private(cdbn_network([ConvRBM(2, 3)], (8, 8, 1), 3), cdbn)
    model.compile()
    with pytest.raises(ValueError, match=r"epochs=3.*pretrain_epochs and head_epochs"):
        model.fit(x, y, epochs=3)
    with pytest.raises(TypeError, match="batch_size"):
        model.fit(x, y, batch_size=10)
    with pytest.raises(ValueError, match=r"records of shape \(6, 6, 1\)"):
        model.fit(x[:, :6, :6], y)
    assert len(cdbn.ledger) == 0
    seen = []
    model.fit(x, y, callbacks=[keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen.append((e, logs)))])
    assert [e for e, _ in seen] == [0] and "crbm_layer_1_loss" in seen[0][1]
    assert cdbn.ledger.epsilon_provable() == pytest.approx(1.0)
