"""DP-SGD over several workers (``tf.distribute.MultiWorkerMirroredStrategy``) with tfdpmech's engine.

What every worker runs, and why the accounting of one process still holds:

* **The same global batches everywhere.** Global batch t is a pure function of a sampling seed the
  workers share (a secret, like the noise seed) and of t: Poisson sampling over all n records with the
  run's q (:func:`poisson_batch`), or the t-th batch of that epoch's permutation of all n records
  (:func:`shuffled_batch`). Every worker holds all n records and derives the same global batch; each
  replica trains on its own slice of it (:func:`replica_slice`), so every row is on exactly one replica
  and the sums over the replicas are the sums over the global batch.
* **One noise draw per global step.** tfdpmech's train step (:mod:`.train_step`) adds the noise on
  replica 0 only (``replica_id_in_sync_group`` numbers the replicas of every worker, so there is one
  replica 0 in the cluster) and the Keras optimizer all-reduces the gradients with SUM across every
  worker: each step applies ``(Σ clipped + one N(0, σ²C²I) draw) / L`` with the global L.
* **One release, on the chief, when training starts.** ``model.fit`` first joins every worker in a
  collective that checks they run the same settings on the same records with the same sampling seed
  (:func:`check_same_everywhere`); only then does the chief (task ``chief``, or worker 0 without one)
  record the release, once, before the first noisy step. The other workers record nothing.
"""

from __future__ import annotations

import functools
import hashlib
import numbers

import numpy as np
import tensorflow as tf

from ....distribute import is_chief
from ....input_pipeline import without_autotune
from ..sampling.poisson_sampling import (
    poisson_batch,
    record_spec,
    run_element,
    run_signature,
    sampling_key,
    step_rng,
    tagged_poisson_batch,
)
from .train_step import KERAS_3

__all__ = ["is_multiworker", "check_sampling_seed", "seed_words", "poisson_batch", "shuffled_batch", "replica_slice",
           "fingerprint", "check_same_everywhere", "SharedBatches", "shared_dataset", "install_multiworker_fit"]


def is_multiworker(strategy) -> bool:
    """Whether ``strategy`` is a ``MultiWorkerMirroredStrategy`` (one process per worker)."""
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def check_sampling_seed(seed, what: str):
    """The shared sampling seed: a non-negative int (or a ``numpy.random.SeedSequence``); None is refused."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if seed is None or isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(
            f"{what} under MultiWorkerMirroredStrategy needs seed= (got {seed!r}): every worker must draw the same "
            "global batches, so they share one secret sampling seed. Pass the same non-negative int on every worker, "
            "e.g. one secrets.randbits(64) handed to the workers like any other secret (seed=None would give every "
            "worker its own OS entropy and different batches)"
        )
    return np.random.SeedSequence(int(seed))


def seed_words(seed_sequence) -> tuple:
    """Four 32-bit words of the shared seed (the same on every worker): the run's sampling key."""
    return sampling_key(seed_sequence)


def shuffled_batch(x, y, batch_size: int, steps_per_epoch: int, words, step: int, cache=None):
    """Global batch ``step``: batch ``step mod steps_per_epoch`` of the permutation of epoch
    ``step // steps_per_epoch`` of all n records (``cache``: a dict keeping the last permutation)."""
    epoch, index = divmod(int(step), int(steps_per_epoch))
    cache = {} if cache is None else cache
    last = cache.get("last")  # (epoch, permutation), replaced as one value
    if last is None or last[0] != epoch:
        last = cache["last"] = (epoch, step_rng(words, epoch).permutation(len(x)))
    rows = last[1][index * batch_size:(index + 1) * batch_size]
    return x[rows], y[rows]


def replica_slice(batch, replica: int, replicas: int):
    """Replica ``replica``'s rows of a global batch: the ``replica``-th of ``replicas`` equal consecutive slices."""
    rows = len(batch[0])
    if rows % replicas:  # pragma: no cover - the padded and fixed batches are checked at compile
        raise ValueError(f"a global batch of {rows} rows does not split across {replicas} replicas")
    size = rows // replicas
    return tuple(a[replica * size:(replica + 1) * size] for a in batch)


def fingerprint(*parts) -> int:
    """A 20-bit hash of ``parts`` (numpy arrays by their bytes, dtype and shape; anything else by ``repr``)."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, np.ndarray):
            digest.update(repr((part.dtype.str, part.shape)).encode())
            digest.update(np.ascontiguousarray(part).tobytes())
        else:
            digest.update(repr(part).encode())
        digest.update(b"\x00")
    return int.from_bytes(digest.digest()[:8], "big") % (1 << 20)


def check_same_everywhere(strategy, value: int, what: str) -> None:
    """Join every worker in one all-reduce and refuse when their ``value`` (a :func:`fingerprint`) differ.

    Every replica contributes ``(v, v², 1)``; the values are all equal iff ``k·Σv² = (Σv)²`` (exact in
    float64 for v < 2^20). Every worker sees the same sums, so all refuse together. A worker that is gone
    makes the all-reduce fail (the strategy's ``CommunicationOptions`` timeout and health checks).
    """
    v = float(int(value) % (1 << 20))

    def per_replica(_context):
        return tf.constant([v, v * v, 1.0], tf.float64)

    total = strategy.reduce(tf.distribute.ReduceOp.SUM,
                            strategy.experimental_distribute_values_from_function(per_replica), axis=None).numpy()
    s, ss, count = (float(t) for t in total)
    if ss * count != s * s:
        raise ValueError(
            f"{what}: the workers do not train the same run: their settings, their n private records (all of them, "
            "in the same order, on every worker) or their shared sampling seed differ. Give every worker the same "
            "arguments, the whole private set and the same seed; nothing has been released"
        )


class SharedBatches:
    """The global batches of one run (a pure function of the shared seed and the step) as each worker's slices.

    Args:
        batch: ``step -> tuple of arrays``, the global batch of that step.
        signature: the ``tf.TensorSpec`` structure of one element (first dimensions None).
        identity: a :func:`fingerprint` of the records, the sampling and the seed (compared across workers).
        arrange: ``tuple of slices -> element`` (the structure the train step takes); the tuple itself if None.
    """

    def __init__(self, batch, signature, identity: int, arrange=None):
        self.batch, self.signature, self.identity = batch, signature, identity
        self.arrange = arrange if arrange is not None else (lambda parts: parts)
        self.start = 0  # the global step the next iterator starts at (set by fit: the optimizer's step count)
        self.dataset = None

    def distribute(self, strategy):
        """``strategy.distribute_datasets_from_function``: worker w's pipeline yields, for every global step, the
        slices of its local replicas (w·k ... w·k+k−1 of the k·workers slices), one per replica in turn."""

        def dataset_fn(context):
            workers, worker = context.num_input_pipelines, context.input_pipeline_id
            local = context.num_replicas_in_sync // workers

            def generate():
                step = self.start  # regenerated from the step, so a new iterator never reuses a step's batch
                while True:
                    batch = self.batch(step)
                    for r in range(local):
                        yield self.arrange(replica_slice(batch, worker * local + r, workers * local))
                    step += 1

            stream = tf.data.Dataset.from_generator(generate, output_signature=self.signature)
            return without_autotune(stream.prefetch(2))

        self.dataset = strategy.distribute_datasets_from_function(dataset_fn)
        return self.dataset


def shared_dataset(run, x, y, seed, *, poisson: bool):
    """``run.dataset(x, y)`` under ``MultiWorkerMirroredStrategy``: the shared global batches of all n checked
    records (``x`` float32), each worker's slice; ``seed`` is the shared secret sampling seed."""
    name = type(run).__name__
    words = seed_words(check_sampling_seed(seed, f"{name}.dataset"))
    x = np.ascontiguousarray(x, dtype=np.float32)
    y = np.ascontiguousarray(y)
    if poisson:  # each row tagged with the run and its step, as the run's own Poisson batches
        q, padded, run_id = run.sampling_probability, run.padded_batch_size, run.run_id
        shared = SharedBatches(lambda step: tagged_poisson_batch(x, y, q, padded, words, step, run_id),
                               run_signature(x, y), fingerprint("poisson", x, y, q, padded, words), run_element)
    else:
        batch_size, per_epoch, cache = run.batch_size, run.n // run.batch_size, {}
        shared = SharedBatches(lambda step: shuffled_batch(x, y, batch_size, per_epoch, words, step, cache),
                               (record_spec(x), record_spec(y)), fingerprint("shuffled", x, y, batch_size, words))
    run.shared_batches = shared
    return shared.distribute(run.multiworker)


def install_multiworker_fit(run, model, strategy) -> None:
    """Make ``model.fit`` join the workers and record the one release (chief only) before the first noisy step.

    ``model.fit`` then trains only on ``run.dataset(x, y, ...)`` (the shared batches) with one epoch =
    the run's steps per epoch; the train step refuses to be traced before that fit has started (so
    ``train_on_batch`` or a custom loop cannot train without the release).
    """
    name = type(run).__name__
    fit, inner = functools.partial(type(model).fit, model), model.train_step  # Keras's own fit, however wrapped
    run.training_started = False

    def train_step(data):
        if not run.training_started:  # at trace time
            model.train_function = None
            raise RuntimeError(
                f"under MultiWorkerMirroredStrategy a {name} trains through model.fit({name}.dataset(x, y, seed=...)): "
                "fit joins the workers and records the release before the first noisy step; train_on_batch or a "
                "custom loop would train without it"
            )
        logs = inner(data)
        if KERAS_3:  # Keras 3 reduces the logs under MultiWorkerMirroredStrategy by a MEAN over axis 0 (not scalars)
            logs = tf.nest.map_structure(lambda v: tf.reshape(v, [1]) if v.shape.rank == 0 else v, logs)
        return logs

    def dp_fit(x=None, y=None, *args, **kwargs):
        shared = getattr(run, "shared_batches", None)
        if shared is None or x is None or x is not shared.dataset or y is not None:
            raise ValueError(
                f"under MultiWorkerMirroredStrategy fit trains only on {name}.dataset(x, y, seed=...) (all n private "
                f"records, the shared global batches, each worker's slice), got x={type(x).__name__}, "
                f"y={type(y).__name__}; pass model.fit({name}.dataset(x_private, y_private, seed=SHARED_SECRET), "
                f"epochs={run.epochs}); nothing has been released"
            )
        allowed = sorted(run.allowed_steps_per_epoch())
        steps = kwargs.get("steps_per_epoch")
        if steps is None:
            kwargs["steps_per_epoch"] = allowed[0]
        elif steps not in allowed:
            raise ValueError(f"steps_per_epoch={steps!r}: one epoch of this {name} is {allowed[0]} steps over the n="
                             f"{run.n} records; drop steps_per_epoch (nothing has been released)")
        settings = fingerprint(name, run.n, run.batch_size, run.noise_multiplier, run.l2_norm_clip, run._divisor(),
                               run.steps, run.engine, run.path, shared.identity, strategy.num_replicas_in_sync)
        check_same_everywhere(strategy, settings, f"{name} fit")  # every worker is here: training starts now
        if run.release is None and is_chief(strategy):
            run._record_release()
        run.training_started = True
        shared.start = int(model.optimizer.iterations.numpy())
        return fit(x, y, *args, **kwargs)

    run.multiworker_fit = dp_fit
    if hasattr(model, "_maybe_symbolic_build"):  # Keras 3: build from this worker's first slice

        def symbolic_build(iterator=None, data_batch=None):
            # Keras 3's own version pulls a distributed batch and all-reduces it (MEAN), which fails under
            # MultiWorkerMirroredStrategy for these batches; the build needs the shapes only.
            shared = run.shared_batches
            local = replica_slice(shared.batch(shared.start), 0, strategy.num_replicas_in_sync)
            with strategy.scope():
                model._symbolic_build(data_batch=shared.arrange(tuple(tf.convert_to_tensor(a) for a in local)))

        model._maybe_symbolic_build = symbolic_build
    model.train_step = train_step
    model.train_function = None
    model.fit = dp_fit
