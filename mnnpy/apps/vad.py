r"""Voice-activity detection with silero-vad: streaming speech probabilities and speech segments.

    from mnnpy.apps import vad
    audio, sr = vad.read_wav("speech.wav")                # float32 samples in [-1, 1), Hz
    for seg in vad.speech_timestamps(audio, sr, backend="onnxruntime", return_seconds=True):
        print(seg.start, seg.end)                          # seconds

    detector = vad.Vad(sr=16000, backend="cpu", model="silero_vad.onnx")
    p = detector(chunk)                                    # chunk: 512 samples -> speech probability

The same pipeline runs on any mnnpy backend (``"cpu"``, ``"opencl"``, ``"vulkan"``,
``"auto"``) or on ``"onnxruntime"``, the reference. The models come from the
``silero-vad==6.2.3`` wheel (``mnnpy.models.silero_model_path``), converted to ``.mnnpy``
on first use for mnnpy backends (``mnnpy.models.silero_mnnpy_path``, cached); every export
runs on every mnnpy backend (the nested ``If``\ s of ``silero_vad.onnx`` included).
``mnnpy vad FILE.wav`` is the command-line form (``add_arguments``/``run`` here).

**The six exports** (read with onnx 1.23 and run with onnxruntime 1.32; none uses Loop, Scan
or sequence-typed values):

| export | opset | interface | rates (Hz) | If | other ops of note |
| --- | --- | --- | --- | --- | --- |
| ``silero_vad.onnx`` | 16 | S | 8000, 16000 | 25, nested 4 deep | LSTM x4; the outer If (``sr == 16000``) picks the weights |
| ``silero_vad_16k_op15.onnx`` | 15 | S | 16000 | 12, 3 deep, on shapes | LSTM x2; ``sr`` only in ``stateN + sr * 0`` |
| ``silero_vad_half.onnx`` | 16 | S without ``sr`` | 16000 | 12, 3 deep, on shapes | LSTM x2; float32 throughout (below) |
| ``silero_vad_op18_ifless.onnx`` | 18 | S | 8000, 16000 | 1, on ``sr`` | LSTM unrolled (Gemm, Sigmoid, Tanh, Mul) |
| ``silero_vad_openvino_16k.onnx`` | 16 | S without ``sr``, B = 1 | 16000 | none | LSTM x1; ``input`` static ``(1, 576)`` |
| ``silero_vad_16k_sequence.onnx`` | 16 | Q | 16000 | none | LSTM x1 over the T chunks of one run |

- S: ``input (B, C + W) float32, state (2, B, 128) float32, sr () int64`` ->
  ``output (B, 1) float32`` (the speech probability), ``stateN (2, B, 128) float32``.
- Q: ``input (T, C + W) float32, h (1, 1, 128) float32, c (1, 1, 128) float32`` ->
  ``speech_probs (T,) float32, hn (1, 1, 128) float32, cn (1, 1, 128) float32``: T
  consecutive chunks in one run, ``h`` and ``c`` being ``state[0]`` and ``state[1]``.
- The If conditions of op15 and half test shapes (exported ``squeeze`` calls), not data.
- ``silero_vad_half.onnx``, despite its name, has float32 inputs, outputs and weights (1% of
  them representable in fp16, as for the other exports); its weights differ from the other
  exports' (another training), so its probabilities differ from theirs (by up to 0.09 on
  random audio). The other five give the same probabilities (within 1e-7) on the same 16 kHz chunks.

``W`` is the window (512 samples at 16 kHz, 256 at 8 kHz: 32 ms) and ``C`` the context (64
samples at 16 kHz, 32 at 8 kHz): each chunk is fed after the last ``C`` samples of the
previous chunk (zeros before the first), and the state is fed back from the previous run.

**Segments** follow the rules of silero's ``get_speech_timestamps`` (silero-vad 6.2.3,
re-implemented in ``timestamps_from_probabilities``; its options, with silero's names and
defaults, are the fields of ``Rules``): a window whose probability is
``>= threshold`` starts speech; inside speech a window below ``neg_threshold`` (default
``max(threshold - 0.15, 0.01)``) starts a possible end, which becomes the end once it has
lasted ``min_silence_duration_ms`` (a window ``>= threshold`` cancels it); segments of
``min_speech_duration_ms`` or less are dropped; a segment longer than
``max_speech_duration_s`` (less one window and twice the padding) is cut at its longest pause of more than
``min_silence_at_max_speech_ms`` (the next segment starts where speech resumed), or, with
no such pause, at that window; finally each segment grows by ``speech_pad_ms`` on each side,
and two segments closer than twice that share the gap between them equally. One
difference: audio at a rate the export does not run at is resampled to 16 kHz
(``scipy.signal.resample_poly``), where silero decimates multiples of 16 kHz without
filtering and refuses other rates.

Bad input (a missing, truncated or non-WAV file: ``mnnpy.apps.wav``; an unsupported rate,
empty or non-finite audio, a wrong chunk, an option out of range, an unknown export) raises
``mnnpy.InputError``; a model that cannot be fetched ``mnnpy.models.ModelFetchError``;
``backend="onnxruntime"`` without onnxruntime ``mnnpy.BackendUnavailableError``.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import NamedTuple

import numpy as np

import mnnpy
from mnnpy import InputError, models
from mnnpy.apps.reference import onnxruntime_session
from mnnpy.apps.wav import read_wav  # vad.read_wav, as before

DEFAULT_MODEL = "silero_vad.onnx"
#: export -> the sample rates (Hz) it was trained for
MODEL_RATES: dict[str, tuple[int, ...]] = {
    "silero_vad.onnx": (8000, 16000),
    "silero_vad_16k_op15.onnx": (16000,),
    "silero_vad_half.onnx": (16000,),
    "silero_vad_op18_ifless.onnx": (8000, 16000),
    "silero_vad_openvino_16k.onnx": (16000,),
    "silero_vad_16k_sequence.onnx": (16000,),
}
WINDOW = {16000: 512, 8000: 256}  # samples per chunk (32 ms)
CONTEXT = {16000: 64, 8000: 32}  # samples of the previous chunk fed before each chunk
STATE_SHAPE = (2, 1, 128)  # LSTM (h, c) stacked, batch 1
SEQUENCE_BLOCK = 512  # chunks per run of the sequence export (16.4 s at 16 kHz)
MIN_RATE, MAX_RATE = 8000, 384000  # input sample rates accepted (Hz)

Runner = Callable[[dict[str, np.ndarray]], list[np.ndarray]]


class Segment(NamedTuple):
    """A speech segment: ``start`` and ``end`` in samples (int) or seconds (float); ``end`` exclusive."""

    start: int | float
    end: int | float


# -- models ---------------------------------------------------------------------------
def _onnxruntime_runner(path, num_threads: int | None) -> tuple[Runner, list[str]]:
    sess = onnxruntime_session(path, num_threads)
    return (lambda feeds: sess.run(None, feeds)), [i.name for i in sess.get_inputs()]


def _mnnpy_runner(path, backend: str | Sequence[str], num_threads: int | None) -> tuple[Runner, list[str]]:
    interp = mnnpy.Interpreter(str(path))
    session = interp.create_session(backend=backend, num_threads=num_threads)
    outs = [d.name for d in interp.outputs]

    def run(feeds):
        got = session.run(feeds)
        return [got[name] for name in outs]

    return run, [d.name for d in interp.inputs]


def load_runner(
    model: str = DEFAULT_MODEL, backend: str | Sequence[str] = "cpu", num_threads: int | None = None
) -> tuple[Runner, list[str]]:
    """A runner ``feeds -> outputs in graph order`` for silero export ``model`` and its input names.

    ``backend``: ``"onnxruntime"`` (runs the ONNX file) or what ``create_session`` takes (the
    export is converted once and cached). Raises ``InputError`` for an unknown export,
    ``ModelFetchError``, ``UnsupportedOperatorError`` (conversion), ``BackendUnavailableError``.
    """
    if model not in MODEL_RATES:
        raise InputError(f"unknown silero-vad export {model!r}; choose one of {sorted(MODEL_RATES)}")
    if backend == "onnxruntime":
        return _onnxruntime_runner(models.silero_model_path(model), num_threads)
    return _mnnpy_runner(models.silero_mnnpy_path(model), backend, num_threads)


class Vad:
    """Streaming silero VAD: one speech probability per chunk, the model's state fed back.

    ``sr``: 8000 or 16000 Hz (the export must support it, see ``MODEL_RATES``); a chunk is
    ``window`` samples (512 at 16 kHz, 256 at 8 kHz: 32 ms). ``backend`` as in ``load_runner``,
    or ``runner=(run, input_names)`` to reuse a loaded model. ``reset()`` starts a new stream.
    """

    def __init__(
        self,
        sr: int = 16000,
        model: str = DEFAULT_MODEL,
        backend: str | Sequence[str] = "cpu",
        num_threads: int | None = None,
        runner: tuple[Runner, list[str]] | None = None,
    ):
        if model not in MODEL_RATES:
            raise InputError(f"unknown silero-vad export {model!r}; choose one of {sorted(MODEL_RATES)}")
        if isinstance(sr, bool) or not isinstance(sr, (int, np.integer)) or sr not in MODEL_RATES[model]:
            got = f"{sr} Hz" if isinstance(sr, (int, np.integer)) and not isinstance(sr, bool) else f"{sr!r} (give an int, Hz)"
            raise InputError(f"{model} runs at {' or '.join(map(str, MODEL_RATES[model]))} Hz, not {got}")
        self.sr, self.model, self.backend = sr, model, backend
        self.window, self.context_size = WINDOW[sr], CONTEXT[sr]
        self._run, names = runner or load_runner(model, backend, num_threads)
        self._sequence = "h" in names  # the sequence export: h and c instead of state, T chunks per run
        self._sr_feed = {"sr": np.array(sr, dtype=np.int64)} if "sr" in names else {}
        self.reset()

    def reset(self) -> None:
        """Forget the stream: zero state and context."""
        self.state = np.zeros(STATE_SHAPE, np.float32)
        self._context = np.zeros(self.context_size, np.float32)

    def _frames(self, frames: np.ndarray) -> np.ndarray:
        """Probabilities of ``frames (T, C + W)`` (context included), in order; updates the state."""
        if self._sequence:
            probs, h, c = self._run({"input": frames, "h": self.state[:1], "c": self.state[1:]})
            self.state = np.concatenate([h, c]).astype(np.float32, copy=False)  # a new array
            return np.array(probs, np.float32).reshape(-1)  # a copy, as the state below
        out = np.empty(len(frames), np.float32)
        for i, frame in enumerate(frames):
            prob, state = self._run({"input": frame[None], "state": self.state, **self._sr_feed})
            self.state = np.array(state, np.float32)  # a copy: the next run must not read the runner's storage
            out[i] = prob.reshape(-1)[0]
        return out

    def __call__(self, chunk: np.ndarray) -> float:
        """Speech probability (0..1) of the next ``chunk``: ``(window,)`` float samples in [-1, 1]
        (finite; else ``InputError``)."""
        chunk = _check_audio(chunk)
        if chunk.shape != (self.window,):
            raise InputError(f"a chunk at {self.sr} Hz is ({self.window},) samples, got shape {chunk.shape}")
        frame = np.concatenate([self._context, chunk])
        self._context = chunk[-self.context_size :].copy()
        return float(self._frames(frame[None])[0])

    def probabilities(self, audio: np.ndarray) -> np.ndarray:
        """``(ceil(n / window),) float32``: each chunk's speech probability for ``audio (n,)``
        at ``sr``, from a fresh stream (the last chunk zero-padded); the sequence export runs
        ``SEQUENCE_BLOCK`` chunks at a time."""
        audio = _check_audio(audio)
        self.reset()
        n_chunks = -(-len(audio) // self.window)
        chunks = np.zeros((n_chunks, self.window), np.float32)
        chunks.reshape(-1)[: len(audio)] = audio
        frames = np.zeros((n_chunks, self.context_size + self.window), np.float32)
        frames[:, self.context_size :] = chunks
        frames[1:, : self.context_size] = chunks[:-1, -self.context_size :]
        step = SEQUENCE_BLOCK if self._sequence else n_chunks
        probs = np.concatenate([self._frames(frames[i : i + step]) for i in range(0, n_chunks, step)])
        self._context = chunks[-1, -self.context_size :].copy()
        return probs


# -- segments -------------------------------------------------------------------------
@dataclass(frozen=True)
class Rules:
    """The options of silero's segment rules, with silero's defaults (the module docstring says
    what each does): probabilities in (0, 1], durations in ms (``max_speech_duration_s`` in s).
    ``neg_threshold=None`` means ``max(threshold - 0.15, 0.01)``. A value out of range (NaN
    included) raises ``InputError`` naming the option."""

    threshold: float = 0.5
    neg_threshold: float | None = None
    min_speech_duration_ms: float = 250
    max_speech_duration_s: float = math.inf
    min_silence_duration_ms: float = 100
    speech_pad_ms: float = 30
    min_silence_at_max_speech_ms: float = 98

    def __post_init__(self):
        if not 0 < self.threshold <= 1:
            raise InputError(f"threshold must be in (0, 1], got {self.threshold}")
        if self.neg_threshold is not None and not 0 <= self.neg_threshold <= self.threshold:
            raise InputError(f"neg_threshold must be in [0, threshold = {self.threshold}], got {self.neg_threshold}")
        for name in ("min_speech_duration_ms", "min_silence_duration_ms", "speech_pad_ms", "min_silence_at_max_speech_ms"):
            if not getattr(self, name) >= 0:
                raise InputError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not self.max_speech_duration_s > 0:
            raise InputError(f"max_speech_duration_s must be > 0, got {self.max_speech_duration_s}")

    @classmethod
    def of(cls, options: dict) -> Rules:
        """``Rules(**options)``; an unknown option name is an ``InputError`` (listing the known ones)."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise InputError(f"unknown segment option(s) {unknown}; the options are {known}")
        return cls(**options)


def timestamps_from_probabilities(
    probs: Sequence[float] | np.ndarray, sr: int, num_samples: int | None = None, **options: float
) -> list[Segment]:
    """Speech segments, in samples at ``sr``, from one probability per window (silero's rules).

    ``probs[i]`` covers samples ``[i * W, (i + 1) * W)``, ``W = WINDOW[sr]`` (``sr`` 8000 or
    16000 Hz); ``num_samples``: the audio's length (default ``len(probs) * W``); ``options``:
    the fields of ``Rules`` (``threshold=0.5``, ...). The rules are in the module docstring.
    """
    if sr not in WINDOW:
        raise InputError(f"probabilities come at 8000 or 16000 Hz, not {sr} Hz")
    r = Rules.of(options)
    window, threshold = WINDOW[sr], r.threshold
    n = len(probs) * window if num_samples is None else num_samples
    low = max(threshold - 0.15, 0.01) if r.neg_threshold is None else r.neg_threshold
    pad = sr * r.speech_pad_ms / 1000
    min_speech = sr * r.min_speech_duration_ms / 1000
    max_speech = sr * r.max_speech_duration_s - window - 2 * pad
    min_silence = sr * r.min_silence_duration_ms / 1000
    min_cut_pause = sr * r.min_silence_at_max_speech_ms / 1000

    found: list[list[int]] = []  # [start, end] in samples, before padding
    start: int | None = None  # the open segment's start (None: not in speech)
    quiet_since: int | None = None  # where a possible end of the open segment began
    pauses: list[tuple[int, int]] = []  # (begin, length) of the open segment's pauses long enough to cut at
    for i, p in enumerate(np.asarray(probs, np.float64)):
        t = i * window
        if p >= threshold and quiet_since is not None:  # speech resumes: the quiet stretch was a pause
            if t - quiet_since > min_cut_pause:
                pauses.append((quiet_since, t - quiet_since))
            quiet_since = None
        if start is None:
            if p >= threshold:
                start = t
            continue
        if t - start > max_speech:  # too long: cut at its longest pause, else here
            if pauses:
                begin, length = max(pauses, key=lambda q: q[1])
                found.append([start, begin])
                start = begin + length
                quiet_since, pauses = None, []
            else:
                found.append([start, t])
                start, quiet_since, pauses = None, None, []
                continue
        if p < low:
            quiet_since = t if quiet_since is None else quiet_since
            if t - quiet_since >= min_silence:
                if quiet_since - start > min_speech:
                    found.append([start, quiet_since])
                start, quiet_since, pauses = None, None, []
    if start is not None and n - start > min_speech:
        found.append([start, n])
    return _pad(found, n, pad)


def _pad(found: list[list[int]], n: int, pad: float) -> list[Segment]:
    """Grow each [start, end] by ``pad`` samples on each side within [0, n]; two segments closer
    than ``2 * pad`` split the gap between them instead (the earlier end takes the smaller half)."""
    if found:
        found[0][0] = int(max(0, found[0][0] - pad))
    for seg, nxt in zip(found, found[1:]):
        gap = nxt[0] - seg[1]
        grow = gap // 2 if gap < 2 * pad else pad
        seg[1] = int(min(n, seg[1] + grow))
        nxt[0] = int(max(0, nxt[0] - grow))
    if found:
        found[-1][1] = int(min(n, found[-1][1] + pad))
    return [Segment(s, e) for s, e in found]


def _check_audio(audio) -> np.ndarray:
    """``audio`` as a non-empty, finite ``(n,) float32`` array, else ``InputError``."""
    try:
        a = np.asarray(audio, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise InputError(f"audio must be an array of samples: {e}") from None
    if a.ndim != 1:
        raise InputError(f"audio must be mono, shape (n,); got shape {a.shape} (average the channels first)")
    if a.size == 0:
        raise InputError("audio is empty (no samples)")
    if not np.isfinite(a).all():
        raise InputError("audio holds NaN or infinite samples")
    return a


def _check_rate(sr) -> int:
    """``sr`` as an int, else ``InputError`` unless it is an integer in ``MIN_RATE..MAX_RATE`` Hz."""
    if isinstance(sr, bool) or not isinstance(sr, (int, np.integer)) or not MIN_RATE <= sr <= MAX_RATE:
        raise InputError(f"sample rate must be an integer from {MIN_RATE} to {MAX_RATE} Hz, got {sr!r}")
    return int(sr)


def resample(audio: np.ndarray, sr_from: int, sr_to: int) -> np.ndarray:
    """``audio (n,)`` at ``sr_from`` Hz -> ``(ceil(n * sr_to / sr_from),) float32`` at ``sr_to`` Hz
    (polyphase filter, ``scipy.signal.resample_poly``)."""
    if sr_from == sr_to:
        return audio
    from scipy.signal import resample_poly

    ratio = Fraction(sr_to, sr_from)
    return resample_poly(audio, ratio.numerator, ratio.denominator).astype(np.float32)


def speech_timestamps(
    audio: np.ndarray,
    sr: int,
    *,
    vad: Vad | None = None,
    model: str = DEFAULT_MODEL,
    backend: str | Sequence[str] = "cpu",
    num_threads: int | None = None,
    return_seconds: bool = False,
    time_resolution: int = 1,
    **options: float,
) -> list[Segment]:
    """Speech segments of ``audio (n,)`` float samples (in [-1, 1]) at ``sr`` Hz.

    Runs ``vad`` (or a new ``Vad(model=..., backend=...)``) over the audio at the model's
    rate: ``sr`` itself when the export supports it (8000 or 16000 Hz), else the audio is
    resampled (to ``vad.sr``, or 16000 Hz); then ``timestamps_from_probabilities`` with
    ``options``, the fields of ``Rules`` (``threshold=0.5``, ``min_silence_duration_ms=100``,
    ...: silero's names and defaults). Returns segments in samples of the input (``sr``),
    or, with ``return_seconds``, in seconds rounded to ``time_resolution`` decimals (as
    silero does; 1 = 0.1 s). ``sr`` must be an integer in 8000..384000 Hz.
    """
    audio, sr = _check_audio(audio), _check_rate(sr)
    if isinstance(time_resolution, bool) or not isinstance(time_resolution, (int, np.integer)) or not 0 <= time_resolution <= 6:
        raise InputError(f"time_resolution must be an int of 0..6 decimals, got {time_resolution!r}")
    Rules.of(options)  # checked before a model is loaded
    if vad is None:
        rate = sr if sr in MODEL_RATES.get(model, ()) else 16000
        vad = Vad(rate, model, backend, num_threads)
    rate = vad.sr
    x = resample(audio, sr, rate)
    segments = timestamps_from_probabilities(vad.probabilities(x), rate, len(x), **options)
    if return_seconds:
        length = len(x) / rate
        return [
            Segment(max(round(s / rate, time_resolution), 0), min(round(e / rate, time_resolution), length)) for s, e in segments
        ]
    if rate == sr:
        return segments
    return [Segment(min(len(audio), round(s * sr / rate)), min(len(audio), round(e * sr / rate))) for s, e in segments]


# -- the command ----------------------------------------------------------------------
#: ``mnnpy vad`` option, the ``Rules`` field it sets (an option not given keeps the field's default), help
CLI_RULES = (
    ("--threshold", "threshold", "speech probability that starts speech"),
    ("--neg-threshold", "neg_threshold", "probability below which speech ends"),
    ("--min-speech-ms", "min_speech_duration_ms", "segments this short or shorter are dropped"),
    ("--min-silence-ms", "min_silence_duration_ms", "silence that ends a segment"),
    ("--pad-ms", "speech_pad_ms", "padding added on each side of a segment"),
    ("--max-speech-s", "max_speech_duration_s", "longer segments are cut"),
)


def _cli_rules(args: argparse.Namespace) -> dict[str, float]:
    """The ``Rules`` options given on the command line; ``InputError`` naming the flag of one out of range."""
    options = {field: getattr(args, field) for _, field, _ in CLI_RULES if getattr(args, field) is not None}
    try:
        Rules.of(options)
    except InputError as e:
        flags = {field: flag for flag, field, _ in CLI_RULES}
        pattern = r"(?<![\w-])(" + "|".join(sorted(flags, key=len, reverse=True)) + r")\b"
        raise InputError(re.sub(pattern, lambda m: flags[m.group(1)], str(e))) from None
    return options


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``mnnpy vad``."""
    p.add_argument(
        "wav", help="WAV file (PCM or float; channels are averaged; any rate, resampled where needed), or a folder of them"
    )
    p.add_argument(
        "--backend", default="cpu", help="mnnpy backend name, a comma-separated list, auto, or 'onnxruntime' (default: cpu)"
    )
    p.add_argument(
        "--model", default=DEFAULT_MODEL, choices=sorted(MODEL_RATES), help=f"silero-vad export (default: {DEFAULT_MODEL})"
    )
    for flag, field, help in CLI_RULES:
        default = getattr(Rules(), field)
        text = "threshold - 0.15, at least 0.01" if default is None else "no limit" if math.isinf(default) else f"{default:g}"
        unit = "MS" if flag.endswith("-ms") else "S" if flag.endswith("-s") else "P"
        p.add_argument(flag, dest=field, metavar=unit, type=float, default=None, help=f"{help} (default: {text})")
    p.add_argument("--threads", type=int, default=None, help=f"CPU threads (1..{mnnpy.MAX_THREADS}; a folder: per worker, 1)")
    from mnnpy.apps.folder_cli import add_job_arguments

    add_job_arguments(p, "file", required_out=False)  # a folder: its results, and where it runs (mnnpy.apps.vad_rows)


def run(args: argparse.Namespace) -> int:
    """``mnnpy vad``: print each speech segment's start and end in seconds, then a summary line;
    for a folder, one result per WAV file in ``--out`` (``mnnpy.apps.vad_rows.run_folder``)."""
    if args.threads is not None and not 1 <= args.threads <= mnnpy.MAX_THREADS:
        raise InputError(f"--threads must be between 1 and {mnnpy.MAX_THREADS}, got {args.threads}")
    options = _cli_rules(args)
    if os.path.isdir(args.wav) or args.out is not None:
        from mnnpy.apps.vad_rows import run_folder

        return run_folder(args, options)
    audio, sr = read_wav(args.wav)
    backend = args.backend.split(",") if "," in args.backend else args.backend
    segments = speech_timestamps(audio, sr, model=args.model, backend=backend, num_threads=args.threads, **options)
    for start, end in segments:
        print(f"{start / sr:.3f}\t{end / sr:.3f}")
    total, speech = len(audio) / sr, sum(e - s for s, e in segments) / sr
    print(
        f"{args.wav}: {total:.2f} s at {sr} Hz; {len(segments)} speech segment{'s' * (len(segments) != 1)}, "
        f"{speech:.2f} s of speech ({100 * speech / total:.0f}%); {args.model} on {args.backend}"
    )
    return 0
