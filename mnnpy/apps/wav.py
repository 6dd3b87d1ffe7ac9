"""WAV files as float32 samples for the voice-activity app (``mnnpy.apps.vad``).

``read_wav`` reads PCM and float WAV files with ``scipy.io.wavfile`` and refuses, with
``InputError`` naming the file, what scipy would read silently: a file cut short (its header
claims more samples than it holds; scipy returns the part that is there) and samples that are
NaN or infinite (float WAVs).
"""

from __future__ import annotations

import os
import struct

import numpy as np

from mnnpy import InputError
from mnnpy.files import open_regular

UNKNOWN_SIZE = 0xFFFFFFFF  # a data chunk size that means "to the end of the file" (WAVs written to a pipe)


def read_wav(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """``(samples (n,) float32 in [-1, 1), rate in Hz)`` of a WAV file; channels are averaged.

    Integer PCM (8, 16, 24, 32 bits) is scaled by its full range, float WAV kept as is
    (``scipy.io.wavfile``). Raises ``InputError`` naming the file for a missing or unreadable
    file, one that is not a WAV, a truncated one (``data_shortfall``), a WAV without samples
    and one with NaN or infinite samples.
    """
    import warnings

    from scipy.io import wavfile

    try:
        with open_regular(path) as f, warnings.catch_warnings():  # a named pipe: refused, never a blocked read
            warnings.simplefilter("ignore", wavfile.WavFileWarning)  # unknown chunks (LIST, ...) are skipped
            rate, data = wavfile.read(f)
        shortfall = data_shortfall(path)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    except (ValueError, EOFError, ArithmeticError, LookupError, TypeError, UnboundLocalError, struct.error) as e:
        # scipy's parser fails in these ways on damaged headers (0 channels, bad chunk sizes)
        raise InputError(f"{path}: not a WAV file scipy can read ({type(e).__name__}: {e})") from None
    if shortfall:
        raise InputError(f"{path}: truncated: its header claims {shortfall} more bytes of samples than the file holds")
    if data.dtype == np.uint8:
        x = (data.astype(np.float32) - 128) / 128
    elif data.dtype.kind == "i":
        x = data.astype(np.float32) / float(2 ** (8 * data.dtype.itemsize - 1))
    else:
        x = data.astype(np.float32)
    if x.ndim == 2:
        x = x.mean(axis=1, dtype=np.float32)
    if x.size == 0:
        raise InputError(f"{path}: the WAV file holds no samples")
    if not np.isfinite(x).all():
        raise InputError(f"{path}: the WAV file holds NaN or infinite samples")
    return x, int(rate)


def data_shortfall(path: str | os.PathLike) -> int:
    """How many bytes of samples the ``data`` chunk of a RIFF (or big-endian RIFX) WAV file
    claims beyond the end of the file: 0 for a complete file, an RF64 file (its sizes are in
    its ``ds64`` chunk) and a size of ``UNKNOWN_SIZE``."""
    with open_regular(path) as f:
        head, end = f.read(12), os.fstat(f.fileno()).st_size
        if len(head) < 12 or head[:4] not in (b"RIFF", b"RIFX"):
            return 0
        order = "<" if head[:4] == b"RIFF" else ">"
        while len(chunk := f.read(8)) == 8:
            size = struct.unpack(order + "I", chunk[4:])[0]
            if chunk[:4] == b"data":
                return 0 if size == UNKNOWN_SIZE else max(0, size - (end - f.tell()))
            f.seek(size + (size & 1), os.SEEK_CUR)  # chunks are padded to an even size
    return 0
