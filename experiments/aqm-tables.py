"""The tables of docs/experiments/aqm.md, computed from the committed sweeps of results/.

    .venv/bin/python experiments/aqm-tables.py            # print every table
    .venv/bin/python experiments/aqm-tables.py --write    # rewrite the page's tables in place

Each table follows a marker line on the page (``<!-- table aqm-5.3 ns3 -->``: the experiment and
the backend) and joins the sweep run with ECN off and the one with ECN on
(``results/<experiment>[-ecn]-<backend suffix>``; a suffix may carry a variant before the backend,
``-300s-ns3``: the video sweeps with the paper's 300-s runs; ``-25web-300s-ns3``: the same at 25
web flows). A table may join several such pairs (a tuple of suffixes: Table 4's web-flow counts,
one pair of sweeps each, rows ordered by the count). A row is one cell of the sweeps: the discipline, ECN, and the cell's other swept value
(web flows, or the audio's transport). Figures:

- media delay p50/p95/p99: every delivered media packet of the cell's runs pooled (one-way, whole
  run), ms;
- late: the fraction of media packets sent that arrived later than the deadline or never
  (150 ms: ITU-T G.114's one-way bound for interactive voice; 400 ms);
- media retransmissions: TCP retransmissions of the media flows, summed over them, mean per run;
- bulk goodput: the bulk (FTP, download) flows' goodput summed, mean per run, Mb/s; web goodput:
  the other cross flows' (web on/off), the same way;
- bottleneck sojourn p50 / p99: the forward direction's queue sojourn percentiles (the link's
  ``sojourn_ms``), mean per run ("–" where the backend's counters have none);
- overflow drops / AQM drops / CE marks: the bottleneck's forward direction (``a_to_b``), mean
  per run.

A table whose marker ends in ``by seed`` (``<!-- table aqm-5.3-video ns3 by seed -->``) shows the
same cells' runs one by one, seed by seed (``a / b / c`` for seeds 1, 2, 3): each run's media
delay p95 and p99 (its own delivered media packets), late at 150 ms, media retransmissions and CE
marks, so a claim resting on a few runs shows how far apart they were.

A discipline a sweep leaves out because its backend refuses it there (ns-3's FQ-CoDel with a limit
in bytes) is a row of its own saying so: the reason is the backend's own plan-time check
(:func:`tcpdelay.sim.aqm.unsupported`) asked of the sweep's bottleneck with that discipline.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from tcpdelay.reproductions.page_tables import write_or_print
from tcpdelay.reproductions.sweep_data import REPO_ROOT, CellIndex, media_delays, run_json, runs
from tcpdelay.sim.aqm import unsupported

PAGE = REPO_ROOT / "docs" / "experiments" / "aqm.md"
RESULTS = REPO_ROOT / "results"
DEADLINES_S = (0.15, 0.4)
DISCIPLINES = ("drop_tail", "codel", "fq_codel", "pie")
NAMES = {"drop_tail": "drop-tail", "codel": "CoDel", "fq_codel": "FQ-CoDel", "pie": "PIE"}

#: marker -> (experiment, results suffix of the backend, the cells' other swept key and its column name[,
#: True: the runs seed by seed])
TABLES = {
    "<!-- table aqm-5.3 ns3 -->": ("aqm-5.3", "-ns3", "cross[1].count", "web flows"),
    "<!-- table aqm-5.3 testbed -->": ("aqm-5.3", "-reduced", "cross[1].count", "web flows"),
    "<!-- table aqm-5.3-video ns3 -->": ("aqm-5.3-video", "-ns3", "cross[1].count", "web flows"),
    "<!-- table aqm-5.3-video ns3 by seed -->": ("aqm-5.3-video", "-ns3", "cross[1].count", "web flows", True),
    # the same cells on the testbed, reduced (results/aqm-5.3-video[-ecn]-reduced: one 30-s run a cell)
    "<!-- table aqm-5.3-video testbed -->": ("aqm-5.3-video", "-reduced", "cross[1].count", "web flows"),
    # the same video sweeps at the paper's 300-s runs (results/aqm-5.3-video[-ecn]-300s-ns3), beside the 120-s ones
    "<!-- table aqm-5.3-video-300s ns3 -->": ("aqm-5.3-video", "-300s-ns3", "cross[1].count", "web flows"),
    "<!-- table aqm-5.3-video-300s ns3 by seed -->": ("aqm-5.3-video", "-300s-ns3", "cross[1].count", "web flows",
                                                      True),
    # and at 25 web flows, Table 4's other column near the knee (results/aqm-5.3-video[-ecn]-25web-300s-ns3)
    "<!-- table aqm-5.3-video-25web-300s ns3 -->": ("aqm-5.3-video", "-25web-300s-ns3", "cross[1].count", "web flows"),
    "<!-- table aqm-5.3-video-25web-300s ns3 by seed -->": ("aqm-5.3-video", "-25web-300s-ns3", "cross[1].count",
                                                            "web flows", True),
    # Table 4's five web-flow counts at 300 s, one pair of sweeps each (0 web flows: no second cross entry)
    "<!-- table aqm-5.3-video-webflows-300s ns3 -->": (
        "aqm-5.3-video", ("-0web-300s-ns3", "-10web-300s-ns3", "-25web-300s-ns3", "-300s-ns3", "-100web-300s-ns3"),
        "cross[1].count", "web flows"),
    "<!-- table aqm-5.3-video-webflows-300s ns3 by seed -->": (
        "aqm-5.3-video", ("-0web-300s-ns3", "-10web-300s-ns3", "-100web-300s-ns3"), "cross[1].count", "web flows", True),
    "<!-- table aqm-5.3-bytes ns3 -->": ("aqm-5.3-bytes", "-ns3", "cross[1].count", "web flows"),
    "<!-- table aqm-5.3-bytes testbed -->": ("aqm-5.3-bytes", "-reduced", "cross[1].count", "web flows"),
    "<!-- table aqm-5.3-video-bytes ns3 -->": ("aqm-5.3-video-bytes", "-ns3", "cross[1].count", "web flows"),
    "<!-- table aqm-5.3-video-bytes ns3 by seed -->": ("aqm-5.3-video-bytes", "-ns3", "cross[1].count", "web flows",
                                                        True),
    # the byte-queue video sweeps at the paper's 300-s runs (results/aqm-5.3-video-bytes[-ecn]-300s-ns3)
    "<!-- table aqm-5.3-video-bytes-300s ns3 -->": ("aqm-5.3-video-bytes", "-300s-ns3", "cross[1].count", "web flows"),
    "<!-- table aqm-5.3-video-bytes-300s ns3 by seed -->": ("aqm-5.3-video-bytes", "-300s-ns3", "cross[1].count",
                                                            "web flows", True),
    "<!-- table aqm-hspa-audio-bulk ns3 -->": ("aqm-hspa-audio-bulk", "-ns3", "flows[0].transport", "audio over"),
    "<!-- table aqm-hspa-audio-bulk testbed -->": ("aqm-hspa-audio-bulk", "-reduced", "flows[0].transport", "audio over"),
}


def _sweep_dir(experiment: str, ecn: bool, suffix: str) -> Path:
    return RESULTS / f"{experiment}{'-ecn' if ecn else ''}{suffix}"


def _scenario(sweep: Path) -> dict:
    import tomllib

    return tomllib.loads((sweep / "scenario.toml").read_text())


def _fixed_value(sweep: Path, key: str):
    """The value of ``key`` in a sweep whose grid does not sweep it (the scenario as written); a
    ``count`` of a list entry the scenario does not have is 0 (§5.3 without web flows has no
    second cross entry: 0 web flows)."""
    head, _, rest = key.partition(".")
    name, _, index = head.partition("[")
    entries = _scenario(sweep).get(name, [])
    i = int(index.rstrip("]"))
    if i >= len(entries) and rest == "count":
        return 0
    return entries[i][rest]


def refused_rows(sweep: Path, ecn: bool, other_key: str, present: set[str]) -> list[dict]:
    """A row for each discipline the sweep does not run, with ns-3's reason for refusing it on the
    sweep's bottleneck; a discipline left out that ns-3 would run is an error (a missing cell)."""
    if not sweep.name.endswith("-ns3"):
        return []
    forward = dict(_scenario(sweep)["path"]["forward"])
    rows = []
    for name in DISCIPLINES:
        if name in present or name == "drop_tail":
            continue
        reasons = unsupported({**forward, "aqm": {"discipline": name, "ecn": ecn}})
        if not reasons:
            raise SystemExit(f"{sweep.name}: no runs of {name}, which ns-3 runs on this bottleneck")
        rows.append({"discipline": name, "ecn": ecn, "other": _fixed_value(sweep, other_key),
                     "refused": "; ".join(reasons)})
    return rows


def cell_rows(sweep: Path, ecn: bool, other_key: str) -> list[dict]:
    """One row per cell of ``sweep``: its discipline, ECN, other value and figures."""
    delays = media_delays(sweep)
    cells = CellIndex(delays)
    d_seed = delays["seed"].to_numpy(zero_copy_only=False)
    d_delay = delays["delay_s"].to_numpy(zero_copy_only=False)
    by_cell: dict[str, list[dict]] = {}
    for r in runs(sweep):
        by_cell.setdefault(r["cell_id"], []).append(r)
    rows = []
    for cell_id, rs in by_cell.items():
        ov = rs[0]["overrides"]
        aqm = (ov.get("path.forward") or {}).get("aqm") or {}
        other = ov.get(other_key, None)
        if other is None:
            other = _fixed_value(sweep, other_key)
        in_cell = cells.mask(cell_id)
        d, d_seed_cell = d_delay[in_cell], d_seed[in_cell]
        got = d[np.isfinite(d)]
        if not got.size:
            raise SystemExit(f"{sweep.name}: cell {cell_id} has no delivered media packet (an unfinished run?)")
        media_rtx, bulk_bps, web_bps, qdrops, adrops, marks, soj50, soj99 = [], [], [], [], [], [], [], []
        per_run = []
        for r in sorted(rs, key=lambda r: r["seed"]):
            metrics = json.loads((r["dir"] / "metrics.json").read_text())
            media_rtx.append(sum(f.get("tcp_retransmissions") or 0 for f in metrics["flows"]))
            bulk_bps.append(sum(c.get("goodput_bps") or 0.0 for c in metrics["cross"] if c["kind"] == "bulk"))
            web_bps.append(sum(c.get("goodput_bps") or 0.0 for c in metrics["cross"] if c["kind"] != "bulk"))
            fwd = run_json(r["dir"])["run"]["link_counters"]["a_to_b"]
            qdrops.append(fwd["drops"]["queue"])
            adrops.append(fwd["drops"]["aqm"])
            marks.append(fwd["ce_marks"])
            sojourn = fwd.get("sojourn_ms") or {}
            soj50.append(sojourn.get("p50", np.nan))
            soj99.append(sojourn.get("p99", np.nan))
            mine = d[d_seed_cell == r["seed"]]
            mine_got = mine[np.isfinite(mine)]
            if not mine_got.size:
                raise SystemExit(f"{sweep.name}: cell {cell_id} seed {r['seed']} has no delivered media packet")
            per_run.append({"seed": r["seed"], "p95_ms": 1e3 * np.percentile(mine_got, 95),
                            "p99_ms": 1e3 * np.percentile(mine_got, 99),
                            "late150": float(np.mean(~(np.nan_to_num(mine, nan=np.inf) <= DEADLINES_S[0]))),
                            "media_rtx": media_rtx[-1], "ce_marks": marks[-1]})
        rows.append({
            "discipline": aqm.get("discipline", "drop_tail"), "ecn": ecn, "other": other, "runs": len(rs),
            "packets": int(d.size), "p50_ms": 1e3 * np.percentile(got, 50), "p95_ms": 1e3 * np.percentile(got, 95),
            "p99_ms": 1e3 * np.percentile(got, 99),
            "late": [float(np.mean(~(np.isfinite(d) & (np.nan_to_num(d, nan=np.inf) <= t)))) for t in DEADLINES_S],
            "media_rtx": float(np.mean(media_rtx)), "bulk_mbps": float(np.mean(bulk_bps)) / 1e6,
            "web_mbps": float(np.mean(web_bps)) / 1e6, "sojourn_p50_ms": float(np.mean(soj50)),
            "sojourn_p99_ms": float(np.mean(soj99)),
            "queue_drops": float(np.mean(qdrops)), "aqm_drops": float(np.mean(adrops)), "ce_marks": float(np.mean(marks)),
            "per_run": per_run,
        })
    return rows


def _ms(x: float) -> str:
    return "–" if not np.isfinite(x) else f"{x:.1f}"


def _by_seed(rows: list[dict], other_name: str) -> str:
    """The runs of each cell seed by seed (refused disciplines have none: the main table says why)."""
    columns = (("p95_ms", 1, "{:.0f}"), ("p99_ms", 1, "{:.0f}"), ("late150", 100, "{:.2f}"),
               ("media_rtx", 1, "{:.0f}"), ("ce_marks", 1, "{:.0f}"))
    out = [f"| {other_name} | discipline | ECN | seeds | media p95 (ms) | media p99 (ms) | late 150 ms (%) "
           "| media retransmitted | CE marks |", "|" + "---|" * 9]
    for r in rows:
        if "refused" in r:
            continue
        cells = [" / ".join(str(x["seed"]) for x in r["per_run"])]
        cells += [" / ".join(fmt.format(scale * x[key]) for x in r["per_run"]) for key, scale, fmt in columns]
        out.append(f"| {r['other']} | {NAMES[r['discipline']]} | {'on' if r['ecn'] else 'off'} | "
                   + " | ".join(cells) + " |")
    return "\n".join(out)


def _suffixes(suffix: str | tuple[str, ...]) -> tuple[str, ...]:
    return (suffix,) if isinstance(suffix, str) else tuple(suffix)


def _order(value) -> tuple:
    """Rows by their other value: numbers by size (0, 10, 25, 50, 100), then names."""
    return (0, float(value), "") if isinstance(value, (int, float)) else (1, 0.0, str(value))


def table(experiment: str, suffix: str | tuple[str, ...], other_key: str, other_name: str,
          by_seed: bool = False) -> str:
    rows = []
    for one in _suffixes(suffix):
        for ecn in (False, True):
            sweep = _sweep_dir(experiment, ecn, one)
            got = cell_rows(sweep, ecn, other_key)
            rows += got + refused_rows(sweep, ecn, other_key, {r["discipline"] for r in got})
    rows.sort(key=lambda r: (_order(r["other"]), DISCIPLINES.index(r["discipline"]), r["ecn"]))
    if by_seed:
        return _by_seed(rows, other_name)
    late_cols = " | ".join(f"late {int(t * 1e3)} ms" for t in DEADLINES_S)
    ncols = 12 + len(DEADLINES_S)
    out = [f"| {other_name} | discipline | ECN | runs | media p50 / p95 / p99 (ms) | {late_cols} | media retransmitted "
           "| bulk goodput (Mb/s) | web goodput (Mb/s) | bottleneck sojourn p50 / p99 (ms) | overflow drops | AQM drops "
           "| CE marks |",
           "|" + "---|" * ncols]
    for r in rows:
        if "refused" in r:
            out.append(f"| {r['other']} | {NAMES[r['discipline']]} | {'on' if r['ecn'] else 'off'} | 0 "
                       f"| refused by ns-3: {r['refused']} |" + " – |" * (ncols - 5))
            continue
        late = " | ".join(f"{100 * x:.2f} %" for x in r["late"])
        out.append(f"| {r['other']} | {NAMES[r['discipline']]} | {'on' if r['ecn'] else 'off'} | {r['runs']} "
                   f"| {r['p50_ms']:.0f} / {r['p95_ms']:.0f} / {r['p99_ms']:.0f} | {late} | {r['media_rtx']:.0f} "
                   f"| {r['bulk_mbps']:.2f} | {r['web_mbps']:.2f} | {_ms(r['sojourn_p50_ms'])} / {_ms(r['sojourn_p99_ms'])} "
                   f"| {r['queue_drops']:.0f} | {r['aqm_drops']:.0f} | {r['ce_marks']:.0f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the tables of docs/experiments/aqm.md")
    ap.add_argument("--only", metavar="TEXT", help="only the tables whose marker contains TEXT (e.g. testbed)")
    args = ap.parse_args(argv)
    tables = {}
    for marker, spec in TABLES.items():
        if args.only and args.only not in marker:
            continue
        if not all(_sweep_dir(spec[0], ecn, one).is_dir() for one in _suffixes(spec[1]) for ecn in (False, True)):
            print(f"{marker}: a sweep is missing, skipped", file=sys.stderr)
            continue
        tables[marker] = table(*spec)
    write_or_print(PAGE, tables, write=args.write, root=REPO_ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
