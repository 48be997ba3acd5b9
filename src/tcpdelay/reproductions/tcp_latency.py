"""Cardwell, Savage, Anderson, "Modeling TCP Latency" (INFOCOM 2000): the model against measured
or simulated ``transfers`` runs (docs/experiments/latency-cardwell.md).

Each kind of summary reads one sweep directory of ``experiments/latency-cardwell-*.toml``
(``tcpdelay reproduce latency-cardwell`` runs them, keeps each summary and rewrites the page's tables):

``handshake`` (§III, Figs 3-4): per run, the handshake times of its transfers (``connect()`` to
established) against eqs (1)-(4) with the run's RTT, ``p_f`` (the path's forward loss: SYN/ACK),
``p_r`` (reverse: SYN) and the backend's SYN timeout ``T_s`` (ns-3 3.44: its ``ConnTimeout``,
3 s, the paper's; Linux: 1 s, ``TCP_TIMEOUT_INIT``). The mean with its 95 % interval, the
exact mean of eqs (1)-(2) with the retry limits, eq (4), and the largest distance between the
measured and the model's distribution functions (eq 3), against the 95 % Kolmogorov bound
``1.36 / sqrt(n)``, and the share of handshakes with no backoff (``L_h = RTT``) against eq (1)'s
``(1 - p_f)(1 - p_r)``.

``lossfree`` (§IV-A, Fig 5): per run, the transfer times (first write to the last byte's
ACK) of the transfers that saw no retransmission, against eq (15) with the stack's initial
window and Linux's growth per segment acknowledged (``b = 1``, gamma = 2: both Linux and
ns-3 grow cwnd by the segments an ACK covers), no delayed-ACK cost; the error in RTTs. The
MSS is the run's (its rows' segment size) and, where the receiver's window is clamped
(``tcp.window_clamp_bytes``), eq (15)'s ``W_max`` is the clamp in whole segments
(results/latency-cardwell-lossfree-grid: MSS 536/4312 x W_max 8..512).

``loss`` (§IV-A, Figs 6-9, and Figs 11-13's split): per run, the transfer times against eq
(25)'s mean and §II-E's distribution at the configured loss rate (the same w1 and b; T0 the
model's default, RTT + 200 ms, Linux's and the ns-3 backend's RTO on a steady path), the
steady-state models beside them (PFTK [34]: d / R(p); Mathis [27]: d / X(p), with the same b),
the timeouts per transfer against PFTK's, and papers/001's error by class (``no_loss``,
``fast_retransmit``, ``rto``) with each model at the transfer's own loss rate ``k / (d + k)``
(k its retransmissions): Fig 11's (modeled - measured) / RTT for loss-free transfers, Figs
12-13's median (modeled - measured) / measured; a last row pools every transfer.
:func:`loss_figure` draws Figs 6-9's views, a PNG per transfer size.

``lte`` (§IV-B/C replaced by Mahimahi LTE traces): per size, the transfers over the trace
against eq (15) at the median handshake time (the idle path's RTT), and the time the trace's
mean rate needs for the bytes plus that RTT.

``state`` (Fig 5's probe): the rounds a loss-free transfer took against eq (15)'s, and the
sender's ACK clock from 1-ms TCP state records.

``window`` (Figs 6-9's probe): the window at slow start's end against eq (11) and at the later
loss indications against PFTK's W(p), from the sender's TCP state records.

:func:`markdown` is the page's table of a summary; :func:`write_summary` keeps it as
``summary.json`` in the sweep directory (``state`` and ``window`` also keep the TCP state records
they read as ``tcp_state.parquet``; the page's numbers; tests/experiments/test_repro_latency_cardwell.py
recomputes it from the committed runs).
"""

from __future__ import annotations

import functools
import json
import math
import tomllib
from pathlib import Path

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.scenario import load_scenario
from tcpdelay.model import throughput as tp
from tcpdelay.model.handshake import handshake_cdf, handshake_mean_approx_s, handshake_mean_s
from tcpdelay.model.latency_distribution import loss_scenarios, transfer_distribution
from tcpdelay.model.transfer import transfer_time_s
from tcpdelay.reproductions.sweep_data import REPO_ROOT, run_json, runs, save_figure

#: The initial SYN timeout of each backend (s): ns-3 3.44's TcpSocket::ConnTimeout default, and
#: Linux's TCP_TIMEOUT_INIT (RFC 6298).
SYN_TIMEOUT_S = {"ns3-simulation": 3.0, "testbed": 1.0}
#: Linux's growth per segment acknowledged (ns-3's TcpLinuxReno and CUBIC too): the model's b = 1.
ACKS_PER_SEGMENT = 1
#: The congestion controls that grow by one segment per ACK in slow start, whatever the ACK
#: covers (ns-3's TcpNewReno: ``TcpNewReno::SlowStart``), as the paper's TCP: with a receiver
#: that ACKs every second segment the model's b = 2 (gamma = 1.5).
PER_ACK_GROWTH = ("newreno",)
#: The receiver's delayed-ACK timer in those runs (s): ns-3's DelAckTimeout as the backend sets
#: it (Linux's TCP_ATO_MIN), the model's E[T_delay] when w1 = 1 leaves a segment alone.
DELAYED_ACK_S = 0.04


def model_stack(rj: dict) -> tuple[int, float]:
    """``(b, delayed_ack_s)`` for the model from the stack a run used: b = 2 and the receiver's
    delayed-ACK timer when the server's congestion control grows per ACK (:data:`PER_ACK_GROWTH`),
    else b = 1 and no delayed-ACK cost (growth per segment acknowledged makes delayed ACKs cost
    no window; a lone first segment's ACK is not held by Linux's quick-ACK mode)."""
    server = rj["run"]["cross"][0]["server_host"]
    cc = next(h["tcp"].get("congestion_control") for h in rj["run"]["hosts"] if h["name"] == server)
    return (2, DELAYED_ACK_S) if cc in PER_ACK_GROWTH else (ACKS_PER_SEGMENT, 0.0)


def _backend(rj: dict) -> str:
    return "ns3-simulation" if rj.get("clock") == "ns3-simulation" else "testbed"


def _loss(direction) -> float:
    loss = direction.loss
    return float(getattr(loss, "p", 0.0)) if loss is not None else 0.0


def _rows(rj: dict) -> list[dict]:
    return [t for c in rj["run"]["cross"] for t in c["result"].get("transfers", [])]


def handshake_summary(sweep_dir: Path) -> list[dict]:
    out = []
    for r in runs(sweep_dir):
        rj = run_json(r["dir"])
        sc = load_scenario(r["dir"] / "scenario.toml")
        fwd, rev = sc.path.direction("forward"), sc.path.direction("reverse")
        rtt = fwd.delay_s + rev.delay_s
        pf, pr = _loss(fwd), _loss(rev)
        ts = SYN_TIMEOUT_S[_backend(rj)]
        h = np.array([t["handshake_s"] for t in _rows(rj) if t["handshake_s"] is not None], dtype=float)
        n = len(h)
        # eq (3) against the measured distribution at each measured value, to the millisecond
        # (a simulated handshake takes RTT + backoffs + ~0.2 us of serialisation)
        grid = np.unique(np.round(h, 3))
        model_cdf = handshake_cdf(grid + 5e-4, rtt, pf, pr, ts)
        meas_cdf = np.searchsorted(np.sort(h), grid + 5e-4, side="right") / n
        mean, sd = float(h.mean()), float(h.std(ddof=1)) if n > 1 else 0.0
        out.append({"cell": r["cell_id"], "backend": _backend(rj), "rtt_s": rtt, "p_f": pf, "p_r": pr,
                    "syn_timeout_s": ts, "trials": n,
                    "mean_s": round(mean, 4), "ci95_s": round(1.96 * sd / math.sqrt(n), 4) if n > 1 else None,
                    "model_mean_s": round(float(handshake_mean_s(rtt, pf, pr, ts)), 4),
                    "approx_mean_s": None if math.isnan(a := float(handshake_mean_approx_s(rtt, pf, pr, ts)))
                    else round(a, 4),
                    "cdf_max_gap": round(float(np.max(np.abs(meas_cdf - model_cdf))), 4),
                    "ks_bound_95": round(1.36 / math.sqrt(n), 4),
                    "no_backoff_frac": round(float(np.mean(h < rtt + 0.5 * ts)), 4),
                    "model_no_backoff_frac": round(float(handshake_cdf(rtt + 0.5 * ts, rtt, pf, pr, ts)), 4)})
    return sorted(out, key=lambda x: (x["p_f"], x["p_r"]))


def _transfer_run(r: dict) -> tuple:
    """A transfers run: its run.json, RTT, forward direction, transfers table, the finished
    transfers, the server's initial window and the size in segments."""
    rj = run_json(r["dir"])
    sc = load_scenario(r["dir"] / "scenario.toml")
    fwd, rev = sc.path.direction("forward"), sc.path.direction("reverse")
    cross = sc.cross[0]
    rows = [t for t in _rows(rj) if t["transfer_s"] is not None]
    mss = rows[0]["mss_bytes"] if rows else None
    w1 = next(h["tcp"].get("initcwnd_segments") for h in rj["run"]["hosts"] if h["name"] == rj["run"]["cross"][0]["server_host"])
    d = math.ceil(cross.size_bytes / mss) if mss else None
    return rj, fwd.delay_s + rev.delay_s, fwd, cross, rows, mss, w1, d


def w_max_segments(cross, rows: list[dict], mss: int | None) -> int | None:
    """eq (15)'s ``W_max`` of a transfers flow: the receiver's window clamp in whole segments;
    ``None`` without a clamp (the stack's buffers are the only limit, as in the first loss-free
    runs). The window is what the sender saw advertised where the rows have it (Linux: the
    client's last window, ``peer_window_last_bytes``, the clamp rounded down to its receive MSS;
    rows from before that column have only the largest, ``peer_window_max_bytes``, which with an
    MSS above 536 includes the first round's window before the client set its clamp again —
    src/tcpdelay/traffic/transfers.py), else the clamp the rows read back, else the scenario's
    ``tcp.window_clamp_bytes`` (ns-3 advertises the clamp)."""
    if not cross.tcp.window_clamp_bytes or not mss:
        return None
    key = "peer_window_last_bytes" if any(t.get("peer_window_last_bytes") for t in rows) else "peer_window_max_bytes"
    seen = [t[key] for t in rows if t.get(key)]
    clamp = max(seen) if seen else next((t["window_clamp_bytes"] for t in rows if t.get("window_clamp_bytes")),
                                        cross.tcp.window_clamp_bytes)
    return int(clamp) // int(mss)


def lossfree_summary(sweep_dir: Path) -> list[dict]:
    """Per run, eq (15) with the run's MSS (the rows' segment size) and, with a window clamp, its
    ``W_max`` (rows of such runs carry ``w_max``; those without keep the first runs' columns)."""
    out = []
    for r in runs(sweep_dir):
        rj, rtt, _, cross, rows, mss, w1, d = _transfer_run(r)
        w_max = w_max_segments(cross, rows, mss)
        clean = [t for t in rows if t["class"] == "no_loss"]
        t = np.array([x["transfer_s"] for x in clean], dtype=float)
        b, delack = model_stack(rj)
        model = float(transfer_time_s(d, 0.0, rtt, w1=w1, b=b, delayed_ack=delack,
                                      w_max=np.inf if w_max is None else w_max)) if d else None
        row = {"cell": r["cell_id"], "backend": _backend(rj), "rtt_s": rtt, "size_bytes": cross.size_bytes,
               "mss_bytes": mss, "d": d, "w1": w1, "b": b, "delayed_ack_s": delack}
        if w_max is not None:
            row["w_max"] = w_max
        row.update({"transfers": len(rows), "no_loss": len(clean),
                    "mean_s": round(float(t.mean()), 4) if len(t) else None,
                    "min_s": round(float(t.min()), 4) if len(t) else None,
                    "max_s": round(float(t.max()), 4) if len(t) else None,
                    "model_s": round(model, 4) if model is not None else None,
                    "error_rtts": round((float(t.mean()) - model) / rtt, 3) if len(t) and model is not None else None})
        out.append(row)
    # the grid's runs by MSS and W_max first; runs without a clamp as before (RTT, size)
    return sorted(out, key=lambda x: (x["mss_bytes"] if "w_max" in x else 0, x.get("w_max", 0), x["rtt_s"],
                                      x["size_bytes"]))


#: the models of Figs 12-13: eq (25), PFTK [34] (d / R) and Mathis [27] (d / X)
MODELS = ("eq25", "pftk", "mathis")


def flow_loss_rate(t: dict, d: int) -> float:
    """The loss rate a transfer saw, as §II-E counts it: ``k / (d + k)`` for ``k``
    retransmissions while its ``d`` segments got through (0 for a transfer without one)."""
    k = t["retransmits"] or 0
    return k / (d + k)


def _q(x, q: float):
    return round(float(np.quantile(x, q)), 4) if len(x) else None


def _median(x):
    return round(float(np.median(x)), 3) if len(x) else None


def _class_errors(flows: list[dict]) -> dict:
    """Figs 11-13's errors over ``flows`` (dicts with ``class``, ``transfer_s``, ``rtt_s`` and the
    models' predictions at the flow's own loss rate). Fig 11 (no loss): eq (15)'s error
    ``(modeled - measured) / RTT``, its median and the share within one RTT, and the median
    relative error; Figs 12-13 (fast retransmit only; at least one RTO): the median relative
    error ``(modeled - measured) / measured`` of eq (25), PFTK [34] (d / R) and Mathis [27]."""
    out = {}
    nl = [f for f in flows if f["class"] == "no_loss"]
    e_rtt = np.array([(f["eq25_s"] - f["transfer_s"]) / f["rtt_s"] for f in nl])
    out["no_loss_n"] = len(nl)
    out["no_loss_median_err_rtts"] = _median(e_rtt)
    out["no_loss_within_1rtt"] = round(float(np.mean(np.abs(e_rtt) <= 1.0 + 1e-9)), 3) if len(nl) else None
    out["no_loss_median_rel_err"] = _median([(f["eq25_s"] - f["transfer_s"]) / f["transfer_s"] for f in nl])
    for cls in ("fast_retransmit", "rto"):
        fl = [f for f in flows if f["class"] == cls]
        out[f"{cls}_n"] = len(fl)
        for m in MODELS:
            out[f"{cls}_{m}_median_rel_err"] = _median([(f[m + "_s"] - f["transfer_s"]) / f["transfer_s"] for f in fl])
    return out


def _loss_flows(rtt: float, d: int, w1: float, rows: list[dict], b: int = ACKS_PER_SEGMENT,
                delack: float = 0.0) -> list[dict]:
    """Each finished transfer with its own loss rate and what each model predicts at it (eq 25,
    PFTK's d / R and Mathis's d / X; the last two have no value without loss)."""
    out = []
    t0 = float(tp.default_t0_s(rtt))
    for t in rows:
        pk = flow_loss_rate(t, d)
        out.append({"class": t["class"], "transfer_s": t["transfer_s"], "rtt_s": rtt, "p": pk,
                    "eq25_s": float(transfer_time_s(d, pk, rtt, t0_s=t0, w1=w1, b=b, delayed_ack=delack)),
                    "pftk_s": d / float(tp.pftk_segments_per_s(pk, rtt, t0, b)) if pk > 0 else None,
                    "mathis_s": d / float(tp.mathis_segments_per_s(pk, rtt, b)) if pk > 0 else None})
    return out


def _loss_cell(r: dict) -> tuple[dict, list[dict]]:
    rj, rtt, fwd, cross, rows, mss, w1, d = _transfer_run(r)
    p = _loss(fwd)
    b, delack = model_stack(rj)
    t0 = float(tp.default_t0_s(rtt))
    t = np.array([x["transfer_s"] for x in rows], dtype=float)
    n = len(t)
    model = float(transfer_time_s(d, p, rtt, t0_s=t0, w1=w1, b=b, delayed_ack=delack))
    dist = transfer_distribution(d, p, rtt, t0_s=t0, w1=w1, b=b, delayed_ack=delack)
    k = sum(x["retransmits"] or 0 for x in rows)
    grid = np.unique(t)
    meas_cdf = np.searchsorted(np.sort(t), grid, side="right") / n
    # the measured CDF jumps at each value: compare the model with both sides of each step
    below = np.searchsorted(np.sort(t), grid, side="left") / n
    model_cdf = np.asarray(dist.cdf(grid), dtype=float)
    gap = float(max(np.max(np.abs(meas_cdf - model_cdf)), np.max(np.abs(below - model_cdf))))
    row = {"cell": r["cell_id"], "backend": _backend(rj), "rtt_s": rtt, "p": p, "size_bytes": cross.size_bytes,
           "mss_bytes": mss, "d": d, "w1": w1, "b": b, "delayed_ack_s": delack, "t0_s": round(t0, 4), "transfers": n,
           "incomplete": len(_rows(rj)) - n,
           "flow_loss_rate": round(k / (n * d + k), 4),
           "mean_s": round(float(t.mean()), 4), "ci95_s": round(1.96 * float(t.std(ddof=1)) / math.sqrt(n), 4),
           "model_s": round(model, 4), "dist_mean_s": round(dist.mean(), 4),
           "pftk_s": round(d / float(tp.pftk_segments_per_s(p, rtt, t0, b)), 4),
           "mathis_s": round(d / float(tp.mathis_segments_per_s(p, rtt, b)), 4)}
    row["error"] = round(model / row["mean_s"] - 1, 3)
    # timeouts: measured per transfer against the timeout sequences PFTK (inside eq 25) expects,
    # d p Q(p, W(p)): a loss indication per segment with probability p, a timeout with Q
    w_p = float(tp.expected_loss_window(p, b)) if p > 0 else None
    row["rtos_per_transfer"] = round(float(np.mean([x["rtos"] or 0 for x in rows])), 3)
    row["pftk_timeouts_per_transfer"] = round(d * p * float(tp.timeout_probability(p, w_p)), 3) if p > 0 else 0.0
    for q in (0.25, 0.5, 0.75, 0.9):
        row[f"p{round(q * 100)}_s"] = _q(t, q)
        row[f"model_p{round(q * 100)}_s"] = round(float(dist.quantile(q)), 4)
    row["cdf_max_gap"] = round(gap, 4)
    row["ks_bound_95"] = round(1.36 / math.sqrt(n), 4)
    flows = _loss_flows(rtt, d, w1, rows, b, delack)
    for cls in ("no_loss", "fast_retransmit", "rto"):
        c = [x["transfer_s"] for x in rows if x["class"] == cls]
        row[f"{cls}_mean_s"] = round(float(np.mean(c)), 4) if c else None
    row.update(_class_errors(flows))
    return row, flows


def loss_summary(sweep_dir: Path) -> list[dict]:
    """Transfers with loss (§IV-A, Figs 6-9) against eq (25)'s mean and §II-E's distribution at
    the configured p, the steady-state models beside them, and the error by class (Figs 11-13)
    at each transfer's own loss rate; a last row (``cell`` "all") pools the classes' errors over
    every transfer of the sweep, as the paper pools its HTTP flows."""
    out, flows = [], []
    for r in runs(sweep_dir):
        row, f = _loss_cell(r)
        out.append(row)
        flows += f
    out.sort(key=lambda x: (x["size_bytes"], x["p"]))
    if out:
        out.append({"cell": "all", "transfers": len(flows), **_class_errors(flows)})
    return out


def loss_figure(sweep_dir: Path, prefix: Path) -> list[Path]:
    """Figs 6-9's views, one PNG per transfer size (PREFIX-<size>kB.png), a row per loss rate:
    left, each transfer's latency against the loss rate it saw (by class), with eq (25), PFTK's
    d / R and Mathis's d / X as curves of the loss rate, §II-E's scenarios (eq 25 at k / (d + k),
    marker area by probability) and the means at the configured p; right, the measured
    distribution against §II-E's, with the measured mean and eq (25)'s."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = {}
    for r in runs(sweep_dir):
        rj, rtt, fwd, cross, rows, mss, w1, d = _transfer_run(r)
        cells.setdefault(cross.size_bytes, []).append((_loss(fwd), rtt, w1, d, rows, *model_stack(rj)))
    colours = {"no_loss": "tab:green", "fast_retransmit": "tab:blue", "rto": "tab:red"}
    paths = []
    for size, cs in sorted(cells.items()):
        cs.sort(key=lambda c: c[0])
        fig, axes = plt.subplots(len(cs), 2, figsize=(10, 3.2 * len(cs)), squeeze=False)
        for (p, rtt, w1, d, rows, b, delack), (ax, bx) in zip(cs, axes):
            t0 = float(tp.default_t0_s(rtt))
            t = np.array([x["transfer_s"] for x in rows])
            pk = np.array([flow_loss_rate(x, d) for x in rows])
            for cls, col in colours.items():
                m = np.array([x["class"] == cls for x in rows])
                if m.any():
                    ax.scatter(pk[m], t[m], s=12, color=col, alpha=0.7, label=f"{cls} ({m.sum()})")
            hi = max(float(pk.max()), p) * 1.15 + 1e-4
            grid = np.linspace(hi / 400, hi, 400)
            ax.plot(grid, transfer_time_s(d, grid, rtt, t0_s=t0, w1=w1, b=b, delayed_ack=delack), "k-", lw=1.2,
                    label="eq 25")
            ax.plot(grid, d / tp.pftk_segments_per_s(grid, rtt, t0, b), "--", color="tab:purple",
                    lw=1, label="PFTK d/R [34]")
            ax.plot(grid, d / tp.mathis_segments_per_s(grid, rtt, b), ":", color="tab:brown",
                    lw=1.2, label="Mathis d/X [27]")
            dist = transfer_distribution(d, p, rtt, t0_s=t0, w1=w1, b=b, delayed_ack=delack)
            ks, ws, pks, _ = loss_scenarios(d, p)
            keep = ws > 1e-3
            ax.scatter(pks[keep], dist.atoms_s[keep], s=400 * ws[keep], facecolors="none", edgecolors="k",
                       lw=0.8, label="§II-E scenarios")
            ax.axhline(float(t.mean()), color="tab:orange", lw=1, label=f"measured mean {t.mean():.2f} s")
            ax.axhline(float(transfer_time_s(d, p, rtt, t0_s=t0, w1=w1, b=b, delayed_ack=delack)), color="k", lw=0.8,
                       ls="-.", label="eq 25 mean at p")
            top = max(float(t.max()), float(dist.quantile(0.995))) * 1.15
            ax.set_ylim(0, top)
            ax.set_xlim(-hi * 0.02, hi)
            ax.set_xlabel("loss rate the transfer saw, k/(d+k)")
            ax.set_ylabel("transfer latency (s)")
            ax.set_title(f"{size // 1024} kB, p = {p:g}, RTT {rtt * 1000:g} ms, w1 = {w1}")
            ax.legend(fontsize=6.5, loc="upper left")
            xs = np.sort(t)
            bx.step(xs, np.arange(1, len(xs) + 1) / len(xs), where="post", color="tab:orange",
                    label=f"measured ({len(xs)})")
            g = np.linspace(0, top, 600)
            bx.plot(g, dist.cdf(g), "k-", lw=1, label="§II-E distribution")
            bx.axvline(float(t.mean()), color="tab:orange", lw=0.8, ls="--", label="measured mean")
            bx.axvline(float(transfer_time_s(d, p, rtt, t0_s=t0, w1=w1, b=b, delayed_ack=delack)), color="k", lw=0.8,
                       ls="-.", label="eq 25 mean")
            bx.set_xlim(0, top)
            bx.set_xlabel("transfer latency (s)")
            bx.set_ylabel("fraction of transfers")
            bx.legend(fontsize=7, loc="lower right")
        path = prefix.with_name(f"{prefix.stem}-{size // 1024}kB.png")
        save_figure(fig, path)
        plt.close(fig)
        paths.append(path)
    return paths


@functools.lru_cache(maxsize=None)
def _trace_rate_bps(name: str) -> float:
    """A Mahimahi trace's mean rate: one 1500-byte delivery opportunity per line, over the
    trace's length in ms (its last timestamp)."""
    ms = np.loadtxt(REPO_ROOT / "data" / "links" / "mahimahi" / name, dtype=np.int64, ndmin=1)
    return len(ms) * 1500 * 8 / (float(ms[-1]) / 1000.0)


def lte_summary(sweep_dir: Path) -> list[dict]:
    """§IV-B/C replaced: transfers over a Mahimahi LTE trace (no loss) against eq (15) at the RTT
    of the cell's handshakes (median of connect() to established on the idle path), and the
    time the trace's mean rate needs for the bytes (plus that RTT) as the rate's reference.
    The scenario is read as written (its trace path is the machine's that ran it); the trace is
    the repository's file of that name."""
    out = []
    for r in runs(sweep_dir):
        rj = run_json(r["dir"])
        sc = tomllib.loads((r["dir"] / "scenario.toml").read_text())
        trace = Path(sc["path"]["forward"]["trace"]).name
        size = int(sc["cross"][0]["size_bytes"])
        server = rj["run"]["cross"][0]["server_host"]
        w1 = next(h["tcp"].get("initcwnd_segments") for h in rj["run"]["hosts"] if h["name"] == server)
        rows = [t for t in _rows(rj) if t["transfer_s"] is not None]
        mss = rows[0]["mss_bytes"]
        d = math.ceil(size / mss)
        t = np.array([x["transfer_s"] for x in rows], dtype=float)
        rtt = float(np.median([x["handshake_s"] for x in rows]))
        model = float(transfer_time_s(d, 0.0, rtt, w1=w1, b=ACKS_PER_SEGMENT))
        rate = _trace_rate_bps(trace)
        k = sum(x["retransmits"] or 0 for x in rows)
        mean = float(t.mean())
        out.append({"cell": r["cell_id"], "backend": _backend(rj), "trace": trace, "trace_rate_bps": round(rate),
                    "base_rtt_s": float(sc["path"]["rtt_s"]), "size_bytes": size, "d": d, "w1": w1,
                    "transfers": len(rows), "incomplete": len(_rows(rj)) - len(rows),
                    "loss_rate_seen": round(k / (len(rows) * d + k), 4),
                    "handshake_rtt_s": round(rtt, 4),
                    "mean_s": round(mean, 4), "ci95_s": round(1.96 * float(t.std(ddof=1)) / math.sqrt(len(t)), 4),
                    "p50_s": _q(t, 0.5), "p90_s": _q(t, 0.9),
                    "model_s": round(model, 4),
                    "error_rtts": round((model - mean) / rtt, 2), "rel_error": round(model / mean - 1, 3),
                    "rate_time_s": round(size * 8 / rate + rtt, 4)})
    return sorted(out, key=lambda x: x["size_bytes"])


#: The TCP state columns the probes read; :func:`write_summary` keeps them for every run in the sweep's
#: ``tcp_state.parquet`` (a run's own record parts are not committed, results/.gitignore).
STATE_COLUMNS = ("connection", "time_s", "cwnd_segments", "bytes_acked", "ca_state")


def _state_records(r: dict, sweep_dir: Path) -> list[dict]:
    """A run's TCP state records (the probes' columns): from its record parts where the run is
    on this machine, else from the sweep's committed ``tcp_state.parquet``."""
    import pyarrow.parquet as pq

    files = sorted((r["dir"] / "tcp_state").glob("*.parquet"))
    if files:
        return [{k: x[k] for k in STATE_COLUMNS} for f in files for x in pq.read_table(f).to_pylist()]
    kept = sweep_dir / "tcp_state.parquet"
    if not kept.is_file():
        raise ParameterError(f"{r['dir']}: no TCP state records (tcp_state/) and no {kept}")
    t = pq.read_table(kept, filters=[("cell_id", "=", r["cell_id"])])
    return [{k: x[k] for k in STATE_COLUMNS} for x in t.to_pylist()]


def write_state_records(sweep_dir: Path) -> Path:
    """Every run's TCP state records (the probes' columns, by cell) in one committed file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"cell_id": r["cell_id"], **x} for r in runs(sweep_dir) for x in _state_records(r, sweep_dir)]
    out = sweep_dir / "tcp_state.parquet"
    pq.write_table(pa.Table.from_pylist(rows), out, compression="zstd")
    return out


def state_summary(sweep_dir: Path) -> list[dict]:
    """Fig 5's probe: per cell, the rounds the first transfer took (transfer time / RTT) against
    eq (15)'s, and the sender's ACK clock from its 1-ms TCP state records: at each change of
    (cwnd, bytes acknowledged), the ms since the connection's first record, the segments
    acknowledged and cwnd."""
    out = []
    for r in runs(sweep_dir):
        rj, rtt, _, cross, rows, mss, w1, d = _transfer_run(r)
        first = min(rows, key=lambda x: x["index"])
        recs = _state_records(r, sweep_dir)
        conn = min(x["connection"] for x in recs)
        recs = sorted((x for x in recs if x["connection"] == conn), key=lambda x: x["time_s"])
        steps, prev = [], None
        for x in recs:
            key = (x["cwnd_segments"], x["bytes_acked"])
            if key != prev and x["bytes_acked"]:
                steps.append([round((x["time_s"] - recs[0]["time_s"]) * 1000), x["bytes_acked"] // mss,
                              x["cwnd_segments"]])
            prev = key
        out.append({"cell": r["cell_id"], "backend": _backend(rj), "rtt_s": rtt, "d": d, "w1": w1,
                    "transfer_s": round(first["transfer_s"], 4), "rounds": round(first["transfer_s"] / rtt, 2),
                    "model_rounds": round(float(transfer_time_s(d, 0.0, rtt, w1=w1, b=ACKS_PER_SEGMENT)) / rtt, 2),
                    "acks": steps})
    return sorted(out, key=lambda x: x["rtt_s"])


def window_summary(sweep_dir: Path) -> list[dict]:
    """Figs 6-9's probe: from the sender's TCP state records, per cell, the window when slow
    start ended (cwnd at the first loss indication: entry into recovery or loss) against eq
    (11)'s E[W_ss], and the window at the later loss indications against PFTK's W(p), the
    window at which eq (22) has the sender lose; mean over the transfers / indications."""
    from tcpdelay.model import transfer as tr

    out = []
    for r in runs(sweep_dir):
        rj, rtt, fwd, cross, rows, mss, w1, d = _transfer_run(r)
        p = _loss(fwd)
        recs = _state_records(r, sweep_dir)
        first, later = [], []
        for conn in sorted({x["connection"] for x in recs}):
            seq = sorted((x for x in recs if x["connection"] == conn), key=lambda x: x["time_s"])
            marks = [a["cwnd_segments"] for a, b in zip(seq, seq[1:])
                     if a["ca_state"] in (0, 1) and b["ca_state"] in (3, 4)]
            if marks:
                first.append(marks[0])
                later += marks[1:]
        dss = float(tr.expected_slow_start_data(d, p))
        out.append({"cell": r["cell_id"], "backend": _backend(rj), "rtt_s": rtt, "p": p, "d": d, "w1": w1,
                    "transfers": len(rows), "with_loss": len(first),
                    "ss_end_cwnd": round(float(np.mean(first)), 1) if first else None,
                    "model_ss_end_cwnd": round(float(tr.slow_start_window(dss, w1, ACKS_PER_SEGMENT)), 1),
                    "indications": len(later),
                    "loss_cwnd": round(float(np.mean(later)), 1) if later else None,
                    "pftk_loss_window": round(float(tp.expected_loss_window(p, ACKS_PER_SEGMENT)), 1),
                    "rtos_per_transfer": round(float(np.mean([x["rtos"] or 0 for x in rows])), 2),
                    "indications_per_transfer": round((len(first) + len(later)) / len(rows), 1)})
    return sorted(out, key=lambda x: x["p"])


SUMMARIES = {"handshake": handshake_summary, "lossfree": lossfree_summary, "loss": loss_summary, "lte": lte_summary, "state": state_summary, "window": window_summary}


def _pct(x) -> str:
    return "—" if x is None else f"{x:+.0%}"


def markdown(s: dict, part: str = "main") -> str:
    """The page's table of a summary (docs/experiments/latency-cardwell.md); a ``loss`` summary
    has two: ``main`` (means and distributions, Figs 6-9) and ``class`` (Figs 11-13)."""
    if s["kind"] == "window":
        out = ["| p | transfers | cwnd at the first loss (segments) | eq (11) E[W_ss] | loss indications per transfer | "
               "cwnd at the later ones | PFTK W(p) | timeouts per transfer |", "|---|---|---|---|---|---|---|---|"]
        out += [f"| {r['p']:g} | {r['transfers']} | {r['ss_end_cwnd']} | {r['model_ss_end_cwnd']} | "
                f"{r['indications_per_transfer']} | {r['loss_cwnd']} | {r['pftk_loss_window']} | {r['rtos_per_transfer']} |"
                for r in s["rows"]]
        return "\n".join(out)
    if s["kind"] == "state":
        out = ["| RTT (ms) | d | rounds (transfer / RTT) | eq 15 rounds | ms after the first record: segments acknowledged (cwnd) |",
               "|---|---|---|---|---|"]
        out += [f"| {r['rtt_s'] * 1000:g} | {r['d']} | {r['rounds']:.2f} | {r['model_rounds']:.2f} | "
                + "; ".join(f"{t}: {a} ({c})" for t, a, c in r["acks"]) + " |" for r in s["rows"]]
        return "\n".join(out)
    if s["kind"] == "lte":
        out = ["| trace (mean rate) | size | d | transfers | handshake RTT (s) | mean ± 95 % (s) | median / 90th pct (s) | "
               "eq 15 (s) | (eq 15 − mean) / RTT | relative | bytes at the mean rate + RTT (s) | retransmitted |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        out += [f"| {r['trace'].rsplit('.', 1)[0]} ({r['trace_rate_bps'] / 1e6:.1f} Mb/s) | "
                f"{r['size_bytes']} B | {r['d']} | {r['transfers']} | {r['handshake_rtt_s']:.3f} | "
                f"{r['mean_s']:.3f} ± {r['ci95_s']:.3f} | {r['p50_s']:.3f} / {r['p90_s']:.3f} | {r['model_s']:.3f} | "
                f"{r['error_rtts']:+.2f} | {r['rel_error']:+.0%} | {r['rate_time_s']:.3f} | {r['loss_rate_seen']:.2%} |"
                for r in s["rows"]]
        return "\n".join(out)
    if s["kind"] == "loss" and part == "class":
        out = ["| size | p | no loss: n | eq 15 within 1 RTT | median (model − measured) / RTT | "
               "fast retransmit only: n | median rel. error eq 25 / PFTK / Mathis | RTO: n | "
               "median rel. error eq 25 / PFTK / Mathis |", "|---|---|---|---|---|---|---|---|---|"]
        for r in s["rows"]:
            head = "all | all" if r["cell"] == "all" else f"{r['size_bytes'] // 1024} kB | {r['p']:g}"
            nl = (f"{r['no_loss_within_1rtt']:.0%} | {r['no_loss_median_err_rtts']:+.2f}" if r["no_loss_n"]
                  else "— | —")
            cls = [f"{r[c + '_n']} | " + (" / ".join(_pct(r[f"{c}_{m}_median_rel_err"]) for m in MODELS)
                                           if r[c + "_n"] else "—") for c in ("fast_retransmit", "rto")]
            out.append(f"| {head} | {r['no_loss_n']} | {nl} | {cls[0]} | {cls[1]} |")
        return "\n".join(out)
    if s["kind"] == "loss":
        out = ["| size | p | transfers | loss rate seen | mean ± 95 % (s) | eq 25 (s) | §II-E mean (s) | "
               "PFTK d/R (s) | Mathis d/X (s) | median: measured / §II-E (s) | 90th pct: measured / §II-E (s) | "
               "max CDF gap | 95 % KS bound | RTOs per transfer: measured / PFTK |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        out += [f"| {r['size_bytes'] // 1024} kB | {r['p']:g} | {r['transfers']} | {r['flow_loss_rate']:.4f} | "
                f"{r['mean_s']:.3f} ± {r['ci95_s']:.3f} | {r['model_s']:.3f} | {r['dist_mean_s']:.3f} | "
                f"{r['pftk_s']:.3f} | {r['mathis_s']:.3f} | {r['p50_s']:.3f} / {r['model_p50_s']:.3f} | "
                f"{r['p90_s']:.3f} / {r['model_p90_s']:.3f} | {r['cdf_max_gap']:.3f} | {r['ks_bound_95']:.3f} | "
                f"{r['rtos_per_transfer']:.2f} / {r['pftk_timeouts_per_transfer']:.2f} |"
                for r in s["rows"] if r["cell"] != "all"]
        return "\n".join(out)
    if s["kind"] == "lossfree" and any("w_max" in r for r in s["rows"]):
        name = "ns-3" if all(r["backend"] == "ns3-simulation" for r in s["rows"]) else "Linux"
        out = [f"| MSS (B) | W_max (segments) | RTT (ms) | d (segments) | {name} (s) | eq 15 (s) | error (RTTs) |",
               "|---|---|---|---|---|---|---|"]
        out += [f"| {r['mss_bytes']} | {r.get('w_max', '∞')} | {r['rtt_s'] * 1000:g} | {r['d']} | {r['mean_s']:.4f} | "
                f"{r['model_s']:.4f} | {r['error_rtts']:+.2f} |" for r in s["rows"]]
        return "\n".join(out)
    if s["kind"] == "lossfree":
        name = "ns-3" if all(r["backend"] == "ns3-simulation" for r in s["rows"]) else "Linux"
        out = [f"| RTT (ms) | d (segments) | {name} (s) | eq 15 (s) | error (RTTs) |", "|---|---|---|---|---|"]
        out += [f"| {r['rtt_s'] * 1000:g} | {r['d']} | {r['mean_s']:.4f} | {r['model_s']:.4f} | {r['error_rtts']:+.2f} |"
                for r in s["rows"]]
        return "\n".join(out)
    out = ["| backend | p_f | p_r | trials | mean ± 95 % (s) | eqs 1–2 mean (s) | eq 4 (s) | max CDF gap | "
           "95 % KS bound |", "|---|---|---|---|---|---|---|---|---|"]
    for r in s["rows"]:
        name = "ns-3" if r["backend"] == "ns3-simulation" else "Linux"
        approx = "—" if r["approx_mean_s"] is None else f"{r['approx_mean_s']:.3f}"
        out.append(f"| {name} (T_s {r['syn_timeout_s']:g} s) | {r['p_f']:g} | {r['p_r']:g} | {r['trials']} | "
                   f"{r['mean_s']:.3f} ± {r['ci95_s']:.3f} | {r['model_mean_s']:.3f} | {approx} | "
                   f"{r['cdf_max_gap']:.3f} | {r['ks_bound_95']:.3f} |")
    return "\n".join(out)


#: Each committed summary's tables on the page (docs/experiments/latency-cardwell.md): its results
#: directory -> (the marker the table follows, the part of :func:`markdown`).
PAGE_TABLES = {
    "latency-cardwell-fig3": [("fig3", "main")], "latency-cardwell-fig4": [("fig4", "main")],
    "latency-cardwell-lossfree": [("lossfree", "main")],
    "latency-cardwell-loss": [("loss", "main"), ("loss-class", "class")],
    "latency-cardwell-loss-nosack": [("loss-nosack", "main"), ("loss-nosack-class", "class")],
    "latency-cardwell-fig3-linux": [("fig3-linux", "main")],
    "latency-cardwell-loss-iw10": [("loss-iw10", "main"), ("loss-iw10-class", "class")],
    "latency-cardwell-lte-verizon": [("lte-verizon", "main")], "latency-cardwell-lte-tmobile": [("lte-tmobile", "main")],
    "latency-cardwell-lte-att": [("lte-att", "main")],
    "latency-cardwell-lossfree-state": [("lossfree-state", "main")],
    "latency-cardwell-loss-state": [("loss-state", "main")],
    "latency-cardwell-loss-iw10-state": [("loss-iw10-state", "main")],
    "latency-cardwell-lossfree-linux-rtt64": [("lossfree-linux", "main")],
    "latency-cardwell-lossfree-linux-rtt16": [("lossfree-linux-rtt16", "main")],
    "latency-cardwell-lossfree-linux-rtt256": [("lossfree-linux-rtt256", "main")],
    "latency-cardwell-lossfree-paper": [("lossfree-paper", "main")],
    "latency-cardwell-loss-paper": [("loss-paper", "main"), ("loss-paper-class", "class")],
    "latency-cardwell-loss-linux": [("loss-linux", "main"), ("loss-linux-class", "class")],
    "latency-cardwell-lossfree-linux-iw10": [("lossfree-linux-iw10", "main")],
    "latency-cardwell-loss-linux-iw10": [("loss-linux-iw10", "main"), ("loss-linux-iw10-class", "class")],
    "latency-cardwell-lossfree-grid": [("lossfree-grid", "main")],
    "latency-cardwell-fig4-linux": [("fig4-linux", "main")],
    "latency-cardwell-lte-verizon-linux": [("lte-verizon-linux", "main")],
    "latency-cardwell-lte-tmobile-linux": [("lte-tmobile-linux", "main")],
    "latency-cardwell-lte-att-linux": [("lte-att-linux", "main")],
    "latency-cardwell-lossfree-grid-linux": [("lossfree-grid-linux", "main")],
    "latency-cardwell-loss-linux-iw10-1mb": [("loss-linux-iw10-1mb", "main"),
                                             ("loss-linux-iw10-1mb-class", "class")],
    "latency-cardwell-loss-linux-iw10-state": [("loss-linux-iw10-state", "main")],
    "latency-cardwell-loss-linux-state": [("loss-linux-state", "main")],
}


def page_tables(results: Path) -> dict[str, str]:
    """Every table of the page, by its marker line, from the summaries in ``results``."""
    out = {}
    for name, parts in PAGE_TABLES.items():
        s = json.loads((results / name / "summary.json").read_text())
        for marker, part in parts:
            out[f"<!-- {marker} -->"] = markdown(s, part)
    return out


def summary(kind: str, sweep_dir: Path) -> dict:
    return {"kind": kind, "rows": SUMMARIES[kind](sweep_dir)}


def write_summary(kind: str, sweep_dir: Path) -> list[Path]:
    """Keep the summary of ``kind`` as ``SWEEP_DIR/summary.json`` (and, for ``state`` and
    ``window``, the TCP state records it read as ``tcp_state.parquet``); the files written."""
    s = summary(kind, sweep_dir)
    (sweep_dir / "summary.json").write_text(json.dumps(s, indent=1) + "\n")
    written = [sweep_dir / "summary.json"]
    if kind in ("state", "window"):
        written.append(write_state_records(sweep_dir))
    return written
