"""The chain's state space and its transitions as arrays: what Table 6's builder
(:mod:`.chain`) and the stacks' (:mod:`.stack_chain`) share, so neither imports the other's
builder. No model here: indexing of ``(w, B, l)`` states (Appendix A.3), the edge record, the
batch of edges one builder call produces, and a segment's loss probability (Appendix A.1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tcpdelay.model.delay.params import MAX_BACKOFF_STAGE, DelayParams


@dataclass(frozen=True)
class StateSpace:
    """Indexing of the truncated state space (Appendix A.3): ``6·(Bm+1) + 2·W·(Bm+1)`` states."""

    W: int
    Bm: int

    @property
    def n_nonto(self) -> int:
        return 2 * self.W * (self.Bm + 1)

    @property
    def n(self) -> int:
        return self.n_nonto + MAX_BACKOFF_STAGE * (self.Bm + 1)

    def index(self, w, B, l):
        """Index of states (vectorized); ``w == 0`` means a timeout state with stage ``l``."""
        w = np.asarray(w, dtype=np.int64)
        B = np.asarray(B, dtype=np.int64)
        l = np.asarray(l, dtype=np.int64)
        nb = self.Bm + 1
        nonto = (l * self.W + w - 1) * nb + B
        to = self.n_nonto + (l - 1) * nb + B
        return np.where(w > 0, nonto, to)

    def decode(self, idx):
        """``(w, B, l)`` arrays of state indices."""
        idx = np.asarray(idx, dtype=np.int64)
        nb = self.Bm + 1
        is_to = idx >= self.n_nonto
        B = np.where(is_to, (idx - self.n_nonto) % nb, idx % nb)
        blk = idx // nb
        w = np.where(is_to, 0, blk % self.W + 1)
        l = np.where(is_to, (idx - self.n_nonto) // nb + 1, blk // self.W)
        return w, B, l


@dataclass
class Edges:
    """Transitions before rounding: one row per (source, event)."""

    src: np.ndarray       # source state index
    w2: np.ndarray        # target window (0: timeout)
    Bf: np.ndarray        # target backlog in packets, before rounding
    l2: np.ndarray        # target l
    prob: np.ndarray      # transition probability
    time_s: np.ndarray    # duration of the transition (eq 5)
    n: np.ndarray         # packets delivered (eq 2), may be fractional with count_fresh_packets
    c: np.ndarray         # 1 if the delays include an RTT of loss recovery (eq 1, s' in FR)
    j0: np.ndarray        # first delay offset in packet intervals 1/f
    jstep: np.ndarray     # 0: all n packets share j0; 1: offsets j0, j0+1, ...
    jb: np.ndarray        # backlog part of each packet's delay, in packet intervals
    is_loss: np.ndarray   # 0 none, 1 fast retransmit, 2 timeout (a loss event detected)


def segment_loss(params: DelayParams, segment_bytes: float) -> float:
    """Loss probability of a segment on the wire (Appendix A.1): ``p`` for a packet-limited
    queue, ``p·M_s/MSS`` for a byte-limited one."""
    if params.queue == "bytes":
        return min(params.loss * segment_bytes / params.mss_bytes, params.loss)
    return params.loss


class EdgeParts:
    """The edges out of a batch of states, part by part (one ``add`` call per event kind, in a
    fixed order), as :class:`Edges` with each edge's part number; shared by Table 6's builder
    and the stacks' (:mod:`.stack_chain`).

    ``add`` keeps its arguments as given (arrays or scalars) and ``edges`` makes each column
    once, a scalar column over all parts by one ``np.repeat``: a build calls ``add`` about a
    thousand times, and making twelve small arrays a call cost more than the chain's solve.
    Zero-probability edges are dropped from the whole, which keeps the same edges in the same
    order as dropping them part by part."""

    def __init__(self) -> None:
        self._parts: list[tuple] = []
        self._sizes: list[int] = []

    def add(self, src, w2, Bf, l2, prob, t, n=0.0, c=0, j0=0.0, jstep=0, jb=0.0, is_loss=0) -> None:
        self._parts.append((src, w2, Bf, l2, prob, t, n, c, j0, jstep, jb, is_loss))
        self._sizes.append(int(np.size(src)))

    def edges(self) -> tuple["Edges", np.ndarray]:
        sizes = np.asarray(self._sizes, dtype=np.int64)
        if not self._parts or not sizes.sum():
            empty = {key: np.zeros(0, dt) for key, dt in _EDGE_DTYPES.items()}
            return Edges(**empty), np.zeros(0, np.int16)
        live = [(m, part) for m, part in zip(self._sizes, self._parts) if m]
        columns = {}
        for k, (key, dtype) in enumerate(_EDGE_DTYPES.items()):
            values = [part[k] for _, part in live]
            if not any(isinstance(v, np.ndarray) and v.ndim for v in values):
                columns[key] = np.repeat(np.asarray(values, dtype=dtype), [m for m, _ in live])
            else:
                columns[key] = np.concatenate([_column(v, dtype, m) for (m, _), v in zip(live, values)])
        ids = np.repeat(np.arange(len(self._parts), dtype=np.int16), sizes)
        keep = columns["prob"] > 0
        if not keep.all():
            columns = {key: v[keep] for key, v in columns.items()}
            ids = ids[keep]
        return Edges(**columns), ids


def _column(x, dtype, m: int) -> np.ndarray:
    """``x`` as ``m`` values of ``dtype`` (a scalar repeated); cheaper than ``np.broadcast_to``
    for the many small calls of a breadth-first build."""
    a = np.asarray(x, dtype=dtype)
    if a.ndim:
        return a
    out = np.empty(m, dtype=dtype)
    out.fill(a)
    return out


_EDGE_DTYPES = {"src": np.int64, "w2": np.int64, "Bf": float, "l2": np.int64, "prob": float, "time_s": float,
                "n": float, "c": np.int8, "j0": float, "jstep": np.int8, "jb": float, "is_loss": np.int8}
