"""The Keras callback of a DP-SGD run: the ledger's ε each epoch, plus the ε spent so far."""

from __future__ import annotations

from ....accounting.callbacks import PrivacyBudget
from ....contract import Mechanism

__all__ = ["DPSGDBudget"]


class DPSGDBudget(PrivacyBudget):
    """:class:`~tfdpmech.accounting.callbacks.PrivacyBudget` that also logs the DP-SGD ε spent so far.

    ``epsilon_claimed`` / ``epsilon_provable`` are the ledger totals (the full planned run).
    ``dpsgd_epsilon_spent`` is the Poisson-RDP ε of the optimizer steps taken so far, which
    grows to at most the provable ε of the release. At every epoch's end the steps taken are noted
    with the release (:meth:`~tfdpmech.accounting.ledger.PrivacyLedger.record_progress`), so a ledger
    file shows what a run that stopped early ran.

    ``dpsgd`` is the :class:`~tfdpmech.mechanisms.dpsgd.runs.base.DPSGDRun` that made the callback
    (:meth:`DPSGDRun.callback`); this module does not import it, the run imports this one.
    """

    def __init__(self, dpsgd: Mechanism, verbose: int = 1):
        super().__init__(dpsgd.ledger, verbose=verbose)
        self._dpsgd = dpsgd

    def on_train_begin(self, logs=None):
        """Refuse a fit whose epoch is not one pass over the ``n`` examples the noise was calibrated for.

        The provable (any-order) ε composes one Gaussian mechanism per epoch over ``n`` examples; on
        a smaller dataset the step budget would allow more passes than were accounted.
        """
        super().on_train_begin(logs)
        dp = self._dpsgd
        name = type(dp).__name__
        steps = (self.params or {}).get("steps")
        allowed = dp.allowed_steps_per_epoch()
        if steps is not None and int(steps) not in allowed:
            raise ValueError(
                f"this fit runs {steps} steps per epoch, but the {name} noise was calibrated for n={dp.n} examples in "
                f"batches of {dp.batch_size} ({min(allowed)} steps per epoch): the data passed to fit is not "
                f"the n={dp.n} training examples, and the logged ε would not hold. Fit on {name}.dataset(x, y) with "
                f"all n examples, or create the {name} with the n you train on"
            )

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        dp = self._dpsgd
        if dp.model is None:
            return
        taken = dp.steps_taken()
        if dp.release is not None:  # the steps run so far, kept with the release (written to a bound ledger file)
            dp.ledger.record_progress(dp.release, taken, reader=dp.steps_taken)
        if logs is not None:
            logs["dpsgd_epsilon_spent"] = dp.epsilon_after_steps(taken)
