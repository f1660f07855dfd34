"""The whole-MNIST recipes and the per-run overrides the comparison's options give them."""
import pytest

from tfdpmech.experiments.methods.mnist_recipes import SCATTER_LINEAR_RECIPE, TANH_CNN_RECIPE, epochs_for, recipe_for


def test_epochs_per_epsilon_or_for_all():
    assert epochs_for({"dpsgd_epochs": {3.0: 40, 1.0: 20}}, 1.0, 7) == 20
    assert epochs_for({"dpsgd_epochs": {3.0: 40}}, 0.5, 7) == 7  # ε not listed: the recipe's own
    assert epochs_for({"dpsgd_epochs": 12}, 0.5, 7) == 12
    assert epochs_for({}, 0.5, 7) == 7


def test_recipe_overrides_for_every_epsilon_and_per_epsilon():
    options = {"dpsgd_epochs": {3.0: 60}, "dpsgd_recipe": {"ema_momentum": 0.999, "learning_rate": 0.25}}
    recipe = recipe_for(options, 3.0, TANH_CNN_RECIPE)
    assert (recipe.epochs, recipe.ema_momentum, recipe.learning_rate) == (60, 0.999, 0.25)
    assert recipe.l2_norm_clip == TANH_CNN_RECIPE.l2_norm_clip  # the rest is the published recipe
    per_epsilon = {"dpsgd_recipe": {3.0: {"expected_batch_size": 1024}, 1.0: {"ema_momentum": 0.99}}}
    assert recipe_for(per_epsilon, 3.0, TANH_CNN_RECIPE).expected_batch_size == 1024
    assert recipe_for(per_epsilon, 1.0, TANH_CNN_RECIPE).ema_momentum == 0.99
    assert recipe_for(per_epsilon, 0.5, TANH_CNN_RECIPE) == TANH_CNN_RECIPE
    scatter = recipe_for({"scatter_recipe": {"learning_rate": 4.0}, "dpsgd_recipe": {"learning_rate": 1.0}}, 3.0,
                         SCATTER_LINEAR_RECIPE, "scatter")
    assert scatter.learning_rate == 4.0


def test_an_unknown_field_is_named():
    with pytest.raises(ValueError, match="'lr'.*not Recipe fields"):
        recipe_for({"dpsgd_recipe": {"lr": 0.1}}, 3.0, TANH_CNN_RECIPE)
