"""RowMapper: a batch of rows (one NumPy array per column) through one session, error per row.

The shape of batch jobs on data-parallel engines (Ray Data's ``map_batches``, a
``multiprocessing`` pool): a callable made once per worker from a ``SessionSpec`` and called
with batches of rows. ``mnnpy.ray.SessionMapper`` is this class on the GPU Ray assigned.

Rows and the model's batch dimension, one kind per job (``rows=``): with ``"sample"`` (the
default) a row of a column fed to input ``x`` of shape ``(N, C, H, W)`` is one sample
``(C, H, W)``: rows of equal shapes are stacked into runs of ``N`` rows where ``N`` is fixed,
the last run padded with copies of its last row and the padding's outputs dropped, of up to
``max_batch`` rows where ``N`` is dynamic; each output's first axis is split back into rows.
With ``"whole"`` a row is a whole input ``(N, C, H, W)``, run alone, its outputs kept as
they are.

Every row of an output column has the same rank and dtype, whichever run, batch or worker
made it: Ray Data stores a column of one rank as a tensor column, pads rows of lower rank with
leading 1-axes where ranks differ, and stops the job where dtypes differ. So a row of the
wrong rank is an error, never a row run another way; a row that cannot run (wrong rank,
shape or dtype, a run that raises) gets the rank's empty output (``(0,) * rank``; for a
scalar per row, NaN where the output is floating point, else 0) and its error text in the
``error`` column; the other rows of its run are run again without it. Columns not fed to the
model pass through.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from mnnpy.errors import InputError, MnnpyError

SAMPLE, WHOLE = "sample", "whole"  # a row is one sample of a batch, or a whole input


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


def _check_options(spec, inputs, outputs, max_batch, rows) -> None:
    """``InputError`` for RowMapper's arguments of the wrong kind or out of range."""
    from mnnpy.session_spec import SessionSpec

    if not isinstance(spec, SessionSpec):
        raise InputError(f"RowMapper takes a mnnpy.SessionSpec (e.g. SessionSpec('model.mnnpy')), got {spec!r:.80}")
    if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
        raise InputError(f"max_batch must be a positive int, got {max_batch!r}")
    if rows not in (SAMPLE, WHOLE):
        raise InputError(f"rows must be {SAMPLE!r} (a row is one sample) or {WHOLE!r} (a whole input), got {rows!r}")
    if inputs is not None and not (isinstance(inputs, Mapping) and all(isinstance(x, str) for kv in inputs.items() for x in kv)):
        raise InputError(f"inputs must map model input names to column names, e.g. {{'x': 'image'}}, got {inputs!r:.80}")
    if outputs is not None and (isinstance(outputs, str) or not isinstance(outputs, Sequence)):
        raise InputError(f"outputs must be a list of model output names, e.g. ['y'], got {outputs!r:.80}")


def _check_names(interp, inputs, outputs, rows) -> dict[str, str]:
    """``{model input: column}`` for RowMapper's ``inputs``; ``InputError`` for names the model
    (``interp``) does not have, a model input without a column, or a scalar input with rows of samples."""
    names, out_names = [d.name for d in interp.inputs], [d.name for d in interp.outputs]
    columns = dict(inputs) if inputs is not None else {n: n for n in names}
    unknown = [n for n in columns if n not in names] + [n for n in (outputs or ()) if n not in out_names]
    if unknown:
        raise InputError(f"no model input or output named {unknown[0]!r} (inputs {names}, outputs {out_names})")
    if set(columns) != set(names):
        raise InputError(f"inputs must map every model input to a column: {sorted(set(names) - set(columns))} missing")
    scalars = [d.name for d in interp.inputs if d.shape is not None and not d.shape]
    if rows == SAMPLE and scalars:
        raise InputError(f"input {scalars[0]!r} is a scalar: it has no batch axis to stack samples on; give rows='whole'")
    return columns


class RowMapper:
    """``mapper(batch) -> batch``: ``{column: (B, ...) array}`` rows through one session.

    ``spec``: a ``mnnpy.SessionSpec`` (made into a Session here, on the GPU of ``gpu_ids``
    where given: ``SessionSpec.on_gpus``). ``inputs``: model input name -> column (default:
    columns named as the inputs); ``outputs``: the model outputs to keep, each as a column
    of its name (default all); ``rows``: ``"sample"`` (a row is one sample, one rank below
    the input; every kept output must have the batch axis first) or ``"whole"`` (a row is a
    whole input); ``max_batch``: rows per run where the batch dimension is dynamic. Output
    batch: the pass-through columns, one column per output (``(B, ...)``, or ``(B,)`` object
    where rows' shapes differ; one rank and dtype per column) and ``error`` (``(B,)`` str,
    ``""`` for rows that ran). ``InputError`` here for a ``spec`` that is not a
    ``SessionSpec``, unknown names or options (``check``: the same without a Session); a batch
    that lacks an input column gets that error in every row.
    """

    def __init__(
        self,
        spec,
        inputs: Mapping[str, str] | None = None,
        outputs: Sequence[str] | None = None,
        max_batch: int = 32,
        gpu_ids: Sequence[int] = (),
        rows: str = SAMPLE,
    ):
        _check_options(spec, inputs, outputs, max_batch, rows)
        self.spec = spec.on_gpus(gpu_ids)
        interp = self.spec.interpreter()
        self.session = self.spec.create_session(interp)
        self.inputs = {d.name: d for d in interp.inputs}
        self.output_descs = {d.name: d for d in interp.outputs}
        self.columns = _check_names(interp, inputs, outputs, rows)
        self.outputs = list(outputs) if outputs is not None else list(self.output_descs)
        self.max_batch, self.rows = max_batch, rows
        first = next(iter(self.inputs.values())).shape if self.inputs else None
        # the model's fixed batch dimension (the first input's), padded to; None where dynamic
        self.fixed_batch = first[0] if rows == SAMPLE and first and isinstance(first[0], int) and first[0] > 0 else None
        self.ranks = self._planned_ranks()

    @classmethod
    def check(
        cls,
        spec,
        inputs: Mapping[str, str] | None = None,
        outputs: Sequence[str] | None = None,
        max_batch: int = 32,
        rows: str = SAMPLE,
    ) -> list[str] | None:
        """What the constructor would refuse (``InputError``), checked without making a Session:
        a job's driver calls it before its workers start (``mnnpy.ray.map_rows`` does). The
        model's input and output names are checked where the model can be read here (its bytes,
        or a path that exists here; on a cluster it may be only on the nodes). Returns the
        columns a batch must have (the ``inputs`` columns), or None where not known here."""
        _check_options(spec, inputs, outputs, max_batch, rows)
        if not isinstance(spec.model, bytes) and not os.path.isfile(spec.model):
            return None if inputs is None else list(inputs.values())
        return list(_check_names(spec.interpreter(), inputs, outputs, rows).values())

    def _planned_ranks(self) -> dict[str, int | None]:
        """Each kept output's rank per row, from the output shapes the session plans for the
        declared input shapes (dynamic dims 1); None where not known before a run (shapes
        computed from input values), then learned from the first run."""
        less = 1 if self.rows == SAMPLE else 0
        try:
            try:
                shapes = self.session.output_shapes  # planned when the session was made (static shapes)
            except InputError:
                self.session.resize({n: tuple(s if isinstance(s, int) else 1 for s in d.shape) for n, d in self.inputs.items()})
                shapes = self.session.output_shapes
        except (MnnpyError, TypeError):  # an input of unknown rank (shape None), a shape the model refuses
            return dict.fromkeys(self.outputs)
        return {n: max(len(shapes[n]) - less, 0) for n in self.outputs}

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        n = len(next(iter(batch.values()))) if batch else 0
        results: list[dict[str, np.ndarray] | None] = [None] * n
        missing = [c for c in self.columns.values() if c not in batch]
        if missing:  # every row's error, the job goes on
            errors = [error_text(InputError(f"the batch has no column {missing[0]!r} (its columns: {sorted(batch)})"))] * n
        else:
            errors = [""] * n
            for rows in self._runs(batch, n, errors):
                self._run(batch, rows, results, errors)
        out = {c: np.asarray(v) for c, v in batch.items() if c not in self.columns.values()}
        for name in self.outputs:
            out[name] = column_array([r[name] if r is not None else self._empty(name) for r in results])
        out["error"] = np.array(errors, dtype=str)
        return out

    def _row(self, batch, name: str, i: int) -> np.ndarray:
        return np.asarray(batch[self.columns[name]][i])

    def _check_rank(self, name: str, row: np.ndarray) -> None:
        """``InputError`` unless ``row`` has the rank a row of input ``name`` has for ``self.rows``."""
        shape = self.inputs[name].shape
        want = None if shape is None else len(shape) - (1 if self.rows == SAMPLE else 0)
        if want is not None and row.ndim != want:
            kind = "samples" if self.rows == SAMPLE else "whole inputs"
            raise InputError(
                f"input {name!r} {tuple(shape)}: rows are {kind} ({want}-D), got a row of shape {row.shape}"
                " (Ray Data pads the rows of a column to the highest rank among them: keep one rank per column)"
            )

    def _runs(self, batch, n: int, errors: list[str]):
        """Row indices per run: rows of equal shapes and dtypes together, at most the run size."""
        groups: dict[tuple, list[int]] = {}
        for i in range(n):
            try:
                rows = {name: self._row(batch, name, i) for name in self.inputs}
                for name, r in rows.items():
                    self._check_rank(name, r)
            except (InputError, ValueError, TypeError) as e:
                errors[i] = error_text(e)
                continue
            key = tuple((r.shape, r.dtype.str) for r in rows.values()) + ((i,) if self.rows == WHOLE else ())
            groups.setdefault(key, []).append(i)
        size = (self.fixed_batch or self.max_batch) if self.rows == SAMPLE else 1
        for rows in groups.values():
            for start in range(0, len(rows), size):
                yield rows[start : start + size]

    def _run(self, batch, rows: list[int], results: list, errors: list[str]) -> None:
        """One run of ``rows``; where it raises, each row alone, so that the error is the row's."""
        try:
            outs = self._outputs(batch, rows)
        except Exception as e:  # noqa: BLE001 - a row's failure is reported with the row, never ends the job
            if len(rows) == 1:
                errors[rows[0]] = error_text(e)
                return
            for i in rows:
                self._run(batch, [i], results, errors)
            return
        for i, o in zip(rows, outs):
            results[i] = o

    def _outputs(self, batch, rows: list[int]) -> list[dict[str, np.ndarray]]:
        """The kept outputs of each row of one run (padded to ``fixed_batch`` rows where the
        model has one); ``InputError`` for an output that cannot be split into the rows or
        whose rank differs from the column's."""
        if self.rows == WHOLE:
            got = self.session.run({name: self._row(batch, name, rows[0]) for name in self.inputs})
            per_row = [{name: np.array(got[name]) for name in self.outputs}]
        else:
            picked = rows + [rows[-1]] * ((self.fixed_batch or len(rows)) - len(rows))
            got = self.session.run({name: np.stack([self._row(batch, name, i) for i in picked]) for name in self.inputs})
            stacked = {name: np.asarray(got[name]) for name in self.outputs}
            for name, a in stacked.items():
                if a.ndim == 0 or a.shape[0] != len(picked):
                    raise InputError(
                        f"output {name!r} {a.shape} has no batch axis for {len(picked)} stacked rows:"
                        " leave it out (outputs=[...]) or run whole inputs (rows='whole')"
                    )
            per_row = [{name: np.array(a[j]) for name, a in stacked.items()} for j in range(len(rows))]
        for name in self.outputs:
            self._check_output_rank(name, per_row[0][name].ndim)
        return per_row

    def _check_output_rank(self, name: str, ndim: int) -> None:
        """Learn the rank of output ``name`` per row, or ``InputError`` where a row's differs."""
        if self.ranks[name] is None:
            self.ranks[name] = ndim
        elif ndim != self.ranks[name]:
            raise InputError(f"output {name!r} is {ndim}-D for this row, {self.ranks[name]}-D for the others of its column")

    def _empty(self, name: str) -> np.ndarray:
        """A failed row's output ``name``: of the column's rank and the output's dtype, empty;
        a scalar per row is NaN (floating point) or 0."""
        rank, dtype = self.ranks[name], self.output_descs[name].dtype
        if rank == 0:
            return np.full((), np.nan if np.issubdtype(dtype, np.floating) else 0, dtype)
        return np.zeros((0,) * (rank or 1), dtype)
