"""Who is in a Poisson step: the records a run samples, their weights, and the unit one clip bounds.

The data side of :class:`~tfdpmech.mechanisms.dpsgd.DPSGD` (mixed into it): the clipping unit (a record, a
record's K augmented views, :mod:`.augmentation`; or a user's records, :mod:`.user_sampling`), its checks
before any release, and :meth:`PoissonUnits.dataset`, the run's batches.
"""

from __future__ import annotations

import tensorflow as tf

from ....validation import check_positive_int
from .augmentation import augment_batch, check_augmentation, check_multiplicity
from ..runs.multiworker import shared_dataset
from .poisson_sampling import check_seed, row_multiple, run_dataset, sampling_key
from .record_weights import check_sample_weight
from .user_sampling import UserRecords, check_users

__all__ = ["PoissonUnits"]


class PoissonUnits:
    """The clipping unit and the batches of a Poisson DP-SGD run (see the module docstring)."""

    augmentation = None
    augmentation_multiplicity = 1
    users = None

    def _set_units(self, augmentation, augmentation_multiplicity, user_ids, records_per_user, n) -> None:
        self.augmentation_multiplicity = check_multiplicity(augmentation, augmentation_multiplicity)
        self.augmentation = augmentation
        self.users = None
        if user_ids is not None or records_per_user is not None:
            if user_ids is None:
                raise ValueError("records_per_user applies to a user-level run: pass user_ids (one per record) too")
            if augmentation is not None:
                raise ValueError("a run is record-level with augmentation multiplicity, or user-level: not both")
            if n is None:
                raise ValueError("n (the number of users of a user-level run) is required, e.g. "
                                 "n=len(np.unique(user_ids))")
            self.users = UserRecords(*check_users(user_ids, records_per_user, check_positive_int(n, "n")))

    @property
    def group_size(self) -> int:
        """The rows of one clipping unit: a user's k records, a record's K views, or 1."""
        return self.users.k if self.users is not None else self.augmentation_multiplicity

    def _check_unit_chunks(self) -> None:
        """A chunk of ``physical_batch_size`` rows holds whole units; groups train on tfdpmech's engine."""
        k = self.group_size
        name = "records_per_user" if self.users is not None else "augmentation_multiplicity"
        if self.physical_batch_size is not None and self.physical_batch_size < k:
            raise ValueError(f"physical_batch_size={self.physical_batch_size} is smaller than {name}={k}: a chunk "
                             f"holds whole clipping units; pass physical_batch_size >= {k} (a multiple of {k} uses "
                             "every row of a chunk)")
        if k > 1 and self.requested_engine == "tensorflow_privacy":
            raise ValueError(f"{name} > 1 trains on tfdpmech's engine (engine='tfdpmech' or tfdpmech.make_private); "
                             "tensorflow-privacy's DPModel clips single rows")

    def _unit_basis(self) -> str:
        """The release basis's sentence on the clipping unit (empty for a record)."""
        if self.users is not None:
            return (f"User level (McMahan et al. 2018): the n={self.n} units sampled are users; a sampled user "
                    f"contributes up to k={self.users.k} of their records (cycled over the steps it is sampled in), "
                    "their gradients summed, then clipped to C. ")
        if self.augmentation_multiplicity > 1:
            return (f"Augmentation multiplicity K={self.augmentation_multiplicity} (De et al. 2022): a sampled "
                    "record's K views are one clipping unit, their gradients averaged, then clipped to C. ")
        return ""

    def _one_device(self, what: str) -> None:
        if self.engine != "tfdpmech" or self.multiworker is not None or self.replicas != 1:
            raise ValueError(f"{what} trains on tfdpmech's engine on one device (tfdpmech.make_private); this run has "
                             f"engine={self.engine!r}, {self.replicas} replica(s)")

    def dataset(self, x, y, *, seed=None, sample_weight=None) -> tf.data.Dataset:
        """This run's padded Poisson batches ``(x, y, (mask, ticket))``, ``steps_per_epoch`` per Keras epoch.

        The batch of global step t (the optimizer's step count, which ``model.save`` keeps with the
        model) is drawn from ``(secret key, t)``: every ``fit`` continues the stream where the last one
        stopped, so no draw is ever repeated. Every row carries its ticket ``(run, t)``; the compiled
        model trains only on batches of this run, each at the step it was drawn for.

        Args:
            x, y: all n private records and their labels (a user-level run: the records ``user_ids`` describes).
            seed: sampling seed; None uses the constructor's ``seed`` (the same batches; OS entropy without one).
                Under ``MultiWorkerMirroredStrategy`` one of the two is required: the secret every worker
                shares, so that all draw the same global batches (:mod:`tfdpmech.mechanisms.dpsgd.runs.multiworker`).
            sample_weight: None, or one finite weight >= 0 per record: it scales the record's loss before its
                gradient is clipped, and travels with the record through the sampler (:mod:`.record_weights`).

        Raises:
            TypeError: a seed that is not None or a non-negative int.
            ValueError: ``len(x)`` differs from n, or x and y differ in length; a ``sample_weight`` that is not
                one finite weight >= 0 per record; an augmentation that changes a record (:mod:`.augmentation`);
                weights, views or users on tensorflow-privacy's engine or across devices.
        """
        self._require_n("dataset(x, y)")
        seed = check_seed(seed)
        x, y = self._checked_data(x, y)  # numeric, finite, n records; integer labels one-hot for the default loss
        key = self._sampling_key if seed is None else sampling_key(seed)
        weights, augment = None, None
        if sample_weight is not None:
            weights = check_sample_weight(sample_weight, self.n if self.users is None else self.users.n_records)
            self._one_device("sample_weight")
        if self.users is not None:
            self._one_device("a user-level run")
        if self.augmentation is not None:
            self._one_device("augmentation")
            check_augmentation(self.augmentation, x, key)  # before the release
            augment = lambda xb, steps: augment_batch(self.augmentation, xb, steps, key)  # noqa: E731
        if self.multiworker is not None:  # the same global batches on every worker, each its slice
            return shared_dataset(self, x, y, seed if seed is not None else self._sampler_seed, poisson=True)
        return run_dataset(x, y, self.sampling_probability, self.steps_per_epoch, key=key,
                           padded_size=self.batch_rows(), first_step=self.global_step, run_id=self.run_id,
                           weights=weights, views=self.augmentation_multiplicity, augment=augment, users=self.users,
                           partitions=self.partitions(key))

    def batch_rows(self) -> int:
        """The rows a Poisson batch is padded to a multiple of: :func:`row_multiple` of the expected batch on
        tfdpmech's engine on one device (its traced train step takes a batch of any size, one trace, so no step
        computes on more than 7 padding rows, nor on more than L/8), the fixed P (:func:`padded_batch_size`,
        split evenly across replicas) under a strategy and on tensorflow-privacy's engine. A batch is never cut:
        it is padded up to the next multiple."""
        if self.engine == "tfdpmech" and self.replicas == 1:
            return row_multiple(self.expected_batch_size)
        return self.padded_batch_size
