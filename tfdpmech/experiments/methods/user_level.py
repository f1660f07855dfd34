"""User-level DP-SGD in a comparison: ``dpsgd_user``, its ε per person (all of a user's records).

The comparison's private records belong to users (``options["users"]``: :mod:`tfdpmech.experiments.users`).
``dpsgd_user`` is Poisson DP-SGD over those users (:mod:`tfdpmech.mechanisms.dpsgd.sampling.user_sampling`): every step
includes each user with probability q, a sampled user contributes up to k records (``options["records_per_user"]``,
default :data:`RECORDS_PER_USER`), summed and clipped once to C, and the ε proven by ``dp_accounting`` is over
users (neighbours: add or remove one user with all of their records). The network and optimiser are the tanh
CNN's recipe (:data:`.mnist_recipes.TANH_CNN_RECIPE`) with q kept (the expected batch scaled to the number of
users); ``options["user_recipe"]`` replaces any recipe field (``{field: value}`` or ``{ε: {...}}``). The
record-level rows of the same comparison carry the group-privacy ε their guarantee gives the largest user.
"""

from __future__ import annotations

from ...mechanisms.dpsgd import make_dpsgd
from ..options import option_at
from ..registry import register_mechanism
from .dpsgd import _build, _changed
from .mnist_recipes import TANH_CNN_RECIPE, recipe_for

__all__ = ["RECORDS_PER_USER"]

RECORDS_PER_USER = 4  # k: the records a sampled user contributes to one step, unless options say otherwise


def _user_level(ctx, epsilon, seed):
    if ctx.user_ids is None:
        raise ValueError("dpsgd_user trains over users: give the comparison users with options['users'] = U (the "
                         "private records assigned to U users, Zipf-distributed counts): --users U, or --preset users")
    if ctx.kind != "image" or ctx.x_private.ndim != 4:
        raise ValueError("dpsgd_user trains the tanh CNN on images: run it on an image dataset")
    users = int(ctx.user_ids.max()) + 1
    k = option_at(ctx.config.options, epsilon, "records_per_user", RECORDS_PER_USER)
    recipe = recipe_for(ctx.config.options, epsilon, TANH_CNN_RECIPE, "user")
    model = ctx.build("standard")
    dp = make_dpsgd(epsilon, ctx.config.delta, users, recipe=recipe, seed=seed, engine="tfdpmech",
                    user_ids=ctx.user_ids, records_per_user=k)
    notes = {"recipe": "Tramèr & Boneh 2021 (mnist_recipes.TANH_CNN_RECIPE) over users, q kept",
             "network": model.name, "epochs": recipe.epochs,
             "user_level": {"users": users, "records_per_user": k, "expected_users_per_step": dp.expected_batch_size},
             **_changed(recipe, TANH_CNN_RECIPE)}
    return _build(dp, model, ctx.x_private, ctx.y_private, notes, seed=seed)


register_mechanism("dpsgd_user", _user_level,
                   "user-level DP-SGD (McMahan et al. 2018) on the tanh CNN: users Poisson-sampled, up to k records of "
                   "a sampled user summed and clipped once; ε proven per user (add or remove one user with all of "
                   "their records); needs options['users']",
                   mode="private", paper="dpsgd", data=("image",),
                   options=("user_epochs", "user_recipe", "records_per_user", "users", "user_zipf"))
