"""The data AdLM and ILM release and the callback that trains on nothing else (Phan et al., ICDM'17).

:class:`PrivateData` holds the once-perturbed training data of :meth:`~tfdpmech.mechanisms.adlm.AdLM.perturb`
(Algorithm 1, lines 8-19): the noisy features ``x̄`` and the noisy Taylor coefficients ``ϕ̄``, batched
at exactly the calibrated size |L|. :class:`AdLMBudget` is the training callback: claimed and
provable ε per epoch, and a model that refuses any batch the mechanism did not release.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from ...accounting.callbacks import PrivacyBudget
from ...contract import Mechanism
from ...input_pipeline import without_autotune
from ...released_data import ReleasedData, ReleasedDataGuard

__all__ = ["PrivateData", "AdLMBudget"]


@dataclasses.dataclass
class PrivateData:
    """The once-perturbed training data: the only data training may read.

    Attributes:
        x_bar: perturbed features (``shared_per_step``: the raw features, see the ledger).
        phi_bar: perturbed Taylor coefficients, shape (n, M, 3).
        batch_size: the batch size the noise was calibrated for.
        noise_mode: one of :data:`NOISE_MODES`.
        fingerprint: hash of the frozen noise draw.
        drop_remainder: ``n`` is not a multiple of ``batch_size`` and the caller accepted that
            ``n mod batch_size`` records sit out of every epoch (``perturb(..., drop_remainder=True)``).
    """

    x_bar: np.ndarray
    phi_bar: np.ndarray
    batch_size: int
    noise_mode: str
    fingerprint: str
    drop_remainder: bool = False

    @property
    def records_dropped_per_epoch(self) -> int:
        """Records left out of each epoch by the fixed batch size (0 when ``batch_size`` divides ``n``)."""
        return self.n % self.batch_size

    @property
    def n(self) -> int:
        return int(self.x_bar.shape[0])

    def to_dataset(self, batch_size: int | None = None, *, shuffle: bool = True, seed: int | None = None):
        """A ``tf.data.Dataset`` of ``(x̄, ϕ̄)`` batches of exactly the calibrated size.

        Every batch holds exactly ``batch_size`` records (the noise is calibrated for |L|). When
        ``batch_size`` does not divide ``n``, the ``n mod batch_size`` records left over by the
        shuffle sit out of that epoch; this happens only if ``perturb`` was told
        ``drop_remainder=True`` (the ledger records the count), otherwise ``perturb`` refused.

        Raises:
            ValueError: ``batch_size`` differs from the one the noise was calibrated for, or records
                would be dropped without ``drop_remainder=True``.
        """
        if batch_size is not None and batch_size != self.batch_size:
            raise ValueError(
                f"batch_size={batch_size} differs from the batch size the noise was calibrated for "
                f"({self.batch_size}); perturb again with the batch size you want to train with"
            )
        if self.records_dropped_per_epoch and not self.drop_remainder:
            raise ValueError(_remainder_message(self.n, self.batch_size))
        ds = tf.data.Dataset.from_tensor_slices((self.x_bar, self.phi_bar))
        if shuffle:
            ds = ds.shuffle(self.n, seed=seed, reshuffle_each_iteration=True)
        # drop_remainder: every batch has exactly |L| records (every noise scale has 1/|L|, lines 12-19)
        return without_autotune(ds.batch(self.batch_size, drop_remainder=True).prefetch(2))


def _remainder_message(n: int, batch_size: int) -> str:
    divisors = [b for b in range(1, n + 1) if n % b == 0]
    near = sorted(divisors, key=lambda b: abs(b - batch_size))[:3]
    return (
        f"n={n} records do not fill batches of batch_size={batch_size}: {n % batch_size} records would be left out "
        f"of every epoch (the noise is calibrated for exactly batch_size records per batch, so no partial batch can "
        f"be trained). Pass a batch_size that divides n (e.g. {', '.join(map(str, sorted(near)))}), or "
        "perturb(..., drop_remainder=True) to accept it (the ledger records the number dropped)"
    )


class AdLMBudget(ReleasedDataGuard, PrivacyBudget):
    """The AdLM/ILM training callback: claimed and provable ε per epoch, frozen noise guarded, and
    the model refuses to train on anything but the data :meth:`AdLM.perturb` released.

    ``mechanism`` is the :class:`~tfdpmech.mechanisms.adlm.AdLM` (or ILM) that made the callback
    (:meth:`AdLM.callback`); this module does not import it, the mechanism imports this one.
    """

    def __init__(self, mechanism: Mechanism, frozen_weights=(), verbose: int = 1):
        super().__init__(mechanism.ledger, frozen_weights=frozen_weights, verbose=verbose)
        self.mechanism = mechanism

    def released_data(self) -> ReleasedData:
        if self.mechanism.released is None:
            raise RuntimeError(
                f"call {type(self.mechanism).__name__}.perturb(x, y, model) before fit: the callback logs the ε of "
                "the perturbed data, and there is none yet"
            )
        return self.mechanism.released
