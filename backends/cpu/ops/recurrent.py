"""CPU LSTM, GRU and RNN (ONNX operators.md; shapes in ``mnnpy/ops/recurrent.py``).

Per run: one matrix product projects every time step of X through W for every
direction at once (``X2d @ W^T`` into a workspace buffer, biases added after), then a
Python loop over time steps does the small recurrent products ``H_{t-1} @ R^T`` and the
gate arithmetic with ``out=`` into buffers taken at resize. Weights that are constants
are transposed (and cast) once at resize; weights fed as graph inputs are copied into
the same buffers at the start of each run. float16 is computed in float32.

``sequence_lens``: when every length equals the sequence length the loop indexes time
directly. Otherwise, at step ``s`` batch row ``b`` is active while ``s < len[b]``; an
inactive row keeps its state (so Y_h / Y_c hold the last valid step) and its Y is zero.
The reverse direction of a shorter sequence starts at its own last step: its projected
inputs are gathered per step (``np.take`` into a buffer) and its Y rows are gathered back
into time order at the end. Activation alpha/beta values are consumed in the order of the
activations, only by those that use them (onnxruntime's rule, with its defaults:
LeakyRelu 0.01, HardSigmoid 0.2/0.5, Elu 1.0, others 0).
"""

from __future__ import annotations

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.blas import MatMul as BlasMatMul
from mnnpy.backends.cpu.ops.activation import KERNELS
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.backends.cpu.scratch import scratch
from mnnpy.ops.activation import ACTIVATIONS
from mnnpy.ops.recurrent import GATES

# activation -> (uses alpha, uses beta, default alpha, default beta)
_ACT_ARGS = {
    "affine": (True, True, 0.0, 0.0),
    "relu": (False, False, 0.0, 0.0),
    "leakyrelu": (True, False, 0.01, 0.0),
    "thresholdedrelu": (True, False, 0.0, 0.0),
    "tanh": (False, False, 0.0, 0.0),
    "scaledtanh": (True, True, 0.0, 0.0),
    "sigmoid": (False, False, 0.0, 0.0),
    "hardsigmoid": (True, True, 0.2, 0.5),
    "elu": (True, False, 1.0, 0.0),
    "softsign": (False, False, 0.0, 0.0),
    "softplus": (False, False, 0.0, 0.0),
}


def _resolve_activations(names, alphas, betas) -> list[tuple[str, float, float]]:
    """``(name, alpha, beta)`` per activation; alpha/beta lists consumed in order."""
    ia, ib = iter(alphas), iter(betas)
    out = []
    for name in names:
        name = name.lower()
        use_a, use_b, da, db = _ACT_ARGS[name]
        a = next(ia, da) if use_a else 0.0
        b = next(ib, db) if use_b else 0.0
        out.append((name, float(a), float(b)))
    return out


_TABLE = {a.lower: a.name for a in ACTIVATIONS.values()}  # the activation table's ops by lower-case name


def _activation(name: str, alpha: float, beta: float, tmp: np.ndarray, mask: np.ndarray):
    """An in-place activation ``f(x)`` on a 2-D ``x`` of shape ``(batch, k)``: the activation
    table's kernel (alpha, beta as its scalars), or Affine / ScaledTanh.

    ``tmp`` (float) and ``mask`` (bool) are ``(batch, >= k)`` buffers it may overwrite.
    """
    if name in _TABLE:  # the same in-place kernels as the standalone ops and Conv's fused activations
        k = KERNELS[_TABLE[name]]

        def table_kernel(x):
            k.fn(x, x, alpha, beta, *[(mask if d is np.bool_ else tmp)[:, : x.shape[1]] for d in k.scratch])

        return table_kernel
    if name == "affine":

        def affine(x):
            np.multiply(x, alpha, out=x)
            np.add(x, beta, out=x)

        return affine
    if name == "scaledtanh":

        def scaled_tanh(x):
            np.multiply(x, beta, out=x)
            np.tanh(x, out=x)
            np.multiply(x, alpha, out=x)

        return scaled_tanh
    raise ValueError(f"unknown activation {name}")


class _Recurrent(Execution):
    """Shared driver: parameters, input projection, the time loop, sequence lengths, outputs."""

    def on_resize(self, inputs, outputs):
        a = self.attrs
        n_gates, n_act, default_acts = GATES[self.op.type]
        x = inputs[0]
        self.layout = a["layout"]
        self.T, self.B = (x.shape[0], x.shape[1]) if self.layout == 0 else (x.shape[1], x.shape[0])
        T, B, n_in = self.T, self.B, x.shape[2]
        self.D = 2 if a["direction"] == "bidirectional" else 1
        self.H = H = inputs[2].shape[2]
        self.G = G = n_gates * H
        D = self.D
        self.dirs = [True] if a["direction"] == "reverse" else [False, True][:D]
        dt = self.dt = np.dtype(np.float32) if x.dtype == np.float16 else x.dtype
        self.clip = a["clip"]

        def opt(i):
            return inputs[i] if i < len(inputs) else None

        self.inp = opt
        self.out = lambda k: outputs[k] if k < len(outputs) else None

        # parameters (constants: loaded once now; graph inputs: reloaded every run)
        self.Wt = scratch((n_in, D * G), dt)
        self.Rt = scratch((D, H, G), dt)
        self.bx = scratch(D * G, dt) if opt(3) is not None else None
        self.param_inputs = [1, 2, 3] + ([7] if self.op.type == "LSTM" else [])
        self._init_params()
        self.params_const = all(
            self.input_infos[i] is None or self.input_infos[i].value is not None
            for i in self.param_inputs
            if i < len(self.input_infos)
        )
        if self.params_const:
            self._load_params(inputs)

        # activations, per direction
        names = list(a["activations"]) or list(default_acts) * D
        acts = _resolve_activations(names, a["activation_alpha"], a["activation_beta"])
        ws = self.backend.workspace()
        self.act_tmp = ws.take((B, G), dt)
        self.act_mask = ws.take((B, G), np.bool_)
        self.acts = [[_activation(*acts[d * n_act + j], self.act_tmp, self.act_mask) for j in range(n_act)] for d in range(D)]

        # input projection for every time step and direction: one product
        rows = T * B
        self.x = x
        if x.dtype != dt or not x.flags.c_contiguous:  # float16, or a strided view: copied per run
            self.xcast = ws.take((rows, n_in), dt)
            src = self.xcast
        else:
            self.xcast = None
            src = x.reshape(rows, n_in)
        self.xw = ws.take((rows, D * G), dt)
        self.proj = BlasMatMul(self.backend, src, self.Wt, self.xw)
        self.xw3 = self.xw.reshape(T, B, D * G) if self.layout == 0 else self.xw.reshape(B, T, D * G).transpose(1, 0, 2)

        # states and step buffers
        self.h, self.hn = ws.take((B, H), dt), ws.take((B, H), dt)
        self.tmp = ws.take((B, H), dt)
        self._init_step_buffers(ws)

        # sequence lengths
        self.lens_const = opt(4) is None or self.input_infos[4].value is not None
        self.varying = False
        self.xstep = ws.take((B, D * G), dt)
        self.hs = ws.take((T, B, H), dt)
        self.ygather = ws.take((T * B, H), dt)
        if self.lens_const:
            self._load_lens(opt(4))

    # hooks for the op types ----------------------------------------------------------------
    def _init_params(self):
        pass

    def _init_step_buffers(self, ws):
        pass

    def _load_extra(self, inputs):
        pass

    def _bias_into_x(self, b):
        """The part of B = [Wb, Rb] (D, 2G) added to the projected inputs, as (D, G)."""
        return b[:, : self.G] + b[:, self.G :]

    # parameters ---------------------------------------------------------------------------
    def _load_params(self, inputs):
        D, G = self.D, self.G
        w, r, b = inputs[1], inputs[2], self.inp(3)
        np.copyto(self.Wt, w.reshape(D * G, -1).T)
        np.copyto(self.Rt, r.transpose(0, 2, 1))
        if b is not None:
            np.copyto(self.bx, self._bias_into_x(np.asarray(b, self.dt)).reshape(-1))
        self._load_extra(inputs)

    def _load_lens(self, lens):
        """Masks and gather indices for ``sequence_lens`` (small (T, B) arrays)."""
        T, B = self.T, self.B
        if lens is None:
            self.varying = False
            return
        L = np.clip(np.asarray(lens, np.int64), 0, T)
        self.varying = bool((L != T).any())
        if not self.varying:
            return
        s = np.arange(T)[:, None]
        b = np.arange(B)[None, :]
        active = s < L[None, :]
        self.inactive = ~active[:, :, None]  # (T, B, 1)
        self.active_f = active[:, :, None].astype(self.dt)
        t_rev = np.maximum(L[None, :] - 1 - s, 0)  # reverse: time index of step s (and step of time s)
        self.rev_rows = (t_rev * B + b) if self.layout == 0 else (b * T + t_rev)
        self.rev_back = (t_rev * B + b).reshape(-1)  # hs (step-major) row holding time s

    # run ----------------------------------------------------------------------------------
    def on_execute(self, inputs, outputs):
        if not self.params_const:
            self._load_params(inputs)
        if not self.lens_const:
            self._load_lens(inputs[4])
        if self.xcast is not None:
            np.copyto(self.xcast.reshape(self.x.shape), self.x)
        self.proj()
        if self.bx is not None:
            np.add(self.xw, self.bx, out=self.xw)
        for d, reverse in enumerate(self.dirs):
            self._direction(d, reverse)

    def _state_view(self, arr, d):
        return arr[d] if self.layout == 0 else arr[:, d]

    def _y_view(self, y, d):
        return y[:, d] if self.layout == 0 else y[:, :, d].transpose(1, 0, 2)

    def _direction(self, d, reverse):
        T, G = self.T, self.G
        init_h = self.inp(5)
        h, hn = self.h, self.hn
        if init_h is not None:
            np.copyto(h, self._state_view(init_h, d))
        else:
            h.fill(0)
        self._start(d)
        y = self.out(0)
        yd = self._y_view(y, d) if y is not None else None
        cols = slice(d * G, (d + 1) * G)
        varying = self.varying
        for s in range(T):
            t = T - 1 - s if reverse else s
            if varying and reverse:
                np.take(self.xw, self.rev_rows[s], axis=0, out=self.xstep)
                xs = self.xstep[:, cols]
            else:
                xs = self.xw3[t, :, cols]
            self._cell(d, xs, h, hn)
            if varying:
                np.copyto(hn, h, where=self.inactive[s])
                self._keep_inactive(self.inactive[s])
                if yd is not None:
                    if reverse:
                        np.copyto(self.hs[s], hn)
                    else:
                        np.multiply(hn, self.active_f[s], out=yd[s])
            elif yd is not None:
                np.copyto(yd[t], hn)
            h, hn = hn, h
            self._swap()
        if varying and reverse and yd is not None:
            np.take(self.hs.reshape(T * self.B, self.H), self.rev_back, axis=0, out=self.ygather)
            np.multiply(self.ygather.reshape(T, self.B, self.H), self.active_f, out=yd)
        yh = self.out(1)
        if yh is not None:
            np.copyto(self._state_view(yh, d), h)
        self._finish(d)

    def _start(self, d):
        pass

    def _keep_inactive(self, where):
        pass

    def _swap(self):
        pass

    def _finish(self, d):
        pass

    def _clip(self, x):
        if self.clip is not None:
            np.clip(x, -self.clip, self.clip, out=x)


@cpu_execution("RNN")
class RNN(_Recurrent):
    """``Ht = f(Xt Wi^T + Ht-1 Ri^T + Wbi + Rbi)``."""

    def _cell(self, d, xs, h, hn):
        np.matmul(h, self.Rt[d], out=hn)
        np.add(hn, xs, out=hn)
        self._clip(hn)
        self.acts[d][0](hn)


@cpu_execution("GRU")
class GRU(_Recurrent):
    """Gates z, r, h; ``Ht = (1 - zt)*ht + zt*Ht-1`` (``linear_before_reset`` variants)."""

    def _init_params(self):
        self.lbr = self.attrs["linear_before_reset"] != 0
        self.rbh = scratch((self.D, self.H), self.dt) if self.lbr else None

    def _bias_into_x(self, b):
        G, H = self.G, self.H
        bx = b[:, :G] + b[:, G:]
        if self.lbr:  # Rbh is added inside the reset product
            bx[:, 2 * H :] = b[:, 2 * H : G]
        return bx

    def _load_extra(self, inputs):
        if self.lbr:
            b = self.inp(3)
            if b is None:
                self.rbh.fill(0)
            else:
                np.copyto(self.rbh, b[:, self.G + 2 * self.H :])

    def _init_step_buffers(self, ws):
        B, H = self.B, self.H
        self.gzr = ws.take((B, 2 * H), self.dt)
        self.gh = ws.take((B, H), self.dt)

    def _cell(self, d, xs, h, hn):
        H = self.H
        f, g = self.acts[d]
        rt = self.Rt[d]
        zr, gh = self.gzr, self.gh
        np.matmul(h, rt[:, : 2 * H], out=zr)
        np.add(zr, xs[:, : 2 * H], out=zr)
        self._clip(zr)
        f(zr)
        z, r = zr[:, :H], zr[:, H:]
        if self.lbr:
            np.matmul(h, rt[:, 2 * H :], out=gh)
            np.add(gh, self.rbh[d], out=gh)
            np.multiply(gh, r, out=gh)
        else:
            np.multiply(r, h, out=self.tmp)
            np.matmul(self.tmp, rt[:, 2 * H :], out=gh)
        np.add(gh, xs[:, 2 * H :], out=gh)
        self._clip(gh)
        g(gh)
        np.subtract(h, gh, out=hn)  # (1 - z)*gh + z*h = gh + z*(h - gh)
        np.multiply(hn, z, out=hn)
        np.add(hn, gh, out=hn)


@cpu_execution("LSTM")
class LSTM(_Recurrent):
    """Gates i, o, f, c with optional peepholes P[iof], ``input_forget`` and cell state C."""

    def _init_params(self):
        self.P = scratch((self.D, 3 * self.H), self.dt) if self.inp(7) is not None else None
        self.input_forget = self.attrs["input_forget"] != 0

    def _load_extra(self, inputs):
        if self.P is not None:
            np.copyto(self.P, self.inp(7))

    def _init_step_buffers(self, ws):
        B, H = self.B, self.H
        self.c, self.cn = ws.take((B, H), self.dt), ws.take((B, H), self.dt)
        self.gates = ws.take((B, 4 * H), self.dt)

    def _start(self, d):
        init_c = self.inp(6)
        if init_c is not None:
            np.copyto(self.c, self._state_view(init_c, d))
        else:
            self.c.fill(0)

    def _keep_inactive(self, where):
        np.copyto(self.cn, self.c, where=where)

    def _swap(self):
        self.c, self.cn = self.cn, self.c

    def _finish(self, d):
        yc = self.out(2)
        if yc is not None:
            np.copyto(self._state_view(yc, d), self.c)

    def _cell(self, d, xs, h, hn):
        H = self.H
        f, g, hact = self.acts[d]
        c, cn, tmp, gates = self.c, self.cn, self.tmp, self.gates
        np.matmul(h, self.Rt[d], out=gates)
        np.add(gates, xs, out=gates)
        gi, go, gf, gc = gates[:, :H], gates[:, H : 2 * H], gates[:, 2 * H : 3 * H], gates[:, 3 * H :]
        p = self.P[d] if self.P is not None else None
        if p is not None:
            np.multiply(c, p[:H], out=tmp)
            np.add(gi, tmp, out=gi)
            if not self.input_forget:
                np.multiply(c, p[2 * H :], out=tmp)
                np.add(gf, tmp, out=gf)
            self._clip(gi)
            self._clip(gates[:, 2 * H :])
        else:
            self._clip(gates)
        if p is None and not self.input_forget:
            f(gates[:, : 3 * H])  # i, o, f at once
        else:
            f(gi)
            if self.input_forget:
                np.subtract(1, gi, out=gf)
            else:
                f(gf)
        g(gc)
        np.multiply(gf, c, out=cn)
        np.multiply(gi, gc, out=tmp)
        np.add(cn, tmp, out=cn)
        if p is not None:
            np.multiply(cn, p[H : 2 * H], out=tmp)
            np.add(go, tmp, out=go)
            self._clip(go)
            f(go)
        elif self.input_forget:
            f(go)
        np.copyto(tmp, cn)
        hact(tmp)
        np.multiply(go, tmp, out=hn)
