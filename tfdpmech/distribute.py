"""``tf.distribute`` strategies the private methods accept, and which task releases.

The functional head (:mod:`tfdpmech.mechanisms.functional_head.streaming`) and tfdpmech's DP-SGD engine
(:mod:`tfdpmech.mechanisms.dpsgd.runs.train_step`) sum per-record quantities on synchronous replicas, all-reduce
the sums (``ReduceOp.SUM``) and add the noise **once**: the head on the chief after the pass, DP-SGD on
replica 0 of every step. That is what Mirrored / MultiWorkerMirrored / OneDevice strategies do;
TPU, parameter-server and central-storage strategies place and reduce differently and are refused.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["SUPPORTED_STRATEGIES", "check_strategy", "is_chief", "strategy_of"]

SUPPORTED_STRATEGIES = ("MirroredStrategy", "MultiWorkerMirroredStrategy", "OneDeviceStrategy")


def check_strategy(strategy, what: str = "FunctionalHead.fit"):
    """The strategy to run under (None: one process, no strategy), refused when it is not supported.

    Args:
        strategy: a ``tf.distribute.Strategy`` or None (then the ambient one, if a ``strategy.scope()``
            is open).

    Returns:
        None for the default (no) strategy, else the strategy.

    Raises:
        TypeError: not a ``tf.distribute.Strategy``.
        ValueError: a strategy other than Mirrored / MultiWorkerMirrored / OneDevice (TPU, parameter
            server, central storage): their reduction and placement are not the one-sum, one-release
            scheme these methods are proven for.
    """
    if strategy is None:
        if not tf.distribute.has_strategy():
            return None
        strategy = tf.distribute.get_strategy()
    if not isinstance(strategy, tf.distribute.Strategy):
        raise TypeError(f"strategy must be a tf.distribute.Strategy or None, got {type(strategy).__name__}")
    if isinstance(strategy, (tf.distribute.MirroredStrategy, tf.distribute.MultiWorkerMirroredStrategy,
                             tf.distribute.OneDeviceStrategy)):
        return strategy
    raise ValueError(
        f"{what} does not support strategy={type(strategy).__name__}: the private sums are all-reduced (SUM) across "
        "synchronous replicas and released once by the chief, which is what "
        f"{', '.join(SUPPORTED_STRATEGIES)} do. Pass strategy=tf.distribute.MirroredStrategy() (several devices "
        "of one machine) or tf.distribute.MultiWorkerMirroredStrategy() (several machines), or no strategy"
    )


def is_chief(strategy) -> bool:
    """Whether this task is the chief (the one that releases): ``chief``, or worker 0 of a cluster without one."""
    resolver = getattr(strategy, "cluster_resolver", None) if strategy is not None else None
    if resolver is None:
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None:
        return True
    if task_type == "chief":
        return True
    cluster = resolver.cluster_spec().as_dict()
    return task_type == "worker" and int(task_id or 0) == 0 and "chief" not in cluster


def strategy_of(model):
    """The strategy a Keras model runs under: the open ``strategy.scope()``, else the one it was built in
    (None for the default strategy)."""
    if tf.distribute.has_strategy():
        return tf.distribute.get_strategy()
    own = getattr(model, "distribute_strategy", None)
    if own is None or own is tf.distribute.get_strategy():
        return None
    return own
