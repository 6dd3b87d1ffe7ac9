"""silero-vad over rows of WAV paths: the voice-activity app as a batch job's row class.

``VadRows(spec, model, options, root)`` is made once per worker (here, a spawned process or a
Ray actor: ``mnnpy.apps.folder_job``) from a picklable ``mnnpy.SessionSpec`` of the export
(``vad_spec``) and maps batches ``{"path": (B,) str}`` (relative to ``root``) to
``{"path", "json"}``: one JSON object per file (``result_json``). A file that cannot be read
gets its error in its object, never ends the job. ``mnnpy vad DIR --out FILE`` runs it.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence

import numpy as np

from mnnpy import InputError, SessionSpec, models
from mnnpy.apps import folder_cli, folder_job, vad
from mnnpy.apps.wav import read_wav

SECONDS_DIGITS = 3  # segment bounds and lengths are written in seconds, rounded to ms


def vad_spec(model: str = vad.DEFAULT_MODEL, backend: str = "cpu", num_threads: int | None = 1) -> SessionSpec:
    """The ``SessionSpec`` of silero export ``model`` (converted here, once, into the cache).
    Raises ``InputError`` (an unknown export) or ``models.ModelFetchError``."""
    if model not in vad.MODEL_RATES:
        raise InputError(f"unknown silero-vad export {model!r}; choose one of {sorted(vad.MODEL_RATES)}")
    return SessionSpec(models.silero_mnnpy_path(model), backend, num_threads=num_threads)


def result_json(path: str, seconds: float | None, rate: int | None, segments, error: str | None = None) -> str:
    """One file's line: ``{"path", "seconds" (its length), "rate" (Hz), "segments": [[start,
    end], ...] (seconds, rounded to ms), "error": null or "Type: message"}``."""
    record = {
        "path": path,
        "seconds": None if seconds is None else round(seconds, SECONDS_DIGITS),
        "rate": rate,
        "segments": [[round(s, SECONDS_DIGITS), round(e, SECONDS_DIGITS)] for s, e in segments],
        "error": error,
    }
    return json.dumps(record)


class VadRows:
    """``rows(batch) -> batch``: the speech segments of each WAV file of ``batch["path"]``.

    ``spec``: ``vad_spec(model, ...)``; ``model``: that export's name (its rates); ``options``:
    ``vad.Rules`` fields (checked here); ``gpu_ids``: the GPUs a scheduler gave this worker.
    """

    COLUMNS = {"path": "string", "seconds": "float64", "rate": "int64", "segments": "string", "error": "string"}  # Parquet

    def __init__(self, spec: SessionSpec, model: str, options: Mapping, root: str, gpu_ids: Sequence[int] = ()):
        vad.Rules.of(dict(options))
        self.model, self.options, self.root = model, dict(options), root
        spec = spec.on_gpus(gpu_ids)
        interp = spec.interpreter()
        session = spec.create_session(interp)
        outs = [d.name for d in interp.outputs]
        self.runner = (lambda feeds: [session.run(feeds)[n] for n in outs]), [d.name for d in interp.inputs]
        self.detectors: dict[int, vad.Vad] = {}

    def _detector(self, sr: int) -> vad.Vad:
        """The stream detector at the model rate ``sr`` is read at (16 kHz unless the export takes ``sr``)."""
        rate = sr if sr in vad.MODEL_RATES[self.model] else 16000
        if rate not in self.detectors:
            self.detectors[rate] = vad.Vad(rate, self.model, runner=self.runner)
        return self.detectors[rate]

    def read(self, path: str) -> str:
        """One file's JSON line (``result_json``); its error, if any, inside, starting with the
        file's path, with the file's length and rate where it was read (a rate the app refuses)."""
        full, seconds, sr = os.path.join(self.root, path), None, None
        try:
            audio, sr = read_wav(full)
            seconds = len(audio) / sr if sr > 0 else None
            found = vad.speech_timestamps(audio, sr, vad=self._detector(sr), return_seconds=False, **self.options)
            return result_json(path, seconds, sr, [(s / sr, e / sr) for s, e in found])
        except Exception as e:  # noqa: BLE001 - a bad file is reported in its row; the job goes on
            text = str(e) if str(e).startswith(f"{full}: ") else f"{full}: {e}"  # read_wav's errors name it already
            return result_json(path, seconds, sr, [], f"{type(e).__name__}: {text}")

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        paths = [str(p) for p in batch["path"]]
        return {"path": np.array(paths, dtype=object), "json": np.array([self.read(p) for p in paths], dtype=object)}


def run_folder(args: argparse.Namespace, options: dict) -> int:
    """``mnnpy vad DIR --out FILE``: every ``.wav`` under DIR (recursively), one result per file
    (``result_json``) sorted by path, here or on Ray (``mnnpy.apps.folder_cli``); 0, or 1 where
    a file failed. ``InputError`` for a file with ``--out`` or a folder without, or bad options."""
    if not os.path.isdir(args.wav):
        raise InputError(f"--out writes the results of a folder; {args.wav} is not a folder")
    if args.out is None:
        raise InputError(f"{args.wav} is a folder: give --out results.jsonl (or .parquet)")
    if args.backend == "onnxruntime" or "," in args.backend:
        raise InputError("a folder runs on one mnnpy backend (cpu, opencl, vulkan), not onnxruntime or a list")
    args.threads = args.threads or 1
    folder_cli.check_job_arguments(args)
    paths = folder_job.list_inputs(args.wav, (".wav",))
    spec = vad_spec(args.model, args.backend, args.threads)
    return folder_cli.run_job(args, VadRows, (spec, args.model, options, str(args.wav)), paths, "file", spec)
