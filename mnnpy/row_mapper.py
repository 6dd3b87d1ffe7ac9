"""RowMapper: a batch of rows (one NumPy array per column) through one session, error per row.

The shape of batch jobs on data-parallel engines (Ray Data's ``map_batches``, a
``multiprocessing`` pool): a callable made once per worker from a ``SessionSpec`` and called
with batches of rows. ``mnnpy.ray.SessionMapper`` is this class on the GPU Ray assigned.

Rows and the model's batch dimension: a row of a column fed to input ``x`` of shape
``(N, C, H, W)`` is either a sample ``(C, H, W)`` (one rank less: rows of equal shapes are
stacked into runs of ``N`` rows where ``N`` is fixed, the last run padded with copies of its
last row and the padding's outputs dropped; of up to ``max_batch`` rows where ``N`` is
dynamic) or a whole input ``(N, C, H, W)`` (the same rank: run alone, its outputs kept as
they are). A row that cannot run (wrong shape or dtype, a run that raises) gets empty
outputs (shape ``(0,) * rank``) and its error text in the ``error`` column; the other rows
of its run are run again without it. Columns not fed to the model pass through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from mnnpy.errors import InputError

STACK, WHOLE = "stack", "whole"  # a row is one sample of a batch, or a whole input


def error_text(e: BaseException) -> str:
    """How a row's error reads in an ``error`` column: ``"InputError: ..."``."""
    return f"{type(e).__name__}: {e}"


def column_array(values: list[np.ndarray], dtype=None) -> np.ndarray:
    """Per-row arrays as one column: stacked ``(B, ...)`` where all shapes and dtypes agree,
    else a ``(B,)`` object array of the arrays (a ragged column)."""
    if values and len({(v.shape, v.dtype) for v in values}) == 1:
        return np.stack(values)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


class RowMapper:
    """``mapper(batch) -> batch``: ``{column: (B, ...) array}`` rows through one session.

    ``spec``: a ``mnnpy.SessionSpec`` (made into a Session here, on the GPU of ``gpu_ids``
    where given: ``SessionSpec.on_gpus``). ``inputs``: model input name -> column (default:
    columns named as the inputs); ``outputs``: the model outputs to keep, each as a column
    of its name (default all); ``max_batch``: rows per run where the batch dimension is
    dynamic. Output batch: the pass-through columns, one column per output (``(B, ...)``,
    or ``(B,)`` object where rows' shapes differ) and ``error`` (``(B,)`` str, ``""`` for rows
    that ran). ``InputError`` here for unknown names, and from a call for a batch that lacks
    an input column (every row would fail: a job's configuration, not a row's error).
    """

    def __init__(
        self,
        spec,
        inputs: Mapping[str, str] | None = None,
        outputs: Sequence[str] | None = None,
        max_batch: int = 32,
        gpu_ids: Sequence[int] = (),
    ):
        if not isinstance(max_batch, int) or max_batch < 1:
            raise InputError(f"max_batch must be a positive int, got {max_batch!r}")
        self.spec = spec.on_gpus(gpu_ids)
        interp = self.spec.interpreter()
        self.session = self.spec.create_session(interp)
        self.inputs = {d.name: d for d in interp.inputs}
        self.columns = dict(inputs) if inputs is not None else {n: n for n in self.inputs}
        self.output_descs = {d.name: d for d in interp.outputs}
        self.outputs = list(outputs) if outputs is not None else list(self.output_descs)
        unknown = [n for n in self.columns if n not in self.inputs] + [n for n in self.outputs if n not in self.output_descs]
        if unknown:
            raise InputError(
                f"no model input or output named {unknown[0]!r} (inputs {list(self.inputs)}, outputs {list(self.output_descs)})"
            )
        if set(self.columns) != set(self.inputs):
            raise InputError(
                f"inputs must map every model input to a column: {sorted(set(self.inputs) - set(self.columns))} missing"
            )
        self.max_batch = max_batch
        first = next(iter(self.inputs.values())).shape if self.inputs else None
        # the model's fixed batch dimension (the first input's), padded to; None where dynamic
        self.fixed_batch = first[0] if first and isinstance(first[0], int) and first[0] > 0 else None

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [c for c in self.columns.values() if c not in batch]
        if missing:
            raise InputError(f"the batch has no column {missing[0]!r} (its columns: {sorted(batch)})")
        n = len(next(iter(batch.values()))) if batch else 0
        results: list[dict[str, np.ndarray] | None] = [None] * n
        errors = [""] * n
        for rows, mode in self._runs(batch, n, errors):
            self._run(batch, rows, mode, results, errors)
        out = {c: np.asarray(v) for c, v in batch.items() if c not in self.columns.values()}
        for name in self.outputs:
            out[name] = column_array([r[name] if r is not None else self._empty(name, results) for r in results])
        out["error"] = np.array(errors, dtype=str)
        return out

    def _row(self, batch, name: str, i: int) -> np.ndarray:
        return np.asarray(batch[self.columns[name]][i])

    def _mode(self, name: str, row: np.ndarray) -> str:
        """STACK or WHOLE for a row of input ``name``; ``InputError`` for a rank that is neither."""
        shape = self.inputs[name].shape
        if shape is None or len(shape) == row.ndim:
            return WHOLE
        if len(shape) == row.ndim + 1:
            return STACK
        raise InputError(
            f"input {name!r} is {len(shape)}-D: a row must be {len(shape) - 1}-D (a sample) or {len(shape)}-D, not {row.shape}"
        )

    def _runs(self, batch, n: int, errors: list[str]):
        """``(row indices, mode)`` per run: rows of equal shapes and dtypes together, at most the run size."""
        groups: dict[tuple, list[int]] = {}
        for i in range(n):
            try:
                rows = {name: self._row(batch, name, i) for name in self.inputs}
                modes = {self._mode(name, r) for name, r in rows.items()}
            except (InputError, ValueError, TypeError) as e:
                errors[i] = error_text(e)
                continue
            mode = WHOLE if WHOLE in modes else STACK
            key = (mode, tuple((r.shape, r.dtype.str) for r in rows.values())) + ((i,) if mode == WHOLE else ())
            groups.setdefault(key, []).append(i)
        for key, rows in groups.items():
            size = (self.fixed_batch or self.max_batch) if key[0] == STACK else 1
            for start in range(0, len(rows), size):
                yield rows[start : start + size], key[0]

    def _run(self, batch, rows: list[int], mode: str, results: list, errors: list[str]) -> None:
        """One run of ``rows``; where it raises, each row alone, so that the error is the row's."""
        try:
            outs = self._outputs(batch, rows, mode)
        except Exception as e:  # noqa: BLE001 - a row's failure is reported with the row, never ends the job
            if len(rows) == 1:
                errors[rows[0]] = error_text(e)
                return
            for i in rows:
                self._run(batch, [i], mode, results, errors)
            return
        for i, o in zip(rows, outs):
            results[i] = o

    def _outputs(self, batch, rows: list[int], mode: str) -> list[dict[str, np.ndarray]]:
        """The kept outputs of each row of one run (padded to ``fixed_batch`` rows where the model has one)."""
        if mode == WHOLE:
            feeds = {name: self._row(batch, name, rows[0]) for name in self.inputs}
        else:
            picked = rows + [rows[-1]] * ((self.fixed_batch or len(rows)) - len(rows))
            feeds = {name: np.stack([self._row(batch, name, i) for i in picked]) for name in self.inputs}
        got = self.session.run(feeds)
        if mode == WHOLE:
            return [{name: np.array(got[name]) for name in self.outputs}]
        stacked = len(feeds[next(iter(feeds))])
        per_row = {name: np.asarray(got[name]) for name in self.outputs}
        return [
            {name: np.array(a[j]) if a.ndim and a.shape[0] == stacked else np.array(a) for name, a in per_row.items()}
            for j in range(len(rows))
        ]

    def _empty(self, name: str, results: list) -> np.ndarray:
        """A failed row's output ``name``: empty, of the rank and dtype the other rows' have."""
        like = next((r[name] for r in results if r is not None), None)
        if like is not None:
            return np.zeros((0,) * max(like.ndim, 1), like.dtype)
        desc = self.output_descs[name]
        return np.zeros((0,) * max(len(desc.shape or ()) - 1, 1), desc.dtype)
