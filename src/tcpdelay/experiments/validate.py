"""Reproduction 1: the CBR-over-TCP delay model against real Linux TCP (``tcpdelay validate``).

Brosh, Baset, Misra, Rubenstein, Schulzrinne, *The Delay-Friendliness of TCP for Real-Time
Traffic*, §5.1 ("Validation Using Configured Drop Rates"): one CBR flow over TCP through a box
that drops packets uniformly at random, no cross traffic; drop rates 0.1, 0.5, 1, 2, 3, 5, 10 %
× RTT 20, 100, 300 ms; five minutes, ten repetitions per point; measured mean, 95th percentile
and standard deviation of the delay against the model's (Figs 5, 11) and the relative error of
the mean (Fig 8).

Here: the ``voip`` (64 kb/s) and ``video`` (573 kb/s) profiles, each on two Linux stacks — the
``newreno-2008`` preset (Reno, SACK, no RACK/TLP, IW3: as close to the paper's 2.6.17 stack as a
current kernel gets) and ``linux-default`` (CUBIC, SACK, RACK, TLP, IW10) — through the testbed
(real kernel TCP in namespaces, the ``tcpdelay-link`` emulator dropping data segments with
probability p). Every measured point is set against :func:`tcpdelay.model.delay.predict` with the
same profile, the configured RTT and p, the model's defaults otherwise (T0 = RTT + 200 ms, MSS
1448 bytes = the testbed's 1500-byte MTU with TCP timestamps, random loss, limited transmit).

Sizes: :data:`FULL` is the paper's (84 cells × 10 runs × 300 s, ~75 h on one testbed; shipped as
``experiments/validate-5.1.toml``); :data:`REDUCED` (the default) is a subset that finishes in a
few minutes: RTT 100 ms (where the paper states its claims), p = 0.5, 1, 2 %, both profiles, both
stacks, one 20-second run each (12 runs, ~5 min).

The measurements go through the sweep machinery (:func:`tcpdelay.experiments.sweep.run_sweep`),
so an interrupted validation resumes; the output directory is a sweep directory (``tcpdelay
report`` reads it too) plus ``validation.json`` and ``validation.html``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.scenario import Scenario, parse_scenario

PROFILES = ("voip", "video")
STACKS = ("newreno-2008", "linux-default")
PAPER_RTTS_S = (0.02, 0.1, 0.3)
PAPER_LOSSES = (0.001, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1)

#: The paper's size (Brosh et al. §5.1): every point, five minutes, ten repetitions.
FULL = {"rtts_s": PAPER_RTTS_S, "losses": PAPER_LOSSES, "duration_s": 300.0, "repetitions": 10}
#: The default size: RTT 100 ms, 0.5-2 % loss, one 20 s run per point (12 runs, ~5 minutes).
REDUCED = {"rtts_s": (0.1,), "losses": (0.005, 0.01, 0.02), "duration_s": 20.0, "repetitions": 1}

#: The model's MSS: the testbed's 1500-byte MTU minus IP, TCP and timestamp option headers.
MSS_BYTES = 1448

#: The paper's claims (as listed in docs/models/delay.md) checked in the report:
#: (profile, rtt_s, largest loss, bound on |relative error of the mean|).
PAPER_CLAIMS = (
    ("voip", 0.1, 0.02, 0.10),
    ("voip", 0.3, 0.02, 0.10),
    ("video", 0.1, 0.01, 0.20),
    ("video", 0.3, 0.001, 0.20),
)


def scenario_data(*, rtts_s, losses, duration_s: float, repetitions: int,
                  profiles=PROFILES, stacks=STACKS, seed: int = 1) -> dict:
    """The validation scenario as data (the grid in the order of the paper's figures)."""
    return {
        "name": "validate-5.1",
        "description": "CBR over TCP (voip 64 kb/s, video 573 kb/s) with Bernoulli drops: model vs Linux TCP",
        "duration_s": float(duration_s),
        "repetitions": int(repetitions),
        "seed": seed,
        "metrics": ["delay", "late", "loss", "tcp"],
        "path": {"rtt_s": 0.1, "forward": {"loss": {"model": "bernoulli", "p": 0.01}}},
        "flows": [{"name": "media", "profile": "voip", "transport": "tcp", "tcp": {"preset": "newreno-2008"}}],
        "sweep": {
            "flows[0].profile": list(profiles),
            "flows[0].tcp.preset": list(stacks),
            "path.rtt_s": [float(r) for r in rtts_s],
            "path.forward.loss.p": [float(p) for p in losses],
        },
    }


def validation_scenario(full: bool = False, *, duration_s: float | None = None,
                        repetitions: int | None = None, grid: dict | None = None) -> Scenario:
    """The full or reduced validation scenario, optionally with another run length or number
    of repetitions (e.g. ``--full --repetitions 2 --duration-s 120`` for a ~6 h run), or
    another grid (``grid``: any of ``rtts_s``, ``losses``, ``profiles``, ``stacks``)."""
    size = dict(FULL if full else REDUCED)
    allowed = ("rtts_s", "losses", "profiles", "stacks")
    for key, values in (grid or {}).items():
        if key not in allowed:
            raise ParameterError(f"grid: {key!r} is not one of {', '.join(allowed)}")
        size[key] = tuple(values)
    if duration_s is not None:
        if not (isinstance(duration_s, (int, float)) and math.isfinite(duration_s) and 1 <= duration_s <= 3600):
            raise ParameterError(f"duration_s: {duration_s!r} must be between 1 and 3600 seconds")
        size["duration_s"] = float(duration_s)
    if repetitions is not None:
        if not (isinstance(repetitions, int) and 1 <= repetitions <= 100):
            raise ParameterError(f"repetitions: {repetitions!r} must be an integer from 1 to 100")
        size["repetitions"] = repetitions
    return parse_scenario(scenario_data(**size), source="validate-5.1")


# --------------------------------------------------------------------------- the model side

def model_point(profile: str, rtt_s: float, loss: float, *, mss_bytes: int = MSS_BYTES,
                hol_ramp: bool = False) -> dict:
    """The model's statistics for one point (Brosh et al. Section 4; T0 and the [choice]
    options at the model's defaults). ``unstable`` when PFTK throughput does not exceed the
    source's rate (the delay then grows without bound and the statistics are None).
    ``hol_ramp=True``: the variant with the head-of-line ramp behind each fast retransmit (not
    the paper's model; docs/models/delay.md, "The head-of-line ramp")."""
    from tcpdelay.model.delay import predict

    pred = predict(profile, rtt_s=rtt_s, loss=loss, mss_bytes=mss_bytes, hol_ramp=hol_ramp)
    st = pred.statistics()
    info = pred.info
    return {
        "mean_s": st["mean_s"], "p95_s": st.get("p95_s"), "p99_s": st.get("p99_s"), "std_s": st["std_s"],
        "unstable": bool(pred.unstable),
        "one_way_s": pred.one_way_s,
        "tcp_throughput_bps": info.get("tcp_throughput_bps"),
        "throughput_ratio": info.get("throughput_ratio"),
        "timeout_probability": info.get("timeout_probability"),
        "t0_s": (info.get("params") or {}).get("t0_s"),
        "truncated_mass": info.get("truncated_mass"),
        "solve_s": info.get("solve_s"),
        "warnings": list(info.get("warnings") or []),
        "late_fraction": {f"{x:g}": float(pred.late_fraction(x)) for x in (0.1, 0.2, 0.4)},
        "_prediction": pred,
    }


# --------------------------------------------------------------------------- the measured side

def _run_extras(run_dir: Path) -> dict:
    """From a run's run.json: the realized data-segment drop ratio, TCP retransmissions and
    RTOs, and the emulator's worst lateness."""
    try:
        meta = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    link = (meta.get("run") or {}).get("link_counters") or {}
    fwd = link.get("a_to_b") or {}
    stats = meta.get("tcp_stats") or []
    return {
        "packets_in": fwd.get("packets_in"),
        "loss_drops": (fwd.get("drops") or {}).get("loss"),
        "lateness_max_us": max(((link.get(d) or {}).get("lateness_us") or {}).get("max") or 0.0
                               for d in ("a_to_b", "b_to_a")),
        "lateness_p99_us": max(((link.get(d) or {}).get("lateness_us") or {}).get("p99") or 0.0
                               for d in ("a_to_b", "b_to_a")),
        "total_retrans": sum(int(s.get("total_retrans") or 0) for s in stats),
        "total_rto": sum(int(s.get("total_rto") or 0) for s in stats),
    }


def measured_points(results) -> list[dict]:
    """Per cell of a loaded validation sweep (:func:`tcpdelay.report.results.load_results`):
    the pooled measured statistics of its media flow and the run counters."""
    from tcpdelay.report.results import aggregate_cell

    out = []
    for cell in results.cells:
        ov = cell.overrides
        agg = aggregate_cell(cell)
        flow = agg[0] if agg else None
        extras = [_run_extras(r.run_dir) for r in cell.runs if r.status == "complete"]
        pin = sum(e.get("packets_in") or 0 for e in extras)
        drops = sum(e.get("loss_drops") or 0 for e in extras)
        point = {
            "cell_id": cell.id,
            "profile": ov.get("flows[0].profile"),
            "stack": ov.get("flows[0].tcp.preset"),
            "rtt_s": ov.get("path.rtt_s"),
            "loss": ov.get("path.forward.loss.p"),
            "runs": flow["runs"] if flow else 0,
            "runs_failed": sum(r.status == "failed" for r in cell.runs),
            "measured": None,
        }
        if flow and flow["delay"]["count"]:
            pairs = [(r.seed, f.delay_s) for r in cell.runs if r.status == "complete"
                     for f in r.flows if f.flow_id == flow["flow_id"]]
            point["_delays"] = np.concatenate([d for _, d in pairs])
            point["_seeds"] = np.concatenate([np.full(d.size, -1 if s is None else s) for s, d in pairs])
            d = flow["delay"]
            point["measured"] = {
                "mean_s": d["mean_s"], "p95_s": d.get("p95_s"), "p99_s": d.get("p99_s"), "std_s": d["std_s"],
                "min_s": d["min_s"], "max_s": d["max_s"], "packets": flow["packets"], "received": flow["received"],
                "app_loss_rate": flow["loss_rate"],
                "late_fraction": {f"{x:g}": _late(flow, x) for x in (0.1, 0.2, 0.4)},
                "segment_drop_ratio": drops / pin if pin else None,
                "tcp_retransmissions": sum(e.get("total_retrans") or 0 for e in extras),
                "tcp_rtos": sum(e.get("total_rto") or 0 for e in extras),
                "rtos_per_drop": (sum(e.get("total_rto") or 0 for e in extras) / drops) if drops else None,
                "emulator_lateness_max_us": max((e.get("lateness_max_us") or 0.0) for e in extras) if extras else None,
                "emulator_lateness_p99_us": max((e.get("lateness_p99_us") or 0.0) for e in extras) if extras else None,
            }
            complete = [r for r in cell.runs if r.status == "complete"]
            if len(complete) == 1 and not (complete[0].run_dir / "run.json").is_file():
                point["measured"].update(_recorded_counters(complete[0].run_dir))
        out.append(point)
    return out


#: The run counters (from run.json) of a point's measured statistics.
_COUNTERS = ("segment_drop_ratio", "tcp_retransmissions", "tcp_rtos", "rtos_per_drop",
             "emulator_lateness_max_us", "emulator_lateness_p99_us")


def _recorded_counters(run_dir: Path) -> dict:
    """The counters of a run whose run.json was never kept (validate-wide's runs: only their
    delays and their point's counters survive): the ones recorded in its complete.json
    (``summary.measured``), so that recomputing the model does not lose them."""
    try:
        measured = (json.loads((run_dir / "complete.json").read_text()).get("summary") or {}).get("measured") or {}
    except (OSError, ValueError):
        return {}
    return {k: measured[k] for k in _COUNTERS if k in measured}


def _late(flow: dict, x: float) -> float | None:
    from tcpdelay.report.results import late_at

    return late_at(flow, x)


def relative_error(model: float | None, measured: float | None) -> float | None:
    """(model − measured) / measured, as Brosh et al. Fig 8 (None when either is missing)."""
    if model is None or measured is None or not (measured > 0) or not math.isfinite(model):
        return None
    return (model - measured) / measured


def _errors(m: dict, meas: dict) -> dict:
    """Relative errors of a :func:`model_point` against a point's measured statistics."""
    L = m["one_way_s"]
    return {
        "mean_s": relative_error(m["mean_s"], meas.get("mean_s")),
        "p95_s": relative_error(m["p95_s"], meas.get("p95_s")),
        "std_s": relative_error(m["std_s"], meas.get("std_s")),
        # the TCP-level part only (delay above the one-way propagation delay L): the loss-free
        # floor L dominates the total at low loss and flatters the total's relative error
        "tcp_level_mean_s": relative_error(None if m["mean_s"] is None else m["mean_s"] - L,
                                           None if meas.get("mean_s") is None else meas["mean_s"] - L),
    }


def compare(points: list[dict]) -> list[dict]:
    """Add the model's statistics and the relative errors to every measured point: ``model``
    and ``relative_error`` for the paper's model (the model's defaults), ``model_hol_ramp`` and
    ``relative_error_hol_ramp`` for the variant with the head-of-line ramp, side by side."""
    cache: dict[tuple, dict] = {}
    for p in points:
        if p["profile"] is None or p["rtt_s"] is None or p["loss"] is None:
            p["model"] = p["model_hol_ramp"] = None
            continue
        key = (p["profile"], p["rtt_s"], p["loss"])
        if key not in cache:
            cache[key] = model_point(*key)
        m = cache[key]
        p["model"] = {k: v for k, v in m.items() if not k.startswith("_")}
        p["_prediction"] = m["_prediction"]
        meas = p.get("measured") or {}
        p["relative_error"] = _errors(m, meas)
        key_h = key + ("hol_ramp",)
        if key_h not in cache:
            cache[key_h] = model_point(*key, hol_ramp=True)
        h = cache[key_h]
        p["model_hol_ramp"] = {k: v for k, v in h.items() if not k.startswith("_")}
        p["_prediction_hol_ramp"] = h["_prediction"]
        p["relative_error_hol_ramp"] = _errors(h, meas)
        # the model at the drop ratio the link realized (a short run's draws stray from p)
        p["model_at_realized_loss"] = None
        realized = meas.get("segment_drop_ratio")
        if realized is not None and 0 < realized < 1:
            key_r = (p["profile"], p["rtt_s"], round(realized, 6))
            if key_r not in cache:
                cache[key_r] = model_point(*key_r)
            r = cache[key_r]
            p["model_at_realized_loss"] = {
                "loss": key_r[2], "mean_s": r["mean_s"], "p95_s": r["p95_s"], "std_s": r["std_s"],
                "unstable": r["unstable"],
                "relative_error_mean": relative_error(r["mean_s"], meas.get("mean_s"))}
        p["group"] = f"{p['profile']} {p['stack']} RTT {p['rtt_s'] * 1e3:g} ms"
    return points


def claim_checks(points: list[dict]) -> list[dict]:
    """The paper's accuracy claims (:data:`PAPER_CLAIMS`) against our points, per stack."""
    out = []
    for profile, rtt, max_loss, bound in PAPER_CLAIMS:
        for stack in STACKS:
            sel = [p for p in points if p["profile"] == profile and p["stack"] == stack
                   and p["rtt_s"] == rtt and p["loss"] <= max_loss + 1e-12
                   and (p.get("relative_error") or {}).get("mean_s") is not None]
            if not sel:
                continue
            worst = max(sel, key=lambda p: abs(p["relative_error"]["mean_s"]))
            err = worst["relative_error"]["mean_s"]
            # beside it, not deciding it: the hol_ramp variant's worst over the same points
            sel_h = [p for p in sel if (p.get("relative_error_hol_ramp") or {}).get("mean_s") is not None]
            worst_h = max(sel_h, key=lambda p: abs(p["relative_error_hol_ramp"]["mean_s"])) if sel_h else None
            out.append({"profile": profile, "stack": stack, "rtt_s": rtt, "max_loss": max_loss,
                        "bound": bound, "points": len(sel), "worst_loss": worst["loss"],
                        "worst_relative_error": err, "holds": abs(err) <= bound,
                        "worst_loss_hol_ramp": None if worst_h is None else worst_h["loss"],
                        "worst_relative_error_hol_ramp":
                            None if worst_h is None else worst_h["relative_error_hol_ramp"]["mean_s"]})
    return out


# --------------------------------------------------------------------------- running it

def run_validation(out_dir: str | os.PathLike, *, full: bool = False, jobs: int = 1,
                   duration_s: float | None = None, repetitions: int | None = None,
                   grid: dict | None = None, console=None, progress: bool = True) -> dict:
    """Measure every point not yet measured in ``out_dir`` (resumable), compare with the model
    and write ``validation.json`` and ``validation.html`` there. Needs the testbed, unless every
    run is already complete there (then only the model side is recomputed)."""
    from tcpdelay.experiments.run import run_scenario
    from tcpdelay.experiments.sweep import expand, run_sweep, units
    from tcpdelay.testbed import require_testbed_environment
    from tcpdelay.testbed.emulator import find_binary

    scenario = validation_scenario(full, duration_s=duration_s, repetitions=repetitions, grid=grid)
    if any(not u.complete for u in units(expand(scenario), out_dir)):
        require_testbed_environment()
        find_binary()
    res = run_sweep(scenario, out_dir, run_scenario, jobs=jobs, console=console, progress=progress)
    size = "full" if full else "reduced"
    if grid or duration_s is not None or repetitions is not None:
        size += " (" + ", ".join(
            [f"{k}={list(v)}" for k, v in (grid or {}).items()]
            + ([f"duration_s={duration_s:g}"] if duration_s is not None else [])
            + ([f"repetitions={repetitions}"] if repetitions is not None else [])) + ")"
    if progress:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        with Progress(TextColumn("comparing with the model"), BarColumn(), MofNCompleteColumn(),
                      console=console or Console(stderr=True), transient=True) as bar:
            task = bar.add_task("runs", total=None)
            doc = evaluate_validation(out_dir, size=size, progress=lambda d, t: bar.update(task, completed=d, total=t))
    else:
        doc = evaluate_validation(out_dir, size=size)
    doc["sweep"] = res.to_dict()
    _write(Path(out_dir) / "validation.json", doc)
    return doc


def evaluate_validation(out_dir: str | os.PathLike, *, size: str = "reduced", progress=None) -> dict:
    """Compare what ``out_dir`` holds with the model and write the HTML report (no measuring);
    ``progress(done, total)`` after each run read."""
    from tcpdelay.report.html import Report
    from tcpdelay.report.results import load_results

    out = Path(out_dir)
    results = load_results(out, progress=progress)
    points = compare(measured_points(results))
    scenario_doc = json.loads((out / "sweep.json").read_text()) if (out / "sweep.json").is_file() else {}
    report = Report("Delay model vs Linux TCP: Brosh et al. §5.1 (configured random drops)")
    html_path = out / "validation.html"
    duration = _duration(out)
    doc = {
        "size": size,
        "duration_s": duration,
        "seeds": scenario_doc.get("seeds"),
        "mss_bytes": MSS_BYTES,
        "points": [{k: v for k, v in p.items() if not k.startswith("_")} for p in points],
        "claims": claim_checks(points),
        "interpretation": interpretation(points),
    }
    add_validation_sections(report, points, doc)
    doc["report_path"] = str(report.write(html_path))
    doc["delays_path"] = str(write_delays(out / DELAYS_FILE, points))
    return doc


#: Every measured packet's delay, one small file (the run directories' records are the source).
DELAYS_FILE = "validation-delays.parquet"


def write_delays(path: Path, points: list[dict]) -> Path:
    """One row per media packet of every point: ``profile, stack, rtt_s, loss, seed, delay_s``
    (NaN: never received) — enough to redraw the CDFs and recompute the statistics without the
    per-run record sets."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols: dict[str, list] = {k: [] for k in ("profile", "stack", "rtt_s", "loss", "seed", "delay_s")}
    for p in points:
        d = p.get("_delays")
        if d is None:
            continue
        n = d.size
        cols["profile"].append(np.full(n, p["profile"], dtype=object))
        cols["stack"].append(np.full(n, p["stack"], dtype=object))
        cols["rtt_s"].append(np.full(n, p["rtt_s"], dtype=float))
        cols["loss"].append(np.full(n, p["loss"], dtype=float))
        cols["seed"].append(np.asarray(p["_seeds"], dtype=np.int64))
        cols["delay_s"].append(np.asarray(d, dtype=float))
    types = {"profile": pa.string(), "stack": pa.string(), "rtt_s": pa.float64(), "loss": pa.float64(),
             "seed": pa.int64(), "delay_s": pa.float64()}
    table = pa.table({k: pa.array(np.concatenate(v) if v else [], type=types[k]) for k, v in cols.items()})
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)
    return path


def _duration(out: Path) -> float | None:
    import tomllib

    try:
        return float(tomllib.loads((out / "scenario.toml").read_text())["duration_s"])
    except (OSError, ValueError, KeyError):
        return None


def _write(path: Path, doc: dict) -> None:
    from tcpdelay.cli.common import jsonable

    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(jsonable(doc), indent=2, sort_keys=True))
    os.replace(tmp, path)


# --------------------------------------------------------------------------- the report

def _ms(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x * 1e3:.1f}"


def _err(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.0f} %"


def table_rows(points: list[dict], *, hol_ramp: bool = False) -> list[list[Any]]:
    """One row per point: parameters, measured / model mean, p95, std, relative errors
    (:data:`TABLE_COLUMNS`). ``hol_ramp``: also the hol_ramp variant's mean and its relative
    error, after the paper's mean (:func:`table_columns`)."""
    rows = []
    for p in points:
        meas, mod, err = p.get("measured") or {}, p.get("model") or {}, p.get("relative_error") or {}
        unstable = mod.get("unstable")
        rows.append([
            p["profile"], p["stack"], f"{p['rtt_s'] * 1e3:g}", f"{p['loss'] * 100:g}", p["runs"],
            _ms(meas.get("mean_s")), "unstable" if unstable else _ms(mod.get("mean_s")), _err(err.get("mean_s")),
            _err(err.get("tcp_level_mean_s")),
            _ms(meas.get("p95_s")), "unstable" if unstable else _ms(mod.get("p95_s")), _err(err.get("p95_s")),
            _ms(meas.get("std_s")), "unstable" if unstable else _ms(mod.get("std_s")), _err(err.get("std_s")),
            _realized(p),
            "—" if mod.get("throughput_ratio") is None else f"{mod['throughput_ratio']:.2f}",
            "—" if meas.get("rtos_per_drop") is None else f"{meas['rtos_per_drop']:.2f}",
            "—" if mod.get("timeout_probability") is None else f"{mod['timeout_probability']:.2f}",
            "—" if meas.get("emulator_lateness_p99_us") is None else f"{meas['emulator_lateness_p99_us'] / 1e3:.1f}",
        ])
        if hol_ramp:
            hol, err_h = p.get("model_hol_ramp") or {}, p.get("relative_error_hol_ramp") or {}
            rows[-1][_HOL_AT:_HOL_AT] = ["unstable" if hol.get("unstable") else _ms(hol.get("mean_s")),
                                         _err(err_h.get("mean_s"))]
    return rows


def _claim_hol(c: dict) -> str:
    err, loss = c.get("worst_relative_error_hol_ramp"), c.get("worst_loss_hol_ramp")
    return "—" if err is None or loss is None else f"{_err(err)} ({loss * 100:g} %)"


def _realized(p: dict) -> str:
    r = p.get("model_at_realized_loss")
    if not r:
        return "—"
    err = "unstable" if r["unstable"] else _err(r["relative_error_mean"])
    return f"{r['loss'] * 100:.2f} %: {err}"


TABLE_COLUMNS = ["profile", "stack", "RTT ms", "loss %", "runs",
                 "mean ms measured", "mean ms model", "rel. err", "rel. err TCP-level",
                 "p95 ms measured", "p95 ms model", "rel. err",
                 "std ms measured", "std ms model", "rel. err",
                 "realized drop ratio: rel. err of the model's mean there",
                 "PFTK / rate", "RTOs per drop", "model P(timeout | loss)", "emulator late p99 ms"]

#: Where :func:`table_rows` puts the hol_ramp variant's mean and error (after the paper's mean).
_HOL_AT = TABLE_COLUMNS.index("rel. err TCP-level") + 1


def table_columns(*, hol_ramp: bool = False) -> list[str]:
    """The headers of :func:`table_rows` with the same ``hol_ramp``."""
    cols = list(TABLE_COLUMNS)
    if hol_ramp:
        cols[_HOL_AT:_HOL_AT] = ["mean ms model + hol_ramp", "rel. err (hol_ramp)"]
    return cols

#: A run whose emulator released 1 % of its packets later than this is flagged (shared machine).
LATE_FLAG_US = 5000.0


def add_validation_sections(report, points: list[dict], doc: dict) -> None:
    from tcpdelay.report import results_plots as rp

    measured = [p for p in points if p.get("measured")]
    sec = report.section("What this is")
    sec.paragraph(
        "Reproduction of Brosh, Baset, Misra, Rubenstein and Schulzrinne, 'The Delay-Friendliness of "
        "TCP for Real-Time Traffic', §5.1: one CBR flow over TCP through a link that drops data "
        "segments at random with probability p, no cross traffic, no queueing. The measurement is "
        "real Linux TCP in network namespaces across the tcpdelay-link emulator; the model is "
        "tcpdelay.model.delay.predict with the same profile, the configured RTT and p, T0 = RTT + "
        f"200 ms and MSS {MSS_BYTES} bytes. Delay = one-way, from the sender's write to the receiver's "
        "read (the paper's 'TCP delay': network delay L = RTT/2 included). Relative error = "
        "(model − measured) / measured (the paper's Fig 8); 'TCP-level' is the same for the mean "
        "minus L, which the loss-free floor does not flatter.")
    dur = doc.get("duration_s")
    sec.paragraph(
        f"Size: {doc.get('size')} — {len(points)} points, {sum(p['runs'] for p in points)} runs of "
        f"{'—' if dur is None else f'{dur:g}'} s (the paper: 5 min × 10 runs per point). Short runs see few "
        "loss events (a 20 s VoIP run at 1 % loss has ~10 drops), so the 95th percentile and std "
        "of the reduced size are rough; the means are steadier.",
        note=not str(doc.get("size")).startswith("full"))
    report.section("Model vs measurement").table(
        table_columns(hol_ramp=True), table_rows(points, hol_ramp=True),
        "Measured statistics over the pooled packets of every run of the point. 'model': the "
        "paper's model (Section 4, the defaults); 'model + hol_ramp': the same with the "
        "head-of-line ramp (the packets Linux's in-order receiver holds behind each lost one, which "
        "Table 6 leaves out; not the paper's model, docs/models/delay.md), its mean and the "
        "relative error of that mean. 'unstable': PFTK "
        "throughput ≤ the source's rate, the model's delay grows without bound. PFTK / rate: the "
        "model's achievable throughput over the source's rate (the paper: error < 20 % while ≥ 2). "
        "Realized drop ratio: the emulator's drops over the data-direction packets it saw (a short "
        "run's draws stray from p), with the model's mean at that ratio. "
        "RTOs per drop: retransmission timeouts the sender took (TCP_INFO) per segment the link "
        "dropped; the model's timeout probability per loss event beside it.")
    late = [p["measured"].get("emulator_lateness_p99_us") for p in points if p.get("measured")]
    late_max = [p["measured"].get("emulator_lateness_max_us") for p in points if p.get("measured")]
    if late:
        report.sections[-1].paragraph(
            f"Emulator timing: the worst 99th percentile of how late the emulator released a packet "
            f"was {max(late) / 1e3:.2f} ms over all runs, the single worst {max(late_max) / 1e3:.1f} ms "
            "(the machine is shared; a late release adds to that packet's measured delay and, for "
            "ACKs, to the sender's RTT).")
        flagged = [p for p in points if p.get("measured")
                   and (p["measured"].get("emulator_lateness_p99_us") or 0.0) > LATE_FLAG_US]
        if flagged:
            report.sections[-1].paragraph(
                f"{len(flagged)} point(s) had a run whose emulator released 1 % of the packets more than "
                f"{LATE_FLAG_US / 1e3:g} ms late (column 'emulator late p99 ms'); treat them as disturbed "
                "and rerun them on a quiet machine: " + "; ".join(
                    f"{p['profile']} {p['stack']} RTT {p['rtt_s'] * 1e3:g} ms p {p['loss'] * 100:g} %"
                    for p in flagged) + ".", note=True)
    claims = doc.get("claims") or []
    if claims:
        report.section("The paper's accuracy claims, checked").table(
            ["profile", "stack", "RTT ms", "loss up to", "paper's bound", "points", "worst at loss",
             "worst rel. err of mean", "holds here", "hol_ramp: worst rel. err (at loss)"],
            [[c["profile"], c["stack"], f"{c['rtt_s'] * 1e3:g}", f"{c['max_loss'] * 100:g} %",
              f"{c['bound'] * 100:g} %", c["points"], f"{c['worst_loss'] * 100:g} %",
              _err(c["worst_relative_error"]), "yes" if c["holds"] else "no", _claim_hol(c)] for c in claims],
            "Brosh et al. report mean-delay errors under 10 % for VoIP up to 2 % loss, and about 20 % "
            "for video up to 1 % loss at 100 ms (0.1 % at 300 ms), on Linux 2.6. 'holds here' is "
            "the paper's model; the last column is the hol_ramp variant's worst error over the same "
            "points, for comparison.")
    sec = report.section("Figures")
    if measured:
        for stat, what in (("mean_s", "mean (Fig 5a)"), ("p95_s", "95th percentile (Fig 5b)"),
                           ("std_s", "standard deviation (Fig 11)")):
            sec.figure(rp.model_vs_measured_figure(measured, stat=stat, title=f"model vs measured {what}"),
                       f"Predicted against measured {what}; the line is equality, the band ±20 %.")
        sec.figure(rp.relative_error_figure(measured, title="relative error of the mean (Fig 8)"),
                   "(model − measured) / measured of the mean delay against the configured loss.")
        groups: dict[str, list[dict]] = {}
        for p in measured:
            groups.setdefault(f"{p['profile']} on {p['stack']}, RTT {p['rtt_s'] * 1e3:g} ms", []).append(p)
        for title, pts in groups.items():
            sec.figure(_cdf_figure(sorted(pts, key=lambda p: p["loss"]), title),
                       f"{title}: measured delay CDF (solid) and the model's (dashed, same colour) per loss.")
    else:
        sec.paragraph("No complete measurement yet: nothing to plot.", note=True)
    sec = report.section("Where the model departs from today's Linux, and why")
    for text in doc.get("interpretation") or interpretation(points):
        sec.paragraph(text)


def _cdf_figure(points: list[dict], title: str):
    from tcpdelay.report import results_plots as rp

    pairs = []
    for p in points:
        pred = p.get("_prediction")
        ok = pred is not None and not pred.unstable
        pairs.append((f"p={p['loss'] * 100:g} %", p.get("_delays", np.zeros(0)),
                      pred.support_s if ok else None, np.cumsum(pred.pmf) if ok else None))
    return rp.measured_and_model_cdf_figure(pairs, title=title)


def interpretation(points: list[dict]) -> list[str]:
    """Plain statements about the comparison, computed from the points (no canned verdicts)."""
    out = []

    def mean_abs(sel):
        e = [abs(p["relative_error"]["mean_s"]) for p in sel
             if (p.get("relative_error") or {}).get("mean_s") is not None]
        return (sum(e) / len(e), len(e)) if e else (None, 0)

    for profile in PROFILES:
        for stack in STACKS:
            sel = [p for p in points if p["profile"] == profile and p["stack"] == stack]
            m, n = mean_abs(sel)
            if n:
                signed = [p["relative_error"]["mean_s"] for p in sel if p["relative_error"]["mean_s"] is not None]
                over = sum(e > 0 for e in signed)
                out.append(f"{profile} on {stack}: mean |relative error| of the mean delay {m * 100:.0f} % over "
                           f"{n} point(s); the model is above the measurement at {over} of them.")
                signed_h = [(p["relative_error"]["mean_s"], p["relative_error_hol_ramp"]["mean_s"]) for p in sel
                            if p["relative_error"]["mean_s"] is not None
                            and (p.get("relative_error_hol_ramp") or {}).get("mean_s") is not None]
                if signed_h:
                    closer = sum(abs(h) < abs(e) for e, h in signed_h)
                    further = sum(abs(h) > abs(e) for e, h in signed_h)
                    out.append(f"{profile} on {stack} with hol_ramp (not the paper's model): mean |relative error| "
                               f"{np.mean([abs(h) for _, h in signed_h]) * 100:.0f} % over the same "
                               f"{len(signed_h)} point(s) with a stable model (the paper's model "
                               f"{np.mean([abs(e) for e, _ in signed_h]) * 100:.0f} % there); closer to the "
                               f"measurement at {closer}, further at {further}.")
            unstable = [p for p in sel if (p.get("model") or {}).get("unstable") and p.get("measured")]
            for p in unstable:
                lost = p["measured"].get("app_loss_rate") or 0.0
                tail = (f"; {lost * 100:.0f} % of its packets had not arrived when the run ended (a backlog "
                        "that kept growing)" if lost > 0.01 else "")
                out.append(f"{profile} on {stack} at RTT {p['rtt_s'] * 1e3:g} ms, p = {p['loss'] * 100:g} %: the model "
                           f"calls it unstable (PFTK throughput {p['model']['tcp_throughput_bps'] / 1e3:.0f} kb/s ≤ the "
                           f"source's rate); Linux delivered it with a measured mean of "
                           f"{p['measured']['mean_s'] * 1e3:.0f} ms{tail}.")
    rto = [(p["stack"], p["measured"]["rtos_per_drop"], (p.get("model") or {}).get("timeout_probability"))
           for p in points if p.get("measured") and p["measured"].get("rtos_per_drop") is not None]
    for stack in STACKS:
        meas = [r for s, r, _ in rto if s == stack]
        mod = [t for s, _, t in rto if s == stack and t is not None]
        if meas and mod:
            out.append(f"Timeouts on {stack}: measured {np.mean(meas):.2f} RTOs per dropped segment on average, "
                       f"the model {np.mean(mod):.2f} timeouts per loss event.")
    heavy = [p for p in points if p.get("measured") and p["measured"].get("rtos_per_drop") is not None
             and ((p.get("model") or {}).get("timeout_probability") or 0.0) >= 0.05]
    if heavy:
        out.append(
            f"Where the model expects timeouts (P(timeout | loss) ≥ 0.05: {len(heavy)} point(s), "
            + ", ".join(sorted({f"{p['profile']} RTT {p['rtt_s'] * 1e3:g} ms" for p in heavy}))
            + f") it charges {np.mean([p['model']['timeout_probability'] for p in heavy]):.2f} timeouts per "
            f"loss event on average; Linux took {np.mean([p['measured']['rtos_per_drop'] for p in heavy]):.2f} "
            "RTOs per dropped segment there, and the model's mean delay is "
            + ("above" if np.mean([(p.get('relative_error') or {}).get('mean_s') or 0.0 for p in heavy]) > 0 else "below")
            + f" the measured one by {np.mean([abs((p.get('relative_error') or {}).get('mean_s') or 0.0) for p in heavy]) * 100:.0f} % on average.")
    out.append(
        "Why today's Linux departs from the 2008 model (mechanisms; the numbers above say where each "
        "shows). (1) Small windows: in an application-limited state the model counts duplicate ACKs "
        "only from the segments of the same window, so when r = f·RTT is small (VoIP at RTT 20 ms: one "
        "packet per round trip) almost every loss becomes a timeout of T0 = RTT + 200 ms. A real "
        "sender keeps writing a packet every 1/f; each one the window lets out draws a duplicate ACK, "
        "so the third arrives about 3/f later and fast retransmit repairs the loss — on both stacks, "
        "with or without the tail-loss probe — and the model over-predicts. (2) PFTK, the model's "
        "stability test and the root of its window dynamics, underestimates a SACK sender that rarely "
        "times out, so the model calls points 'unstable' that Linux carries with bounded delay and, "
        "near that limit, over-predicts the backlog (video at RTT 300 ms, 0.1 %: the paper saw its own "
        "largest errors there too). (3) RACK and the tail-loss probe (RFC 8985, linux-default) turn "
        "most remaining timeouts into a probe after about two smoothed RTTs; (4) CUBIC "
        "(linux-default) cuts the window to 0.7 of its size instead of half and regrows it on a "
        "cubic curve in time; the model's window is Reno's. At this run length neither shows a "
        "consistent sign between the two stacks. (5) Not isolated yet: at long RTTs the model's "
        "TCP-level delay (above L) falls well below the measurement at moderate loss; candidates are "
        "a recovery that takes longer than the model's one round (proportional rate reduction paces "
        "the retransmission and the new data of the recovery round) and the window's regrowth after "
        "it. (6) Linux's RTO is SRTT + "
        "max(4·RTTVAR, 200 ms) per connection; the model uses T0 = RTT + 200 ms throughout. "
        "(7) The newreno-2008 preset turns RACK, TLP and early retransmit off (tcp_recovery bit 0 = 0, "
        "tcp_early_retrans = 0) and uses Reno and IW3, but a current kernel still differs from 2.6.17 "
        "(proportional rate reduction, RTO and SACK handling, ACK behaviour), so even it is not the "
        "paper's stack.")
    return out
