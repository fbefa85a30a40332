"""The model's forward and backward operators, with their fwdbwd flows."""

from __future__ import annotations

from typing import Any

from hta_tui.synth.kernels import (
    _Kernel,
    _us,
)


class _ModelOps:
    """Part of `_Rank`: forward blocks, backward nodes and their kernels."""

    def _flows_fwdbwd(self, fwd_ts: int, bwd_ts: int) -> None:
        self.flow_id += 1
        fid = self.flow_id
        self.out.append(
            {
                "ph": "s",
                "id": fid,
                "pid": self.pid,
                "tid": self.tid_main,
                "ts": _us(fwd_ts),
                "cat": "fwdbwd",
                "name": "fwdbwd",
            }
        )
        self.out.append(
            {
                "ph": "f",
                "id": fid,
                "pid": self.pid,
                "tid": self.tid_bwd,
                "ts": _us(bwd_ts),
                "cat": "fwdbwd",
                "name": "fwdbwd",
                "bp": "e",
            }
        )

    # -- composite ops -----------------------------------------------------------------------

    def _simple(
        self,
        tid: int,
        t: int,
        names: tuple[str, ...],
        dims: tuple[tuple[Any, Any] | None, ...],
        k: _Kernel,
        seq: int | None = None,
    ) -> int:
        """Nested ops names[0] > names[1] > ... > one kernel launch; returns the end time."""
        starts = []
        exts = []
        for _ in names:
            starts.append(t)
            exts.append(self._next_ext())
            t += self._gap(1.5, 6)
        t = self._launch(tid, t, exts[-1], k)
        for i in range(len(names) - 1, -1, -1):
            t += self._gap(1, 4)
            self._op(names[i], tid, starts[i], t, exts[i], dims[i], seq if i == 0 else None)
        return t

    def _transpose(self, tid: int, t: int, tag: str) -> int:
        """aten::t > aten::transpose > aten::as_strided: CPU only, no kernel."""
        d = self.m.dims
        t0 = t
        e0, e1, e2 = self._next_ext(), self._next_ext(), self._next_ext()
        t1 = t0 + self._gap(1, 3)
        t2 = t1 + self._gap(1, 3)
        t3 = t2 + self._gap(1, 2.5)
        self._op("aten::as_strided", tid, t2, t3, e2, d["as_strided" + tag])
        t4 = t3 + self._gap(0.5, 2)
        self._op("aten::transpose", tid, t1, t4, e1, d["transpose" + tag])
        t5 = t4 + self._gap(0.5, 2)
        self._op("aten::t", tid, t0, t5, e0, d["t" + tag])
        return t5

    def _linear(self, tid: int, t: int, tag: str, k: _Kernel) -> tuple[int, int, int]:
        """aten::linear > (aten::t ..., aten::addmm > launch); returns (end, seq, addmm ts)."""
        d = self.m.dims
        self.seq += 1
        seq = self.seq
        t0 = t
        e0 = self._next_ext()
        t = self._transpose(tid, t + self._gap(2, 6), tag)
        t += self._gap(1, 4)
        t_mm = t
        e1 = self._next_ext()
        t = self._launch(tid, t + self._gap(4, 14), e1, k)
        t += self._gap(2, 6)
        self._op("aten::addmm", tid, t_mm, t, e1, d["addmm" + tag], seq)
        t += self._gap(1, 3)
        self._op("aten::linear", tid, t0, t, e0, d["linear" + tag], seq)
        return t, seq, t_mm

    def _fwd_block(self, t: int, b: int, fwd_log: list[tuple[int, int]]) -> int:
        """One block's forward on the main thread (LayerNorm > Linear > GELU > Linear > add)."""
        tid = self.tid_main
        m, k = self.m, self.m.k
        t = self._stall(t, 0.03)
        self.py_id += 1
        py_id = self.py_id
        t_py = t
        t += self._gap(3, 10)
        self.seq += 1
        s = self.seq
        fwd_log.append((s, t))
        t = self._simple(
            tid,
            t,
            ("aten::layer_norm", "aten::native_layer_norm"),
            (m.dims["layer_norm"], m.dims["native_layer_norm"]),
            k["ln"],
            s,
        )
        t, s, ts = self._linear(tid, t + self._gap(2, 8), "1", k["fc1"])
        fwd_log.append((s, ts))
        self.seq += 1
        s = self.seq
        t += self._gap(2, 8)
        fwd_log.append((s, t))
        t = self._simple(tid, t, ("aten::gelu",), (m.dims["gelu"],), k["gelu"], s)
        t, s, ts = self._linear(tid, t + self._gap(2, 8), "2", k["fc2"])
        fwd_log.append((s, ts))
        self.seq += 1
        s = self.seq
        t += self._gap(2, 8)
        fwd_log.append((s, t))
        t = self._simple(tid, t, ("aten::add",), (m.dims["add"],), k["add"], s)
        t += self._gap(3, 9)
        self.out.append(
            {
                "ph": "X",
                "cat": "python_function",
                "name": f"nn.Module: Block_{b}",
                "pid": self.pid,
                "tid": tid,
                "ts": _us(t_py),
                "dur": _us(t - t_py),
                "args": {"Python parent id": 1, "Python id": py_id, "Python thread": 0},
            }
        )
        return t

    def _bwd_node(self, t: int, fwd: tuple[int, int]) -> tuple[int, int, int, int]:
        """Opens an autograd node run; returns (inner start, outer ext, inner ext, seq).

        The fwdbwd flow links the forward op that created the node to its backward.
        """
        seq, fwd_ts = fwd
        self._flows_fwdbwd(fwd_ts, t)
        return t + self._gap(2, 6), self._next_ext(), self._next_ext(), seq

    def _bwd_close(
        self, t: int, node: str, t0: int, t_in: int, opened: tuple[int, int, int, int]
    ) -> int:
        """Closes the node: `Node` inside `autograd::engine::evaluate_function: Node`."""
        tid = self.tid_bwd
        _, e0, e1, seq = opened
        t += self._gap(1, 4)
        self._op(node, tid, t_in, t, e1, None, seq)
        t += self._gap(1, 4)
        self._op(f"autograd::engine::evaluate_function: {node}", tid, t0, t, e0, None, seq)
        return t

    def _bwd_addmm(self, t: int, fwd: tuple[int, int], tag: str) -> int:
        """AddmmBackward0: grad input and grad weight mm, bias grad sum."""
        tid = self.tid_bwd
        d, k = self.m.dims, self.m.k
        t0 = t
        opened = self._bwd_node(t, fwd)
        t_in = opened[0]
        t = t_in + self._gap(2, 5)
        t = self._transpose(tid, t, "h" if tag == "h" else tag)
        kx, kw = (
            (k["head_dx"], k["head_dw"]) if tag == "h" else (k[f"fc{tag}_dx"], k[f"fc{tag}_dw"])
        )
        t = self._simple(tid, t + self._gap(1, 4), ("aten::mm",), (d[f"mm_dx{tag}"],), kx)
        t = self._transpose(tid, t + self._gap(1, 3), "h" if tag == "h" else tag)
        t = self._simple(tid, t + self._gap(1, 4), ("aten::mm",), (d[f"mm_dw{tag}"],), kw)
        t = self._simple(tid, t + self._gap(2, 6), ("aten::sum",), (d[f"sum{tag}"],), k["sum"])
        return self._bwd_close(t, "AddmmBackward0", t0, t_in, opened)

    def _bwd_simple(
        self, t: int, fwd: tuple[int, int], node: str, op: str, dims: Any, kernels: list[_Kernel]
    ) -> int:
        tid = self.tid_bwd
        t0 = t
        opened = self._bwd_node(t, fwd)
        t_in = t = opened[0]
        if kernels:
            start = t + self._gap(2, 5)
            ext = self._next_ext()
            t = start + self._gap(2, 6)
            for kk in kernels:
                t = self._launch(tid, t, ext, kk) + self._gap(1, 4)
            t += self._gap(1, 3)
            self._op(op, tid, start, t, ext, dims)
        return self._bwd_close(t, node, t0, t_in, opened)

    def _accumulate_grad(self, t: int) -> int:
        tid = self.tid_bwd
        d, k = self.m.dims, self.m.k
        t0 = t
        e0, e1 = self._next_ext(), self._next_ext()
        t = self._simple(tid, t + self._gap(3, 8), ("aten::add_",), (d["acc"],), k["acc"])
        t += self._gap(1, 3)
        self._op("torch::autograd::AccumulateGrad", tid, t0 + 1_500, t, e1)
        t += self._gap(1, 3)
        self._op(
            "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
            tid,
            t0,
            t,
            e0,
        )
        return t

    def _bwd_block(self, t: int, fwd: list[tuple[int, int]]) -> int:
        """One block's backward on the autograd thread, in reverse order of the forward."""
        m, k = self.m, self.m.k
        t = self._stall(t, 0.02)
        # fwd = [ln, fc1, gelu, fc2, add]
        t = self._bwd_simple(t, fwd[4], "AddBackward0", "", None, [])
        t = self._bwd_addmm(t + self._gap(2, 6), fwd[3], "2")
        t = self._accumulate_grad(t + self._gap(1, 4))
        t = self._bwd_simple(
            t + self._gap(2, 6),
            fwd[2],
            "GeluBackward0",
            "aten::gelu_backward",
            m.dims["gelu_backward"],
            [k["gelu_bwd"]],
        )
        t = self._bwd_addmm(t + self._gap(2, 6), fwd[1], "1")
        t = self._bwd_simple(
            t + self._gap(2, 6),
            fwd[0],
            "NativeLayerNormBackward0",
            "aten::native_layer_norm_backward",
            m.dims["ln_backward"],
            [k["ln_dx"], k["ln_dw"]],
        )
        return t
