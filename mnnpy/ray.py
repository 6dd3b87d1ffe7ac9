"""Batch inference on Ray Data: sessions prepared in actors, one per device (``pip install "mnnpy[ray]"``).

Only this module imports Ray; ``import mnnpy`` never does. A Ray actor gets a picklable
``mnnpy.SessionSpec`` and makes its Session on its own device: the GPU Ray assigned it
(``num_gpus=1``; ``SessionSpec.on_gpus``), else the CPU.

>>> import ray, mnnpy, mnnpy.ray
>>> spec = mnnpy.SessionSpec("model.mnnpy", backend="cpu", num_threads=1)
>>> ds = ray.data.from_items([{"id": i, "x": x} for i, x in enumerate(samples)])  # x: (C, H, W) float32
>>> out = ds.map_batches(mnnpy.ray.SessionMapper, fn_constructor_args=(spec,),
...                      compute=ray.data.ActorPoolStrategy(size=2), batch_size=16)
>>> rows = out.take_all()  # each row: "id", one column per model output, "error" ("" when it ran)

``map_rows(ds, SessionMapper, spec, ...)`` does the same for any row class that takes
``gpu_ids`` (``RowMapper``, the OCR app's ``mnnpy.apps.ocr_rows.OcrRows``), sizing the actors'
CPUs and GPUs, after checking the class's arguments and the dataset here, before any actor
starts (``map_batches`` finds a mistake only in the actors). Actors that die (a crash,
a node lost) are restarted and their batches run again: Ray Data's actor pools have
``max_restarts=-1`` and retry tasks by default, and a retried batch's output is kept once.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence

import numpy as np

try:
    import pyarrow as pa
    import ray
    import ray.data
except ImportError as e:  # the optional extra is missing
    raise ImportError(f"mnnpy.ray needs Ray Data ({e}): pip install 'mnnpy[ray]'") from e

from mnnpy.errors import BackendUnavailableError, InputError, MnnpyError
from mnnpy.ray_address import checked_address, connect_error, probe
from mnnpy.row_mapper import RowMapper

MAX_WORKERS = 1024  # actors of one job (as the CLI's --workers): a larger pool waits on Ray's scheduler for minutes

__all__ = [
    "SessionMapper",
    "check_backend",
    "check_resources",
    "check_schema",
    "connect",
    "cpus_in_cluster",
    "gpus_in_cluster",
    "map_rows",
]


class SessionMapper(RowMapper):
    """``mnnpy.row_mapper.RowMapper`` in a Ray actor, on the GPU Ray assigned it (if any).

    For ``Dataset.map_batches(SessionMapper, fn_constructor_args=(spec,), ...)``;
    ``fn_constructor_kwargs`` take RowMapper's ``inputs``, ``outputs``, ``rows`` and
    ``max_batch``. A batch ``{column: (B, ...) array}`` gives the pass-through columns, one
    column per model output (each of one rank and dtype, so that Ray Data neither pads nor
    refuses it: a row of the wrong rank or dtype gets its error, never another shape) and
    ``error`` (``""`` where the row ran, else the error's type and message). Ray Data converts
    the input columns before this class sees them: rows of one column with different dtypes
    are cast to a common one within a block and stop the job where blocks of different dtypes
    meet in a batch; ``check_schema(ds)`` finds that before the job (``map_rows`` calls it).
    ``SessionMapper.check(spec, **options)`` (``RowMapper.check``) finds bad arguments in the
    driver, before actors start (``map_rows(ds, SessionMapper, spec, ...)`` calls it).
    """

    def __init__(self, spec, gpu_ids: Sequence[int] | None = None, **options):
        super().__init__(spec, gpu_ids=ray.get_gpu_ids() if gpu_ids is None else gpu_ids, **options)


def check_backend(spec, cpus_per_worker: float = 1, gpus_per_worker: float = 0) -> None:
    """``spec.check_backend()`` (``mnnpy.SessionSpec``) where an actor of these resources
    would run, in one Ray task before any actor starts: a backend that cannot run there is one
    ``BackendUnavailableError`` with the reason, not a traceback from every actor. It runs on
    the cluster, not here, because the driver's machine may lack the nodes' devices.
    ``InputError`` first where no node has the resources (``check_resources``): the task would
    wait for them forever."""
    check_resources(cpus_per_worker, gpus_per_worker)
    problem = ray.get(_backend_problem.options(num_cpus=cpus_per_worker, num_gpus=gpus_per_worker or None).remote(spec))
    if problem is not None:
        raise BackendUnavailableError(f"{problem} (checked on a node of the Ray cluster)")


@ray.remote
def _backend_problem(spec) -> str | None:
    """What ``check_backend`` finds on a node: the error's message, or None."""
    try:
        spec.on_gpus(ray.get_gpu_ids()).check_backend()
    except MnnpyError as e:
        return str(e)
    return None


def check_resources(cpus_per_worker: float = 1, gpus_per_worker: float = 0) -> None:
    """``InputError`` for CPU or GPU counts per actor that are not finite numbers (CPUs > 0,
    GPUs >= 0), or that no live node of the cluster has (``largest_node``): Ray would wait for
    such an actor or task forever, saying nothing."""
    numbers = all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (cpus_per_worker, gpus_per_worker)
    )
    if not numbers or gpus_per_worker < 0 or cpus_per_worker <= 0:
        raise InputError(f"cpus_per_worker must be > 0 and gpus_per_worker >= 0, got {cpus_per_worker!r}, {gpus_per_worker!r}")
    for kind, asked in (("CPU", cpus_per_worker), ("GPU", gpus_per_worker)):
        most = largest_node(kind)
        if asked > most:
            raise InputError(
                f"an actor asks for {asked:g} {kind}s, but the largest node of the Ray cluster has {most:g}:"
                f" ask for at most {most:g} (cpus_per_worker, gpus_per_worker; the CLI's --threads)"
            )


def check_schema(ds: ray.data.Dataset, columns: Sequence[str] = ()) -> None:
    """``InputError`` where ``ds`` is not a Ray Dataset, where its rows have no common schema
    (rows of one column with different dtypes, in different blocks: Ray Data would stop the
    job with an ``ArrowConversionError`` when it batches them together, before any mapper sees
    a row) or where the schema lacks one of ``columns`` (the columns a mapper reads). Looks
    only at the schema Ray already knows (``schema(fetch_if_missing=False)``: datasets made
    from items or arrays); runs nothing."""
    if not isinstance(ds, ray.data.Dataset):
        raise InputError(f"expected a ray.data.Dataset (e.g. ray.data.from_items(rows)), got {type(ds).__name__}")
    try:
        schema = ds.schema(fetch_if_missing=False)
    except (TypeError, ValueError, pa.ArrowException) as e:
        raise InputError(f"the dataset's rows have no common schema ({e}): give each column one dtype") from None
    missing = [c for c in columns if schema is not None and c not in schema.names]
    if missing:
        raise InputError(f"the dataset has no column {missing[0]!r} (its columns: {schema.names})")


def check_row_class(cls, args: tuple, kwargs: Mapping) -> Sequence[str]:
    """``InputError`` unless ``cls(*args, gpu_ids=..., **kwargs)`` can be called (``cls`` a row
    class taking those arguments) and ``cls.check(*args, **kwargs)``, where the class has one
    (``RowMapper.check``), passes; checked here, in the driver, so that a mistake is one error
    before the job, not a traceback from every actor. Returns the columns the rows must have
    (what ``check`` returns; none where it has no ``check``)."""
    if not isinstance(cls, type):
        raise InputError(f"map_rows takes a row class (RowMapper, SessionMapper, an app's), got {type(cls).__name__} {cls!r:.60}")
    check = getattr(cls, "check", None)
    try:
        inspect.signature(cls).bind(*args, gpu_ids=(), **kwargs)
        if check is not None:
            inspect.signature(check).bind(*args, **kwargs)
    except TypeError as e:
        raise InputError(f"{cls.__name__} does not take these arguments: {e}") from None
    return (check(*args, **kwargs) or ()) if check is not None else ()


class _OnAssignedDevice:
    """An actor's body: ``cls(*args, gpu_ids=<the actor's GPUs>, **kwargs)``, called per batch."""

    def __init__(self, cls, args, kwargs):
        self.rows = cls(*args, gpu_ids=ray.get_gpu_ids(), **kwargs)

    def __call__(self, batch: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        return self.rows(batch)


def map_rows(
    ds: ray.data.Dataset,
    cls,
    *args,
    workers: int = 1,
    gpus_per_worker: float = 0,
    cpus_per_worker: float = 1,
    batch_size: int = 8,
    **kwargs,
) -> ray.data.Dataset:
    """``ds`` mapped by ``workers`` actors, each holding ``cls(*args, gpu_ids=..., **kwargs)``.

    ``cls``: a row class (``batch -> batch`` of NumPy columns) that takes ``gpu_ids`` (the
    actor's GPUs, ``ray.get_gpu_ids()``): ``RowMapper`` or the apps' row classes. Each actor
    reserves ``cpus_per_worker`` CPUs and ``gpus_per_worker`` GPUs (0: none); batches of
    ``batch_size`` rows. Lazy, as Ray Data is: nothing runs until the result is consumed.
    Checked here, before any actor starts (``InputError``): ``ds`` (a Dataset whose rows have
    a common schema and the columns the mapper reads, ``check_schema``), ``cls`` and its
    arguments (``check_row_class``), counts out of range (``workers`` 1 to ``MAX_WORKERS``),
    CPU or GPU counts that are not finite numbers or that no node has (``check_resources``).
    """
    if not isinstance(ds, ray.data.Dataset):
        check_schema(ds)  # the error for what is not a Dataset
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise InputError(f"workers must be an int from 1 to {MAX_WORKERS}, got {workers!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a positive int, got {batch_size!r}")
    check_resources(cpus_per_worker, gpus_per_worker)
    check_schema(ds, check_row_class(cls, args, kwargs))
    return ds.map_batches(
        _OnAssignedDevice,
        fn_constructor_args=(cls, args, kwargs),
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=cpus_per_worker,
        num_gpus=gpus_per_worker or None,
        batch_size=batch_size,
        batch_format="numpy",
    )


def connect(address: str | None = None, num_cpus: int | None = None) -> None:
    """Join the Ray cluster at ``address`` (``"host:6379"``, ``"auto"``, ``"ray://host:10001"``),
    or, without one, start a new local cluster for this process (``num_cpus``: its CPUs, default
    all; never one already running here, whatever ``RAY_ADDRESS`` says); nothing when Ray is
    initialised already. Ray Data's own progress bars are turned off (the apps draw one bar).
    ``InputError`` within about 5 s where no cluster answers at ``address``
    (``mnnpy.ray_address.probe``), for a web address (the dashboard's) and where Ray refuses,
    with what to do and Ray's cause (``connect_error``: token authentication, no cluster for
    ``"auto"``). Whatever Ray started is stopped where it fails or is interrupted (Ctrl-C)."""
    if not ray.is_initialized():
        address = checked_address(address)
        probe(address)
        try:
            cpus = None if address else num_cpus  # "local": a new cluster, never one running here
            ray.init(address=address or "local", num_cpus=cpus, include_dashboard=False, log_to_driver=False)
        except BaseException as e:
            ray.shutdown()  # what Ray started before it failed (its agents, a half-made local cluster)
            if isinstance(e, Exception):
                raise InputError(connect_error(address, e)) from None
            raise
    ray.data.DataContext.get_current().enable_progress_bars = False


def gpus_in_cluster() -> int:
    """How many GPUs the cluster has (Ray's ``GPU`` resource): 0 on a machine without one."""
    return int(ray.cluster_resources().get("GPU", 0))


def largest_node(resource: str) -> float:
    """The most of ``resource`` (``"CPU"``, ``"GPU"``) that one live node of the cluster has."""
    return max((n["Resources"].get(resource, 0) for n in ray.nodes() if n.get("Alive")), default=0)


def cpus_in_cluster() -> int:
    """How many CPUs the cluster has (Ray's ``CPU`` resource), at least 1."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))
