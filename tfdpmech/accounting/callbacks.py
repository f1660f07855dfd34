"""Keras callbacks that put the privacy budget into training logs and guard frozen noise."""

from __future__ import annotations

import math

import keras
import numpy as np

from ..released_data import array_fingerprint
from .ledger import PrivacyLedger, format_epsilon

__all__ = ["PrivacyBudget"]


class PrivacyBudget(keras.callbacks.Callback):
    """Log ``epsilon_claimed`` and ``epsilon_provable`` at the end of every epoch.

    Both values go into the epoch ``logs``, so they appear in ``History.history`` and in
    TensorBoard (put this callback before ``TensorBoard`` in the list). ``epsilon_provable`` is
    NaN when no proven guarantee exists; the printed line then says "none proven". Releases
    that compose per epoch (reproduction modes) grow with the epoch count.

    It also fingerprints the frozen noise weights it is given at ``on_train_begin`` and raises
    if any of them changed at the end of an epoch (noise that must be drawn once was redrawn).

    Args:
        ledger: the :class:`~tfdpmech.accounting.ledger.PrivacyLedger` of the mechanism.
        frozen_weights: variables that must not change during training.
        verbose: 1 prints one line per epoch with both ε values.
    """

    def __init__(self, ledger: PrivacyLedger, frozen_weights=(), verbose: int = 1):
        super().__init__()
        if not isinstance(ledger, PrivacyLedger):
            raise TypeError(f"ledger must be a tfdpmech.PrivacyLedger, got {type(ledger).__name__}")
        self.ledger = ledger
        self.frozen_weights = list(frozen_weights)
        self.verbose = verbose
        self._fingerprints: list[str] = []

    def _fingerprint(self) -> list[str]:
        return [array_fingerprint(np.asarray(w)) for w in self.frozen_weights]

    def on_train_begin(self, logs=None):
        self._fingerprints = self._fingerprint()

    def on_epoch_end(self, epoch, logs=None):
        if self._fingerprint() != self._fingerprints:
            raise RuntimeError(
                "frozen noise changed during training (it must be drawn once); do not re-assign "
                "PerturbedBias.b_bar / InputNoise.scales between epochs"
            )
        epochs = epoch + 1
        claimed = self.ledger.epsilon_claimed(epochs)
        provable = self.ledger.epsilon_provable(epochs)
        if logs is not None:
            logs["epsilon_claimed"] = claimed
            logs["epsilon_provable"] = math.nan if provable is None else provable
        if self.verbose:
            print(f"epoch {epochs}: {format_epsilon(claimed, provable, self.ledger.delta(epochs))}")
