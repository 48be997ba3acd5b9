"""Papadimitriou and Tsaoussidis, "On Transport Layer Mechanisms for Real-Time
QoS" (JMM 2005), Sec. 4: MPEG-4 flows over Reno, Vegas, Westwood, Westwood+ and UDP on a dumbbell
with per-host access links, wired and wireless — per run, the paper's metrics from a sweep of
experiments/mpeg4-*.toml on either backend.

``tcpdelay reproduce mpeg4-transport`` runs the sweeps, keeps each summary and rewrites the
page's tables (docs/experiments/mpeg4-transport.md; :func:`page_tables`).

Per run: the MPEG flows' system goodput (the sum of each flow's original data delivered over the
connection time, Sec. 3), their mean Real-Time Performance (Algorithm 1, inter-arrival threshold
100 ms), mean delayed-packets and packet-loss rates, Jain's index of their goodputs, the
bottleneck's average and peak queue (packets, forward direction, sampled every 0.1 s); for
Sec. 4.1 the goodput of the FTP flows other than the tagged one (the tagged flow is the MPEG flow,
or the FTP flow ``cross[0]`` of the FTP-only reference): the data their connections delivered
(sent until the run's end, drained for at most 5 s after it) over the run's duration; and where the paper gives a number
(Tables 1-2: average queue length), the paper's value beside ours. Testbed runs also carry the
emulators' worst lateness (p99 over the bottleneck and every access link, µs): how far behind
schedule the machine delivered packets.

:func:`write_summary` keeps the table in ``SWEEP_DIR/summary.json`` and, for a buffer sweep (Sec. 4.4),
the bottleneck's queue-length traces in ``SWEEP_DIR/queue_traces.parquet`` (the runs' queue
records are not committed; the figure of Figs 24-26 is drawn from this file on a fresh clone).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tcpdelay.reproductions.sweep_data import flows_table, late_mark, run_json, runs, save_figure
from tcpdelay.results.testbed_error import worst_emulator_lateness_us

QUEUE_TRACES_FILE = "queue_traces.parquet"

#: Tables 1-2 of the paper: average queue length (packets) at the bottleneck, wireless topology
#: with 5 handoffs and PER 0.01, per protocol and buffer size (packets), for 20 and 40 flows.
PAPER_AVG_QUEUE = {
    20: {"reno": {20: 3.0, 30: 5.4, 50: 8.8, 80: 16.1},
         "vegas": {20: 5.5, 30: 7.6, 50: 7.7, 80: 7.7},
         "udp": {20: 16.9, 30: 27.2, 50: 46.6, 80: 75.7}},
    40: {"reno": {20: 4.7, 30: 7.4, 50: 14.3, 80: 24.4},
         "vegas": {20: 7.1, 30: 11.3, 50: 19.0, 80: 29.2},
         "udp": {20: 18.5, 30: 28.3, 50: 48.1, 80: 77.8}},
}


def protocol(flow: dict) -> str:
    """``udp`` or the TCP variant's name (``reno``, ``vegas``, ``westwood``, ``westwood+``)."""
    if flow.get("transport", "tcp") == "udp":
        return "udp"
    cc = (flow.get("tcp") or {}).get("congestion_control") or "cubic"
    return cc["name"] if isinstance(cc, dict) else cc


def _mean(values) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else None


def _worst_lateness_us(link: dict) -> float | None:
    """The largest p99 lateness over the bottleneck's directions and every access link."""
    worst = worst_emulator_lateness_us(link)
    return None if worst is None else worst[0]


def run_row(r: dict) -> dict:
    """The paper's measures of one run (``r``: an entry of :func:`tcpdelay.reproductions.sweep_data.runs`)."""
    sc = tomllib.loads((r["dir"] / "scenario.toml").read_text())
    metrics = json.loads((r["dir"] / "metrics.json").read_text())
    meta = run_json(r["dir"])
    path, access = sc["path"], sc.get("access") or {}
    right = access.get("right") or {}
    media = [f for f in flows_table(r["dir"]) if f["kind"] == "media"]
    bulk = [f for f in flows_table(r["dir"]) if f["kind"] == "bulk"]
    mpeg = sc.get("flows") or []
    if mpeg:
        tagged = "mpeg4-" + ("udp" if mpeg[0].get("transport") == "udp" else "tcp")
        others = bulk                                   # every FTP flow competes with the MPEG flow
        proto = protocol(mpeg[0])
    else:
        tagged = "ftp"
        others = [f for f in bulk if not f["name"].startswith("cross0-")]
        proto = protocol(sc["cross"][0])
    ftp_cc = protocol(sc["cross"][0]) if sc.get("cross") else None
    # the FTP flows' data over the run's duration: what their connections delivered until they
    # ended (sent until the run's end, their buffers drained for at most 5 s after it, on both
    # backends). Their own goodputs (flows.parquet: bytes over each flow's active span) do not
    # add up to a system goodput.
    ftp_bps = sum(f["bytes_received"] for f in others) * 8 / meta["run"]["duration_s"] if others else None
    per_flow = metrics.get("flows") or []
    rt = [f.get("rtpi") or {} for f in per_flow]
    queue = (metrics.get("queue") or {}).get("a_to_b") or {}
    loss = right.get("loss") or {}
    return {
        "cell_id": r["cell_id"], "seed": r["seed"],
        "backend": "ns3" if metrics.get("clock") == "ns3-simulation" else "testbed",
        "topology": "wired" if path["rate_bps"] >= 50e6 else "wireless",
        "protocol": proto, "ftp_protocol": ftp_cc, "tagged": tagged,
        "mpeg_flows": sum(int(f.get("count", 1)) for f in mpeg),
        "ftp_flows": len(others),
        "mpeg_rate_bps": float(mpeg[0]["rate_bps"]) if mpeg else None,
        "per": float(loss.get("p", 0.0)) if loss.get("model") == "bernoulli" else 0.0,
        "handoffs": len(right.get("outages") or []),
        "buffer_packets": int(path["queue_packets"]),
        "bottleneck_delay_s": float(path["delay_s"]),
        "system_goodput_bps": float(sum(f["goodput_bps"] for f in per_flow)) if per_flow else None,
        "rtpi_mean": _mean(x.get("rtpi") for x in rt),
        "delayed_rate_mean": _mean(x.get("delayed_packets_rate") for x in rt),
        "loss_rate_mean": _mean(x.get("packet_loss_rate") for x in rt),
        "jain_index": (metrics.get("fairness") or {}).get("jain_index_goodput"),
        "ftp_goodput_bps": ftp_bps,
        "media_sent": int(sum(f["packets_sent"] for f in media)),
        "queue_mean_packets": queue.get("mean_packets"),
        "queue_max_packets": queue.get("max_packets"),
        "lateness_p99_us": _worst_lateness_us(meta["run"].get("link_counters") or {}),
    }


def paper_queue(row: dict) -> float | None:
    """Tables 1-2's average queue for the row's setting, where the paper has one."""
    if row["topology"] != "wireless" or row["handoffs"] != 5 or row["per"] != 0.01 \
            or row["bottleneck_delay_s"] != 0.025 or row["ftp_flows"]:
        return None
    return PAPER_AVG_QUEUE.get(row["mpeg_flows"], {}).get(row["protocol"], {}).get(row["buffer_packets"])


def evaluate(sweep_dir: Path) -> list[dict]:
    """One row per finished run, in the sweep's cell order."""
    rows = []
    for r in runs(sweep_dir):
        if not (r["dir"] / "metrics.json").is_file():
            continue
        row = run_row(r)
        row["paper_queue_mean_packets"] = paper_queue(row)
        rows.append(row)
    return rows


def queue_traces(sweep_dir: Path) -> pa.Table:
    """The forward queue over the run window of every run of a buffer sweep (from the runs'
    ``link_queue`` records; from ``queue_traces.parquet`` when they are not there)."""
    from tcpdelay.records import read_records

    cols: dict[str, list] = {k: [] for k in ("cell_id", "protocol", "mpeg_flows", "buffer_packets",
                                              "time_s", "packets")}
    have = False
    for r in runs(sweep_dir):
        t = read_records(r["dir"], "link_queue")
        if t.num_rows == 0:
            continue
        have = True
        row = run_row(r)
        run = run_json(r["dir"])["run"]
        t0 = max((run.get("t0_monotonic_s") or 0.0) - (run.get("emulator_start_monotonic_s") or 0.0), 0.0)
        d = t.to_pydict()
        for direction, time_s, packets in zip(d["direction"], d["time_s"], d["packets"]):
            if direction == "a_to_b" and t0 <= time_s <= t0 + run["duration_s"]:
                for k, v in (("cell_id", r["cell_id"]), ("protocol", row["protocol"]),
                             ("mpeg_flows", row["mpeg_flows"]), ("buffer_packets", row["buffer_packets"]),
                             ("time_s", round(time_s - t0, 3)), ("packets", int(packets))):
                    cols[k].append(v)
    if not have:
        kept = sweep_dir / QUEUE_TRACES_FILE
        if kept.is_file():
            return pq.read_table(kept)
    return pa.table(cols)


def figure(traces: pa.Table, path: Path) -> None:
    """Figs 24-26: the queue over time per protocol (one panel each) for buffers 30, 50 and 80,
    at the largest number of flows in the sweep."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = traces.to_pydict()
    n = max(d["mpeg_flows"]) if d["mpeg_flows"] else 0
    protos = [p for p in ("reno", "vegas", "udp") if p in set(d["protocol"])]
    fig, axes = plt.subplots(1, max(len(protos), 1), figsize=(3.3 * max(len(protos), 1), 2.8), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, proto in zip(axes, protos):
        for buf in (30, 50, 80):
            sel = [i for i in range(len(d["time_s"])) if d["protocol"][i] == proto
                   and d["buffer_packets"][i] == buf and d["mpeg_flows"][i] == n]
            if sel:
                ax.plot([d["time_s"][i] for i in sel], [d["packets"][i] for i in sel], lw=0.6,
                        label=f"buffer {buf}")
        ax.set_title(f"{proto}, {n} flows", fontsize=9)
        ax.set_xlabel("time (s)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("queue (packets)")
    axes[-1].legend(fontsize=7)
    save_figure(fig, path)


#: The committed sweeps of Sec. 4.4, per backend and size (results/).
QUEUE_SWEEPS = (("ns-3", "mpeg4-4.4-ns3"), ("testbed", "mpeg4-4.4-reduced"))


def queue_table(results: Path, n: int) -> str:
    """Table 1 (``n`` = 20) or 2 (40): average queue length (packets) as markdown, the paper's
    beside each committed sweep of Sec. 4.4 that has the setting."""
    have = [(label, evaluate(results / name)) for label, name in QUEUE_SWEEPS if (results / name / "sweep.json").is_file()]
    cols = [(label, {(r["protocol"], r["buffer_packets"]): r["queue_mean_packets"] for r in rows
                     if r["mpeg_flows"] == n}) for label, rows in have]
    cols = [(label, v) for label, v in cols if v]
    out = ["| protocol | buffer | paper | " + " | ".join(label for label, _ in cols) + " |",
           "|---|---|---|" + "---|" * len(cols)]
    for proto in ("reno", "vegas", "udp"):
        for buf in (20, 30, 50, 80):
            vals = [_f(v.get((proto, buf)), "{:.1f}") for _, v in cols]
            out.append(f"| {proto} | {buf} | {PAPER_AVG_QUEUE[n][proto][buf]:.1f} | " + " | ".join(vals) + " |")
    return "\n".join(out)


def _load(results: Path, name: str) -> list[dict]:
    return evaluate(results / name) if (results / name / "sweep.json").is_file() else []


def _mbps(x) -> str:
    return _f(x and x / 1e6, "{:.2f}")


def _side(results: Path, base: str) -> list[tuple[str, list[dict]]]:
    """A section's committed sweeps: ns-3 at full size, the testbed and ns-3 at reduced size.
    Where the reduced grid is part of the full one (cell ids name a cell's content; the seed
    fixes a simulation), ns-3 at reduced size is the full sweep's rows of the testbed's cells."""
    full, testbed = _load(results, f"{base}-ns3"), _load(results, f"{base}-reduced")
    reduced = _load(results, f"{base}-reduced-ns3")
    if not reduced and testbed:
        cells = {r["cell_id"] for r in testbed}
        reduced = [r for r in full if r["cell_id"] in cells]
    return [(label, rows) for label, rows in (("ns-3 full", full), ("testbed", testbed),
                                               ("ns-3 reduced", reduced)) if rows]


def table_4_1(results: Path, topology: str) -> str:
    """Figs 2-5: the goodput of the FTP flows other than the tagged one (Mb/s) per number of
    competing FTP flows, with the tagged flow an FTP flow, MPEG over TCP or MPEG over UDP."""
    out = [f"| backend | variant | FTP flows | tagged FTP | tagged MPEG/TCP | tagged MPEG/UDP |", "|---|---|---|---|---|---|"]
    for label, mpeg in _side(results, f"mpeg4-4.1-{topology}"):
        ftp = {"ns-3 full": _load(results, f"mpeg4-4.1-{topology}-ftp-ns3"),
               "testbed": _load(results, f"mpeg4-4.1-{topology}-ftp-reduced"),
               "ns-3 reduced": _load(results, f"mpeg4-4.1-{topology}-ftp-reduced-ns3")}[label]
        rows = mpeg + ftp
        for cc in ("reno", "vegas"):
            for n in sorted({r["ftp_flows"] for r in rows}):
                cell = {r["tagged"]: r["ftp_goodput_bps"] for r in rows
                        if r["ftp_flows"] == n and (r["ftp_protocol"] or r["protocol"]) == cc}
                out.append(f"| {label} | {cc} | {n} | {_mbps(cell.get('ftp'))} | {_mbps(cell.get('mpeg4-tcp'))} "
                           f"| {_mbps(cell.get('mpeg4-udp'))} |")
    return "\n".join(out)


def _grid(rows: list[dict], key: str, protos: tuple[str, ...], fields: tuple[str, ...]) -> list[str]:
    """One line per value of ``key`` and number of flows; per protocol the ``fields``."""
    out = []
    for n in sorted({r["mpeg_flows"] for r in rows}):
        for v in sorted({r[key] for r in rows if r["mpeg_flows"] == n}):
            cells = []
            for proto in protos:
                r = next((r for r in rows if r["mpeg_flows"] == n and r[key] == v and r["protocol"] == proto), None)
                for f in fields:
                    if r is None:
                        cells.append("—")
                    elif f == "system_goodput_bps":
                        cells.append(_mbps(r[f]))
                    elif f == "queue_mean_packets":
                        cells.append(_f(r[f], "{:.1f}"))
                    else:
                        cells.append(_f(r[f], "{:.3f}"))
            out.append(f"| {n} | {v:g} | " + " | ".join(cells) + " |")
    return out


_SHORT = {"system_goodput_bps": "goodput", "rtpi_mean": "RTPI", "delayed_rate_mean": "delayed",
          "loss_rate_mean": "lost", "jain_index": "Jain", "queue_mean_packets": "avg queue"}


def table_grid(rows: list[dict], key: str, key_label: str, protos: tuple[str, ...], fields: tuple[str, ...]) -> str:
    head = "| flows | " + key_label + " | " + " | ".join(f"{p} {_SHORT[f]}" for p in protos for f in fields) + " |"
    return "\n".join([head, "|---|---|" + "---|" * (len(protos) * len(fields))]
                     + _grid(rows, key, protos, fields))


def table_4_2_testbed(results: Path, topology: str) -> str:
    """§4.2 on the testbed at 1-80 flows (30-s runs, Reno and UDP) beside ns-3's full-size runs of
    the same cells (60 s), with how late the emulator wrote packets (the worst link's p99), marked
    † where the run recorded that its testbed was itself late (any component, docs/testbed.md)."""
    testbed = _load(results, f"mpeg4-4.2-{topology}-reduced")
    ns3 = _load(results, f"mpeg4-4.2-{topology}-ns3")
    out = ["| flows | protocol | testbed goodput | ns-3 goodput | testbed RTPI | ns-3 RTPI | testbed Jain | ns-3 Jain "
           "| emulator lateness p99 |", "|---|---|---|---|---|---|---|---|---|"]
    for n in sorted({r["mpeg_flows"] for r in testbed}):
        for proto in ("reno", "udp"):
            t = next((r for r in testbed if r["mpeg_flows"] == n and r["protocol"] == proto), None)
            s = next((r for r in ns3 if r["mpeg_flows"] == n and r["protocol"] == proto), None)
            if t is None:
                continue
            late = t["lateness_p99_us"]
            mark = late_mark(results / f"mpeg4-4.2-{topology}-reduced", t["cell_id"], t["seed"])
            out.append(f"| {n} | {proto} | {_mbps(t['system_goodput_bps'])} | {_mbps(s and s['system_goodput_bps'])} "
                       f"| {_f(t['rtpi_mean'], '{:.3f}')} | {_f(s and s['rtpi_mean'], '{:.3f}')} "
                       f"| {_f(t['jain_index'], '{:.3f}')} | {_f(s and s['jain_index'], '{:.3f}')} "
                       f"| {'—' if late is None else f'{late / 1e3:.1f} ms'}{mark} |")
    return "\n".join(out)


def page_tables(results: Path) -> dict[str, str]:
    """Every table of docs/experiments/mpeg4-transport.md, by name, from the committed sweeps."""
    t: dict[str, str] = {"table-1": queue_table(results, 20), "table-2": queue_table(results, 40)}
    for topo in ("wired", "wireless"):
        t[f"4.1-{topo}"] = table_4_1(results, topo)
        rows = _load(results, f"mpeg4-4.2-{topo}-ns3")
        t[f"4.2-{topo}"] = table_grid(rows, "per", "PER", ("reno", "vegas", "westwood+", "udp"),
                                      ("system_goodput_bps", "rtpi_mean", "jain_index"))
        t[f"4.2-{topo}-testbed"] = table_4_2_testbed(results, topo)
    rows = _load(results, "mpeg4-4.2-westwood-reduced")
    if rows:
        t["4.2-westwood-testbed"] = table_grid(rows, "per", "PER", ("westwood", "westwood+"),
                                               ("system_goodput_bps", "rtpi_mean", "jain_index"))
    for label, rows in _side(results, "mpeg4-4.3"):
        t[f"4.3 {label}"] = table_grid(rows, "per", "PER", ("reno", "vegas", "udp"), ("system_goodput_bps", "rtpi_mean"))
    for label, rows in _side(results, "mpeg4-4.4"):
        t[f"4.4 {label}"] = table_grid(rows, "buffer_packets", "buffer", ("reno", "vegas", "udp"),
                                       ("system_goodput_bps", "rtpi_mean", "delayed_rate_mean"))
    rows = _load(results, "mpeg4-4.5-ns3")
    t["4.5"] = table_grid([{**r, "delay_ms": r["bottleneck_delay_s"] * 1e3} for r in rows], "delay_ms", "delay ms",
                          ("reno", "vegas", "udp"), ("system_goodput_bps", "rtpi_mean", "delayed_rate_mean"))
    for topo in ("wired", "wireless"):
        rows = _load(results, f"mpeg4-rate-calibration-{topo}-ns3")
        t[f"calibration-{topo}"] = "\n".join(
            ["| rate Mb/s | TCP (Reno) goodput | UDP goodput |", "|---|---|---|"]
            + [f"| {rate / 1e6:g} | {_mbps(next((r['system_goodput_bps'] for r in rows if r['mpeg_rate_bps'] == rate and r['protocol'] != 'udp'), None))} "
               f"| {_mbps(next((r['system_goodput_bps'] for r in rows if r['mpeg_rate_bps'] == rate and r['protocol'] == 'udp'), None))} |"
               for rate in sorted({r["mpeg_rate_bps"] for r in rows})])
    return t


def _f(x, fmt="{:.2f}"):
    return "—" if x is None else fmt.format(x)


def write_summary(sweep_dir: Path) -> list[Path]:
    """Keep the sweep's table as ``SWEEP_DIR/summary.json`` and, for a buffer sweep (Sec. 4.4), the
    bottleneck's queue-length traces as ``SWEEP_DIR/queue_traces.parquet``; the files written."""
    rows = evaluate(sweep_dir)
    (sweep_dir / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    written = [sweep_dir / "summary.json"]
    if len({r["buffer_packets"] for r in rows}) > 1:
        pq.write_table(queue_traces(sweep_dir), sweep_dir / QUEUE_TRACES_FILE)
        written.append(sweep_dir / QUEUE_TRACES_FILE)
    return written
