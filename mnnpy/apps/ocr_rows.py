"""PP-OCR over rows of image paths: the OCR app as a batch job's row class (local or on Ray).

``OcrRows(specs, root)`` is made once per worker (in this process, a spawned process or a
Ray actor: ``mnnpy.apps.folder_job``) from picklable ``mnnpy.SessionSpec``s (``ocr_specs``)
and maps batches ``{"path": (B,) str}`` (paths relative to ``root``) to
``{"path": (B,) str, "json": (B,) str}``: one JSON object per image, ``result_json``'s. An
image that cannot be read or run gets its error in the object, never ends the job.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence

import numpy as np

from mnnpy import SessionSpec, models
from mnnpy.apps import ocr

SCORE_DIGITS = 4  # scores are written rounded to this many decimals


def ocr_specs(backend: str = "cpu", precision: str = "normal", num_threads: int | None = 1, use_cls: bool = True) -> dict:
    """``{"det", "rec"[, "cls"]: SessionSpec}`` of the PP-OCRv4 models (fetched and converted
    here, once, into the cache). Raises ``models.ModelFetchError`` or ``InputError``."""
    kinds = ("det", "rec", "cls") if use_cls else ("det", "rec")
    return {k: SessionSpec(models.ocr_mnnpy_path(k), backend, precision, num_threads) for k in kinds}


def _runner(spec: SessionSpec):
    """``(x -> y, metadata)`` of a single-input, single-output model's Session made from ``spec``."""
    interp = spec.interpreter()
    session = spec.create_session(interp)
    name, out = interp.inputs[0].name, interp.outputs[0].name
    return (lambda x: session.run({name: x})[out]), interp.metadata


def result_json(path: str, result: ocr.OcrResult | None, error: str | None = None) -> str:
    """One image's line: ``{"path", "text" (lines joined by newlines), "lines": [{"text",
    "score" (mean character probability, rounded to SCORE_DIGITS), "box": [x0, y0, x1, y1]
    (pixels)}], "error": null or "Type: message"}``; keys in that order, ASCII only."""
    lines = [] if result is None else result.lines
    record = {
        "path": path,
        "text": "" if result is None else result.text,
        "lines": [{"text": t, "score": round(s, SCORE_DIGITS), "box": [int(v) for v in b]} for t, s, b in lines],
        "error": error,
    }
    return json.dumps(record)


class OcrRows:
    """``rows(batch) -> batch``: each image of ``batch["path"]`` (relative to ``root``) read by PP-OCR.

    ``specs``: ``ocr_specs(...)``; ``gpu_ids``: the GPUs a scheduler gave this worker (the
    sessions move there, ``SessionSpec.on_gpus``). Sessions are made here, once.
    """

    COLUMNS = {"path": "string", "text": "string", "lines": "string", "error": "string"}  # Parquet: result_json's keys

    def __init__(self, specs: Mapping[str, SessionSpec], root: str, gpu_ids: Sequence[int] = ()):
        self.root = root
        self.det, _ = _runner(specs["det"].on_gpus(gpu_ids))
        self.rec, meta = _runner(specs["rec"].on_gpus(gpu_ids))
        self.cls = _runner(specs["cls"].on_gpus(gpu_ids))[0] if "cls" in specs else None
        if "character" not in meta:
            raise models.ModelFetchError("the recognition model has no 'character' metadata")
        self.alphabet = ocr.ctc_alphabet(meta["character"])

    def read(self, path: str) -> str:
        """One image's JSON line (``result_json``); its error, if any, inside."""
        try:
            image = ocr.load_image(os.path.join(self.root, path))
            return result_json(path, ocr.read_text(image, self.det, self.rec, self.alphabet, self.cls))
        except Exception as e:  # noqa: BLE001 - a bad image is reported in its row; the job goes on
            return result_json(path, None, f"{type(e).__name__}: {e}")

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        paths = [str(p) for p in batch["path"]]
        return {"path": np.array(paths, dtype=object), "json": np.array([self.read(p) for p in paths], dtype=object)}
