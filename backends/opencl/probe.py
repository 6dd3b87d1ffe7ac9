"""Loading a cached OpenCL program binary in a child process first, so that a binary the
driver crashes on (a truncated one: PoCL segfaults in ``clBuildProgram``) takes down the
child, never the caller (issue 12, defect 6).

Why a child process: the disk cache's hash (``mnnpy.cache_file``) proves a file is whole
and of its key, not that the driver can load its payload; a driver reports a bad binary
however it likes, segfaults included, and no header check holds for every driver (the
layout of a device binary is the driver's own). So a binary is trusted only once it has
been built in a child: ``ProgramCache`` sends every entry not marked probed here, and marks
the entry probed once the child built it (a later process then loads it directly). A probe
costs one ``clBuildProgram`` from the binary in the child (~0.07 s with PoCL here) plus,
once per process, starting the child (~0.4 s: Python, pyopencl, a context).

Protocol (``Prober`` writes, ``serve`` answers), one request at a time over the child's
stdin/stdout: a JSON line ``{"platform": i, "device": j, "identity": text, "options":
[...], "size": bytes}`` then ``size`` bytes of binary; the answer is a JSON line
``{"ok": true, "kernels": [names]}`` or ``{"ok": false, "error": text}``. A child that dies
(EOF) or answers nothing within ``TIMEOUT`` seconds (then killed) is a failed probe; the next
probe starts a new child.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import weakref

TIMEOUT = 120.0  # seconds a probe may take (a driver that hangs on a binary is a failed probe)


def _describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def device_index(cl, device) -> tuple[int, int] | None:
    """``(platform index, device index)`` of ``device`` among ``cl.get_platforms()``, or None."""
    from mnnpy.backends.opencl.device import devices_of

    for pi, p in enumerate(cl.get_platforms()):
        for di, d in enumerate(devices_of(p)):
            if d == device:
                return pi, di
    return None


class Prober:
    """``check(binary, options) -> str | None``: None when a child process built ``binary``
    (bytes, a device binary of ``runtime``'s device) with build ``options`` and created each
    of its kernels; else why not (the child's error, its death with the signal, a time-out).
    One child per Prober, started at the first probe, ended with the Prober (or the process)."""

    def __init__(self, runtime):
        from mnnpy.backends.opencl.program import device_identity

        self.where = device_index(runtime.cl, runtime.device)
        self.identity = device_identity(runtime.device)
        self._proc = None
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, Prober._end, [None])

    @staticmethod
    def _end(holder) -> None:
        proc = holder[0]
        if proc is not None and proc.poll() is None:
            try:
                proc.stdin.close()  # the child ends at EOF
                proc.wait(timeout=5)
            except Exception:  # noqa: BLE001 - at exit: kill what is left
                proc.kill()
                proc.wait()
        if proc is not None:
            proc.stdout.close()

    def _start(self):
        env = dict(os.environ)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "mnnpy.backends.opencl.probe"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, Prober._end, [self._proc])
        return self._proc

    def _failed(self, proc, why: str) -> str:
        """Kill ``proc`` if still running, forget it, and return ``why`` with its exit."""
        if proc.poll() is None:
            proc.kill()
        code = proc.wait()
        self._finalizer.detach()
        Prober._end([proc])
        self._proc = None
        return f"{why} ({_describe_exit(code)})"

    def check(self, binary: bytes, options: list[str]) -> str | None:
        """None if the binary builds in the child, else the reason (see the class doc)."""
        if self.where is None:
            return "the device is not among pyopencl's platforms (cannot probe)"
        with self._lock:
            proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
            head = {"platform": self.where[0], "device": self.where[1], "identity": self.identity}
            head.update(options=list(options), size=len(binary))
            try:
                proc.stdin.write(json.dumps(head).encode() + b"\n" + binary)
                proc.stdin.flush()
            except OSError:  # BrokenPipeError: the child died
                return self._failed(proc, "the probe process died")
            ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
            line = proc.stdout.readline() if ready else None
            if line is None:
                return self._failed(proc, f"the probe process answered nothing in {TIMEOUT:g} s")
            if not line:
                return self._failed(proc, "the probe process died loading it")
            answer = json.loads(line)
            return None if answer.get("ok") else str(answer.get("error") or "refused")


def serve(stdin, stdout) -> None:
    """The child's loop (protocol in the module doc) until EOF on ``stdin``."""
    import pyopencl as cl

    from mnnpy.backends.opencl.device import devices_of
    from mnnpy.backends.opencl.program import device_identity

    contexts = {}
    while True:
        line = stdin.readline()
        if not line:
            return
        req = json.loads(line)
        binary = stdin.read(req["size"])
        try:
            where = (req["platform"], req["device"])
            if where not in contexts:
                device = devices_of(cl.get_platforms()[where[0]])[where[1]]
                if device_identity(device) != req["identity"]:
                    raise RuntimeError(f"device {device_identity(device)!r} is not {req['identity']!r}")
                contexts[where] = (cl.Context([device]), device)
            context, device = contexts[where]
            prg = cl.Program(context, [device], [binary]).build(options=req["options"])
            names = [n for n in prg.get_info(cl.program_info.KERNEL_NAMES).split(";") if n]
            for name in names:
                cl.Kernel(prg, name)
            answer = {"ok": True, "kernels": names}
        except Exception as e:  # noqa: BLE001 - the driver's refusal, whatever its type
            text = str(e).strip()
            answer = {"ok": False, "error": text.splitlines()[0] if text else type(e).__name__}
        stdout.write(json.dumps(answer).encode() + b"\n")
        stdout.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
