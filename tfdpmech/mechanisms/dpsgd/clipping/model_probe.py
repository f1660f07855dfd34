"""What a model's training forward pass does with a batch, found on a probe batch before any release.

Per-example clipping bounds one record's influence only when every record's output and gradient
depend on that record alone. Two things break that whatever the layer list says, and both are found
here by running the model itself, in training mode, on small synthetic batches (never the private
records), before :meth:`~tfdpmech.mechanisms.dpsgd.DPSGDRun.compile` records anything:

* **state from the batch**: a variable that the forward pass sets from the batch's values (the moving
  statistics of ``BatchNormalization`` at any depth, in ``TimeDistributed``, in a custom layer or a
  ``Lambda``). Two probe batches that differ in one record must leave every variable equal;
  data-independent updates (the seed state of a dropout layer, a call counter) do. A forward pass that
  assigns a *trainable* variable is refused too: each per-record pass would assign it again.
* **records that mix**: the output of record j must not change when record i ≠ j changes (``CutMix``,
  ``MixUp``, a ``Lambda`` subtracting the batch mean). Randomness is replayed between the probe passes
  by restoring every variable (Keras 3 seed generators live there); a model whose training pass stays
  random after that (Keras 2 dropout) is compared in inference mode instead.

Every variable is restored afterwards: the probe changes nothing in the user's model.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

__all__ = ["PROBE_ROWS", "probe_inputs", "batch_dependence"]

PROBE_ROWS = 4


def _input_specs(model):
    """``[(shape without the batch axis, dtype name)]`` of the model's inputs, or None when unknown."""
    inputs = getattr(model, "inputs", None)
    if inputs:
        return [(tuple(t.shape[1:]), getattr(t.dtype, "name", t.dtype)) for t in inputs]
    shapes = getattr(model, "_build_shapes_dict", None)  # Keras 3, built by build() or a first call
    if isinstance(shapes, dict) and len(shapes) == 1:
        shape = next(iter(shapes.values()))
        return [(tuple(shape[1:]), "float32")] if shape is not None else None
    shape = getattr(model, "_build_input_shape", None)  # Keras 2
    if hasattr(shape, "as_list") or isinstance(shape, (tuple, list)):
        dims = shape.as_list() if hasattr(shape, "as_list") else list(shape)
        if dims and all(d is None or isinstance(d, int) for d in dims):
            return [(tuple(dims[1:]), "float32")]
    return None


_FREE_DIM = 5  # the length of a probe sequence where the model takes any length


def _probe_array(shape, dtype: str, rows: int, rng) -> np.ndarray | None:
    shape = tuple(_FREE_DIM if d is None else int(d) for d in shape)
    dtype = str(dtype)
    if "int" in dtype or "bool" in dtype:
        values = rng.integers(0, 2, size=(rows,) + shape)
        values.reshape(rows, -1)[:, :1] = 1  # no probe record is all zeros (an all-masked sequence)
        return values.astype(dtype)
    if "float" in dtype:
        return rng.random((rows,) + shape).astype(dtype)
    return None


def probe_inputs(model, rows: int = PROBE_ROWS, seed: int = 0):
    """A synthetic batch of ``rows`` records for ``model`` (floats in [0, 1), ids in {0, 1}; free lengths 5),
    or None when the input shapes or dtypes are unknown (an unbuilt subclassed model, string inputs)."""
    specs = _input_specs(model)
    if not specs:
        return None
    rng = np.random.default_rng(seed)
    arrays = [_probe_array(shape, dtype, rows, rng) for shape, dtype in specs]
    if any(a is None for a in arrays):
        return None
    # the structure the model was built with (a functional model of [x] takes a list); Keras 3, then Keras 2
    structure = getattr(model, "_inputs_struct", None)
    if structure is None:
        structure = getattr(model, "_nested_inputs", None)
    if isinstance(structure, (list, tuple, dict)) and len(tf.nest.flatten(structure)) == len(arrays):
        return tf.nest.pack_sequence_as(structure, arrays)
    return arrays[0] if len(arrays) == 1 else arrays


def _owners(model) -> dict:
    names = {}
    for layer in model._flatten_layers(include_self=True, recursive=True):  # both Keras 2.15 and 3
        for v in layer.variables:
            names[id(v)] = f"{v.name} of layer {layer.name!r} ({type(layer).__name__})"  # the innermost owner
    return names


def _unique_variables(model):
    seen, out = set(), []
    for v in model.variables:
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


def _replace_row(a, b, i: int):
    """Batch ``a`` with its record ``i`` taken from batch ``b`` (any input structure)."""
    def replace(t, u):
        t = np.array(t, copy=True)
        t[i] = u[i]
        return t
    return tf.nest.map_structure(replace, a, b)


def _same(a, b) -> bool:
    return np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)


def batch_dependence(model) -> str | None:
    """Why ``model``'s training forward pass depends on the batch beyond each record, or None when it does not.

    Returns a sentence naming the variable updated from the batch, the trainable variable the forward pass
    assigns, or the output rows that change with another record; None when none of these happens (or
    when the model's inputs cannot be synthesised: see :func:`probe_inputs`).
    """
    base, other = probe_inputs(model, seed=0), probe_inputs(model, seed=1)
    if base is None:
        return None
    variables = _unique_variables(model)
    start = [v.numpy() for v in variables]

    def restore():
        for v, value in zip(variables, start):
            v.assign(value)

    def run(batch, training=True):
        restore()
        out = [np.asarray(o) for o in tf.nest.flatten(model(batch, training=training))]
        return out, [v.numpy() for v in variables]

    try:
        return _dependence(model, variables, start, run, base, other)
    except Exception as exc:  # pylint: disable=broad-except  (any layer's error: reported, the model refused)
        return (f"its training forward pass could not run on a probe batch of {PROBE_ROWS} synthetic records "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}), so it could not be checked")
    finally:
        restore()


def _dependence(model, variables, start, run, base, other) -> str | None:
    """:func:`batch_dependence` once the probe batches and the variables' starting values are known."""
    out, state = run(base)
    owners = _owners(model)
    trainable = {id(v) for v in model.trainable_variables}
    assigned = [owners.get(id(v), v.name) for v, s0, s1 in zip(variables, start, state)
                if id(v) in trainable and not _same(s0, s1)]
    if assigned:
        return (f"its training forward pass assigns the trainable variable(s) {', '.join(assigned)}; per-example "
                "gradients would each see another value")
    training = all(_same(a, b) for a, b in zip(out, run(base)[0]))  # random beyond the restored state?
    if not training:
        out = run(base, training=False)[0]
    for i in range(PROBE_ROWS):
        changed = _replace_row(base, other, i)
        out_i, state_i = run(changed)
        # data-independent updates (a seed, a counter) are the same bit for bit
        moved = [owners.get(id(v), v.name) for v, s, s_i in zip(variables, state, state_i)
                 if not np.array_equal(s, s_i, equal_nan=True)]
        if moved:
            return (f"its training forward pass updates {', '.join(moved)} from the batch's values (as "
                    "BatchNormalization's moving statistics do), which no clipping bounds")
        if not training:
            out_i = run(changed, training=False)[0]
        rows = [j for j in range(PROBE_ROWS) if j != i]
        if not all(_same(a[rows], b[rows]) for a, b in zip(out, out_i)):
            return ("the output of a record changes when another record of the batch changes: its layers mix the "
                    "records of a batch, so per-example clipping does not bound one record's influence")
    return None
