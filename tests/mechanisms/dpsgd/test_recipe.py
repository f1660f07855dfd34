"""Tests for tfdpmech.mechanisms.dpsgd.runs.recipe: the tanh MLP, the stated recipe, the public-only proxy."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfdpmech import data
from tfdpmech.mechanisms.dpsgd.runs import recipe as recipe_module
from tfdpmech.mechanisms.dpsgd.clipping import ghost_unsupported_layers
from tfdpmech.mechanisms.dpsgd.runs.paths import supports_fast_clipping, tf_privacy_available
from tfdpmech.mechanisms.dpsgd.runs.recipe import RECIPE, Recipe, make_dpsgd, public_proxy_accuracy, tanh_mlp

pytestmark = pytest.mark.dpsgd


def test_tanh_mlp_is_the_mlp_family_with_tanh():
    model = tanh_mlp()
    dense = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]
    assert [int(d.kernel.shape[0]) for d in dense] == [784, 128, 25]
    assert [int(d.kernel.shape[1]) for d in dense] == [128, 25, 10]
    assert [d.activation.__name__ for d in dense] == ["tanh", "tanh", "linear"]  # logits out
    assert ghost_unsupported_layers(model) == []  # fast clipping with tfdpmech's engine
    if tf_privacy_available():
        assert supports_fast_clipping(model)  # and with tensorflow-privacy's registry
    assert not any(isinstance(layer, keras.layers.Rescaling) for layer in model.layers)  # inputs stay in [0, 1]
    # "symmetric": inputs in [0, 1] mapped to [-1, 1] by a fixed (data-independent) layer
    sym = tanh_mlp(input_scaling="symmetric")
    out = keras.Model(sym.inputs, sym.layers[1].output)(np.zeros((1, 28, 28, 1), np.float32)).numpy()
    assert np.allclose(out, -1.0)
    with pytest.raises(ValueError, match="input_scaling"):
        tanh_mlp(input_scaling="standardize")


def test_recipe_is_stated_and_scales_its_batch_with_n():
    assert RECIPE.activation == "tanh" and RECIPE.accountant == "pld"
    assert RECIPE.batch_for(RECIPE.reference_n) == RECIPE.expected_batch_size
    assert RECIPE.batch_for(RECIPE.reference_n * 2) == 2 * RECIPE.expected_batch_size  # same q
    assert RECIPE.batch_for(3) >= 1
    assert RECIPE.replace(epochs=3).epochs == 3 and RECIPE.replace(epochs=3) != RECIPE


def test_make_dpsgd_uses_the_recipe_and_overrides():
    r = Recipe(expected_batch_size=70, epochs=2, l2_norm_clip=0.5, learning_rate=0.01, reference_n=700,
               accountant="rdp")
    dp = make_dpsgd(2.0, 1e-5, 700, recipe=r, seed=0)
    assert (dp.expected_batch_size, dp.epochs, dp.l2_norm_clip, dp.learning_rate) == (70, 2, 0.5, 0.01)
    assert dp.sampling_probability == pytest.approx(0.1) and dp.steps == 20
    assert dp.epsilon_achieved <= 2.0
    assert make_dpsgd(2.0, 1e-5, 700, recipe=r, epochs=3).steps == 30


@pytest.mark.slow  # two small trainings (~5 s idle, ~35 s on a loaded 2-core machine)
def test_public_proxy_reads_only_what_it_is_given_and_matches_the_noise():
    splits = data.load("mnist_sample")
    x_pub, y_pub = splits.x_train[:60], splits.y_train[:60]
    r = Recipe(expected_batch_size=100, epochs=1, reference_n=1000, accountant="rdp")
    out = public_proxy_accuracy(r, x_pub, y_pub, n_private=1000, epsilon=4.0, delta=1e-5, folds=2)
    assert 0.0 <= out["accuracy"] <= 1.0 and len(out["accuracies"]) == 2
    # σ is the one the private run (n=1000, q=0.1, 10 steps) would use
    assert out["noise_multiplier"] == pytest.approx(
        recipe_module.poisson_dpsgd_noise_multiplier(4.0, 1e-5, q=0.1, steps=10, accountant="rdp"))
