"""Cardwell, Savage, Anderson, "Modeling TCP Latency" (INFOCOM 2000): the model against measured
or simulated ``transfers`` runs (docs/experiments/latency-cardwell.md).

    python benchmarks/repro_latency_cardwell.py handshake results/latency-cardwell-fig3 [--write]
    python benchmarks/repro_latency_cardwell.py handshake results/latency-cardwell-fig4 [--write]
    python benchmarks/repro_latency_cardwell.py lossfree results/latency-cardwell-lossfree [--write]
    python benchmarks/repro_latency_cardwell.py loss results/latency-cardwell-loss [--write]

``handshake`` (§III, Figs 3-4): per run, the handshake times of its transfers (``connect()`` to
established) against eqs (1)-(4) with the run's RTT, ``p_f`` (the path's forward loss: SYN/ACK),
``p_r`` (reverse: SYN) and the backend's SYN timeout ``T_s`` (ns-3 3.44: its ``ConnTimeout``,
3 s, the paper's; Linux: 1 s, ``TCP_TIMEOUT_INIT``). The mean with its 95 % interval, the
exact mean of eqs (1)-(2) with the retry limits, eq (4), and the largest distance between the
measured and the model's distribution functions (eq 3), against the 95 % Kolmogorov bound
``1.36 / sqrt(n)``, and the share of handshakes with no backoff (``L_h = RTT``) against eq (1)'s
``(1 - p_f)(1 - p_r)``.

``lossfree`` (§IV-A, Figs 5-7): per run, the transfer times (first write to the last byte's
ACK) of the transfers that saw no retransmission, against eq (15) with the stack's initial
window and Linux's growth per segment acknowledged (``b = 1``, gamma = 2: both Linux and
ns-3 grow cwnd by the segments an ACK covers), no delayed-ACK cost; the error in RTTs.

``loss`` (§IV-A, Figs 8-9 in part): per run, the transfer times against eq (25)'s mean at the
configured loss rate (the same w1 and b; T0 the model's default), overall and per papers/001
class (``no_loss``, ``fast_retransmit``, ``rto``: Figs 11-13's split).

Prints one table (``--markdown``: the page's); ``--write`` keeps it as ``summary.json`` in the sweep directory (the page's
numbers; tests/experiments/test_repro_latency_cardwell.py recomputes it from the committed runs).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from repro_common import run_json, runs  # noqa: E402

from tcpdelay.experiments.scenario import load_scenario  # noqa: E402
from tcpdelay.model.handshake import handshake_cdf, handshake_mean_approx_s, handshake_mean_s  # noqa: E402
from tcpdelay.model.transfer import transfer_time_s  # noqa: E402

#: The initial SYN timeout of each backend (s): ns-3 3.44's TcpSocket::ConnTimeout default, and
#: Linux's TCP_TIMEOUT_INIT (RFC 6298).
SYN_TIMEOUT_S = {"ns3-simulation": 3.0, "testbed": 1.0}
#: Linux's growth per segment acknowledged (ns-3 too): the model's b = 1.
ACKS_PER_SEGMENT = 1


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


def lossfree_summary(sweep_dir: Path) -> list[dict]:
    out = []
    for r in runs(sweep_dir):
        rj, rtt, _, cross, rows, mss, w1, d = _transfer_run(r)
        clean = [t for t in rows if t["class"] == "no_loss"]
        t = np.array([x["transfer_s"] for x in clean], dtype=float)
        model = float(transfer_time_s(d, 0.0, rtt, w1=w1, b=ACKS_PER_SEGMENT)) if d else None
        out.append({"cell": r["cell_id"], "backend": _backend(rj), "rtt_s": rtt, "size_bytes": cross.size_bytes,
                    "mss_bytes": mss, "d": d, "w1": w1, "transfers": len(rows), "no_loss": len(clean),
                    "mean_s": round(float(t.mean()), 4) if len(t) else None,
                    "min_s": round(float(t.min()), 4) if len(t) else None,
                    "max_s": round(float(t.max()), 4) if len(t) else None,
                    "model_s": round(model, 4) if model is not None else None,
                    "error_rtts": round((float(t.mean()) - model) / rtt, 3) if len(t) and model is not None else None})
    return sorted(out, key=lambda x: (x["rtt_s"], x["size_bytes"]))


def loss_summary(sweep_dir: Path) -> list[dict]:
    """Transfers with loss against eq (25)'s mean at the configured p, overall and by class."""
    out = []
    for r in runs(sweep_dir):
        rj, rtt, fwd, cross, rows, mss, w1, d = _transfer_run(r)
        p = _loss(fwd)
        model = float(transfer_time_s(d, p, rtt, w1=w1, b=ACKS_PER_SEGMENT)) if d else None
        row = {"cell": r["cell_id"], "backend": _backend(rj), "rtt_s": rtt, "p": p, "size_bytes": cross.size_bytes,
               "d": d, "w1": w1, "transfers": len(rows), "incomplete": len(_rows(rj)) - len(rows),
               "mean_s": round(float(np.mean([t["transfer_s"] for t in rows])), 4) if rows else None,
               "model_s": round(model, 4) if model is not None else None}
        row["error"] = round(row["mean_s"] / model - 1, 3) if rows and model else None
        for cls in ("no_loss", "fast_retransmit", "rto"):
            t = [x["transfer_s"] for x in rows if x["class"] == cls]
            row[f"{cls}_n"] = len(t)
            row[f"{cls}_mean_s"] = round(float(np.mean(t)), 4) if t else None
        out.append(row)
    return sorted(out, key=lambda x: (x["size_bytes"], x["p"]))


SUMMARIES = {"handshake": handshake_summary, "lossfree": lossfree_summary, "loss": loss_summary}


def markdown(s: dict) -> str:
    """The page's table of a summary (docs/experiments/latency-cardwell.md)."""
    if s["kind"] == "loss":
        out = ["| size | p | transfers | mean (s) | eq 25 (s) | error | no loss: n, mean (s) | fast retransmit only | "
               "RTO |", "|---|---|---|---|---|---|---|---|---|"]

        def cls(r, k):
            return f"{r[k + '_n']}, {r[k + '_mean_s']:.3f}" if r[k + "_n"] else "0"

        out += [f"| {r['size_bytes'] // 1024} kB | {r['p']:g} | {r['transfers']} | {r['mean_s']:.3f} | "
                f"{r['model_s']:.3f} | {r['error']:+.1%} | {cls(r, 'no_loss')} | {cls(r, 'fast_retransmit')} | "
                f"{cls(r, 'rto')} |" for r in s["rows"]]
        return "\n".join(out)
    if s["kind"] == "lossfree":
        out = ["| RTT (ms) | d (segments) | ns-3 (s) | eq 15 (s) | error (RTTs) |", "|---|---|---|---|---|"]
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


def summary(kind: str, sweep_dir: Path) -> dict:
    return {"kind": kind, "rows": SUMMARIES[kind](sweep_dir)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=sorted(SUMMARIES))
    ap.add_argument("sweep_dir", type=Path)
    ap.add_argument("--write", action="store_true", help="keep the table as SWEEP_DIR/summary.json")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="the page's table")
    a = ap.parse_args()
    s = summary(a.kind, a.sweep_dir)
    if a.json:
        print(json.dumps(s, indent=1))
    elif a.markdown:
        print(markdown(s))
    else:
        rows = s["rows"]
        keys = list(rows[0]) if rows else []
        print("  ".join(keys))
        for row in rows:
            print("  ".join("-" if row[k] is None else str(row[k]) for k in keys))
    if a.write:
        (a.sweep_dir / "summary.json").write_text(json.dumps(s, indent=1) + "\n")


if __name__ == "__main__":
    main()
