"""``make_private(model, mechanism)``: the one way to train a Keras model privately.

The shape of jax-privacy's ``keras_api.make_private(model, config)`` and Opacus's
``PrivacyEngine.make_private``: give the model and a mechanism (constructed with its budget, every
argument checked), get back the same model object, then use Keras as usual::

    model = tfdpmech.make_private(model, tfdpmech.DPSGD(epsilon=1.0, delta=1e-5, n=len(x_train),
                                                        expected_batch_size=250, epochs=10))
    model.compile(optimizer="adam", loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    model.fit(x_train, y_train)
    print(model.privacy_ledger.summary())     # claimed and provable ε side by side

The other two shapes are not trained this way: a closed-form head is an estimator
(``FunctionalHead(...).fit(x, y)`` returns the trained Keras model) and a query-time mechanism wraps a
trained model (``DPPredictor``); ``make_private`` refuses them naming their shape.
"""

from __future__ import annotations

import keras

from .contract import Mechanism

__all__ = ["make_private"]


def make_private(model, mechanism, **options):
    """Make ``model``'s ``compile`` / ``fit`` train it with ``mechanism``.

    Args:
        model: a built ``keras.Model``.
        mechanism: a training mechanism that trains the given model: :class:`~tfdpmech.DPSGD` (its
            ``fit`` draws Poisson batches and records the release once its data passed the checks), :class:`~tfdpmech.AdLM`,
            :class:`~tfdpmech.ILM`, :class:`~tfdpmech.AFRRS` or :class:`~tfdpmech.InputPerturbation`
            (the first ``fit(x, y)`` makes the once-only release, then trains on it), or
            :class:`~tfdpmech.PrivateCDBN` on a :func:`~tfdpmech.cdbn_network` (the first ``fit(x, y)``
            trains every layer and the head, each released once).
        **options: the mechanism's further inputs that are neither budget nor data (AdLM's and
            AFRRS's ``relevance_model``, a model trained on public data only; input perturbation's
            ``learning_rate``).

    Returns:
        ``model`` itself, with ``model.privacy_ledger``.

    Raises:
        TypeError: ``model`` is not a Keras model; ``mechanism`` is not a mechanism, or one of another
            shape (the error names how that one is used); an unknown option.
        ValueError: see the mechanism's own checks (all before anything is released).
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"model must be a built keras.Model, got {type(model).__name__} ({model!r:.80}); wrap a layer in a model "
            "first, e.g. make_private(keras.Sequential([keras.Input(shape), layer]), mechanism)"
        )
    if not isinstance(mechanism, Mechanism):
        raise TypeError(f"mechanism must be a tfdpmech mechanism such as tfdpmech.DPSGD(epsilon=..., delta=..., ...), "
                        f"got {type(mechanism).__name__} ({mechanism!r:.80})")
    return mechanism.private_model(model, **options)
