"""``within(seconds, fn, fifo)``: call ``fn`` and fail the test, instead of hanging it, when
``fn`` blocks on the named pipe ``fifo`` (a reader that opens a FIFO blocking waits for a
writer forever)."""

from __future__ import annotations

import os
import threading

import pytest


def within(seconds: float, fn, fifo):
    """``fn()``'s result; ``pytest.fail`` when it has not returned after ``seconds`` (the FIFO is
    then opened for writing and closed, which releases a reader blocked on it)."""
    out: dict = {}

    def call():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            out["error"] = e

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the blocked reader sees EOF
        except OSError:
            pass
        t.join(10)
        pytest.fail(f"blocked more than {seconds} s on the named pipe {fifo}")
    if "error" in out:
        raise out["error"]
    return out.get("value")
