"""``make_private``: an ordinary Keras model that trains with Poisson DP-SGD through ``compile`` / ``fit``.

The shape of jax-privacy's ``keras_api.make_private(model, config)`` and Opacus's
``PrivacyEngine.make_private_with_epsilon``: give the model and the privacy budget, get back the
same model object, then use Keras as usual::

    model = tfdpmech.dpsgd.make_private(model, epsilon=1.0, delta=1e-5, n=len(x_train),
                                        expected_batch_size=250, epochs=10)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.CategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    model.fit(x_train, y_train)          # Poisson batches, epochs from the budget
    print(model.privacy_ledger.summary())

It runs tfdpmech's own engine (:mod:`.train_step`) on every stack, Keras 2.15 and Keras 3 alike.
``compile`` records the run's release (the budget is committed then); ``fit`` takes the n
private records as arrays and draws the Poisson batches itself (``batch_size`` and ``shuffle`` do
not apply), or a dataset from ``model.dp_sgd.dataset(x, y)``, and refuses any other dataset; every
``fit`` continues the run's Poisson stream (the batch of step t is drawn from the secret key and t).
It refuses more epochs than the budget covers. Everything else (``predict``, ``evaluate``, ``save``)
is the model's own; ``save`` keeps the optimizer and with it the step count.
"""

from __future__ import annotations

import keras
import numpy as np

from .poisson import PoissonDPSGD
from .poisson_sampling import is_run_dataset

__all__ = ["make_private"]

_NOT_FOR_POISSON = ("batch_size", "shuffle", "steps_per_epoch", "sample_weight", "class_weight", "validation_split")


def make_private(model, *, epsilon: float, delta: float, n: int, expected_batch_size: int, epochs: int,
                 l2_norm_clip: float = 1.0, path: str = "auto", accountant: str = "pld", seed=None, ledger=None):
    """Make ``model``'s ``compile`` / ``fit`` train it with Poisson-sampled DP-SGD at (ε, δ).

    Args:
        model: a built ``keras.Model`` whose layers do not mix the records of a batch.
        epsilon, delta: the target (ε, δ) of the whole run (add-or-remove-one neighbours).
        n: the number of private training records ``fit`` will get.
        expected_batch_size: L = q·n; every step samples each record with probability q.
        epochs: the run's epochs (``ceil(1/q)`` steps each); σ is calibrated for them.
        l2_norm_clip: the per-example clipping norm C.
        path: ``"auto"``, ``"fast_clipping"`` (ghost norms) or ``"vectorized"``.
        accountant: ``"pld"`` or ``"rdp"``. seed: sampling and noise seed (None: OS entropy;
            keep a fixed one secret). ledger: a :class:`~tfdpmech.accounting.PrivacyLedger` to record into.

    Returns:
        ``model`` itself, with ``model.dp_sgd`` (the :class:`~tfdpmech.dpsgd.PoissonDPSGD` run) and
        ``model.privacy_ledger``.

    Raises:
        ValueError / TypeError: bad budget or shape arguments (before anything is recorded); at
            ``compile``, a model DP-SGD cannot clip exactly (see :func:`~tfdpmech.dpsgd.paths.check_model`).
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"model must be a built keras.Model, got {type(model).__name__} ({model!r:.80}); wrap a layer in a model "
            "first, e.g. make_private(keras.Sequential([keras.Input(shape), layer]), ...)"
        )
    dp = PoissonDPSGD(epsilon, delta, expected_batch_size=expected_batch_size, epochs=epochs, n=n,
                      l2_norm_clip=l2_norm_clip, path=path, accountant=accountant, seed=seed, engine="tfdpmech",
                      ledger=ledger)
    keras_fit = type(model).fit

    def compile(optimizer="adam", loss=None, metrics=None, **kwargs):
        if kwargs:
            raise TypeError(f"a private model's compile takes optimizer, loss and metrics; got {sorted(kwargs)}")
        if isinstance(optimizer, str):
            optimizer = _optimizer_from_name(optimizer)
        dp.compile(model, loss=loss, metrics=metrics or (), optimizer=optimizer)
        model.fit = fit  # under MultiWorkerMirroredStrategy compile installed its fit: it runs from here

    def fit(x=None, y=None, epochs=None, callbacks=None, **kwargs):
        unsupported = sorted(k for k in kwargs if k in _NOT_FOR_POISSON)
        if unsupported:
            raise TypeError(
                f"{unsupported} do not apply to a DP-SGD model: fit draws Poisson batches of expected size "
                f"{dp.expected_batch_size:g} from all n={dp.n} records itself; pass x and y only"
            )
        if dp.model is None:
            raise RuntimeError("compile the private model before fit (model.compile(optimizer, loss, metrics))")
        epochs = dp.epochs if epochs is None else epochs
        if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or not 1 <= epochs <= dp.epochs:
            raise ValueError(f"epochs={epochs!r}: the privacy budget covers 1 to {dp.epochs} epochs; pass at most "
                             f"{dp.epochs} or make the model private again with more epochs (and a larger ε)")
        if y is None and not isinstance(x, np.ndarray):
            if not is_run_dataset(x):
                raise ValueError(
                    f"fit takes the private records as arrays, fit(x, y), and draws the Poisson batches itself; got "
                    f"x={type(x).__name__} without y. A dataset of one's own (shuffled batches, whatever its third "
                    "element) does not have the Poisson ε the ledger records; pass fit(x_private, y_private) or "
                    "fit(model.dp_sgd.dataset(x_private, y_private))"
                )
            data = x
        else:
            data = dp.dataset(x, y)
        callbacks = [*(callbacks or ()), dp.callback(verbose=0)]
        if dp.multiworker is not None:  # joins the workers, records the release on the chief, then trains
            return dp.multiworker_fit(data, epochs=int(epochs), callbacks=callbacks, **kwargs)
        return keras_fit(model, data, epochs=int(epochs), callbacks=callbacks, **kwargs)

    model.compile = compile
    model.fit = fit
    model.dp_sgd = dp
    model.privacy_ledger = dp.ledger
    return model


def _optimizer_from_name(name: str):
    try:
        optimizer = keras.optimizers.get(name)
    except ValueError as exc:
        raise ValueError(f"optimizer={name!r} is not a Keras optimizer name; pass e.g. 'adam' or an instance") from exc
    return optimizer
