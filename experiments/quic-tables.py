"""The tables of docs/experiments/media-over-quic.md, computed from the committed sweeps of results/.

    .venv/bin/python experiments/quic-tables.py            # print every table
    .venv/bin/python experiments/quic-tables.py --write    # rewrite the page's tables in place

Each table follows a marker line on the page (``<!-- table quic-voip-reduced -->``: the sweep,
``results/<sweep>``). A row is one cell: the path's RTT and random loss (the drop-tail table has
one path) and the media's transport. Figures, every media packet of the cell's runs pooled:

- sent: media packets the source produced (a packet ``quic-frame-streams`` skipped after its
  stream's reset counts, as one never delivered);
- lost: the fraction of them never delivered;
- delay p50 / p95 / p99: one-way delay of the delivered packets, ms (a transport that loses
  packets has its percentiles over fewer packets: read them with "lost");
- late 150 ms / 400 ms: the fraction of packets sent that arrived later than the playout delay or
  never (150 ms: ITU-T G.114's one-way bound for interactive voice; 400 ms, beyond which G.114 calls
  delay unacceptable for general network planning). The CBR profiles send one packet a frame, so for video this is the
  fraction of frames that miss their playout deadline;
- goodput: the media flows' goodput (metrics.json), kb/s, mean per flow;
- forward packets per media packet (random-drop tables): the packets that entered the emulated
  link in the media's direction (``run.json`` link counters: the media's own packets, TCP's or
  QUIC's retransmissions and QUIC's ACK-only packets; a QUIC packet holds at most 1200 bytes, so a
  1448-byte video packet takes two), per media packet sent;
- emulator lateness p99: how far behind schedule the emulator delivered packets (``run.json``
  link counters, the worst direction), ms: large values mean the shared machine disturbed the run.

Every late fraction is :func:`tcpdelay.metrics.delay.miss_fraction` of the cell's packets (late
or never delivered, over the packets sent; Brosh et al. §6.6's fixed playout delay measured from
the send time), the ``late.miss_fraction`` that metrics.json keeps per flow. The *late against the
playout delay* tables give it at more playout delays (:data:`CURVE_S`: 100 ms to 2 s), per
transport and path, and the delay model's ``late_fraction`` beside ``quic-stream``.

The *loss recovery* table reads what the committed runs keep of each sender's transport state:
the end-of-run counters in ``run.json`` (``media[].sender``). QUIC (RFC 9002): the packets its
loss detection declared lost (§6.1, ``quic.lost_packets``), its probe timeouts (§6.2,
``quic.ptos``) and, for ``quic-frame-streams``, the streams reset at the deadline
(``quic.streams_reset``); TCP: the segments it retransmitted (TCP_INFO's ``tcpi_total_retrans``,
``tcp_info_end``), its tail loss probes (RFC 8985 §7, the namespace's ``TCPLossProbes``; each
random-drop run's sender has a namespace of its own) and its retransmission timeouts
(``tcpi_total_rto``). The state over time (``quic_state``/``tcp_state`` records: window, smoothed
RTT, bytes in flight) is not committed (results/.gitignore), so no table is made of it here.

The random-loss tables put the delay model's prediction for today's Linux TCP
(:func:`tcpdelay.model.delay.predict.predict` with ``stack="linux"``; Brosh et al.'s model with
RACK-TLP recovery) in a row of its own beside ``quic-stream``: one ordered byte stream whose loss
recovery (RFC 9002) is close to RACK-TLP's. The drop-tail table adds the cross traffic's goodput
(bulk = the five FTP flows, web = the on/off web flows, Mb/s summed) and the bottleneck's overflow
drops. The remedies table sets TCP with Brosh et al.'s §7 remedies (split-2, two parallel
connections with the intelligent scheduler) beside the VoIP sweep's TCP and QUIC rows of the same
paths. The variants table sets the QUIC mappings with NewReno, and frame streams reset at 150 ms
(``quic-voip-variants-reduced``), beside the VoIP sweep's QUIC rows (CUBIC, reset at 400 ms).

The *frames* table (papers/003's H.264 file sent as frames, ``quic-h264-reduced``) is per frame,
not per packet: a frame is the packets the source emitted at one instant (a frame's packets leave
together at ``k/30`` s), it arrives when its last packet does (its delay: the largest of its
packets'), and it is lost if any of its packets never arrived. Late at a playout delay: the
fraction of the frames sent that arrived later or never; for the I frames alone at 400 ms (each
the start of a group of pictures the next 59 frames are decoded from). The frame type is the
committed index's (:data:`tcpdelay.traffic.video_file.PAPER_TRACE`), the ``k``-th frame sent being
its ``k``-th line. The *deadlines* frames table sets the same frames over datagrams dropped at the
sender after 400 ms and frame streams reset at 1 s (``quic-h264-deadlines-reduced``) beside that
sweep's datagrams (no deadline) and frame streams (reset at 400 ms) on each path.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np

from tcpdelay.metrics.delay import miss_fraction
from tcpdelay.reproductions.page_tables import write_or_print
from tcpdelay.reproductions.sweep_data import REPO_ROOT, CellIndex, emulator_lateness_us, media_delays, run_json, runs

PAGE = REPO_ROOT / "docs" / "experiments" / "media-over-quic.md"
RESULTS = REPO_ROOT / "results"
DEADLINES_S = (0.15, 0.4)
#: the playout delays of the late-against-playout-delay tables (s): G.114's 150 and 400 ms, and
#: around them, to the 1-2 s a streamed (non-interactive) video can wait
CURVE_S = (0.1, 0.15, 0.2, 0.3, 0.4, 0.6, 1.0, 2.0)
TRANSPORTS = ("tcp", "quic-stream", "quic-frame-streams", "quic-datagram", "udp")
MODEL = "model (`--stack linux`)"
SPLIT2 = "tcp split-2"
CONN2 = "tcp 2 connections (intelligent)"
#: the rows' order within a path: TCP, its remedies, the model beside quic-stream, the rest
ORDER = ("tcp", SPLIT2, CONN2, "quic-stream", MODEL, "quic-frame-streams", "quic-datagram", "udp")

#: marker -> (sweep directory under results/, kind of table)
TABLES = {
    "<!-- table quic-voip-reduced -->": ("quic-voip-reduced", "loss"),
    "<!-- table quic-video-reduced -->": ("quic-video-reduced", "loss"),
    "<!-- table quic-droptail-5.3-reduced -->": ("quic-droptail-5.3-reduced", "droptail"),
    "<!-- table quic-voip-remedies-reduced -->": ("quic-voip-remedies-reduced", "remedies"),
    "<!-- table quic-voip-remedies-reduced late -->": ("quic-voip-remedies-reduced", "remedies-late"),
    "<!-- table quic-voip-reduced late -->": ("quic-voip-reduced", "late"),
    "<!-- table quic-video-reduced late -->": ("quic-video-reduced", "late"),
    "<!-- table quic-droptail-5.3-reduced late -->": ("quic-droptail-5.3-reduced", "droptail-late"),
    "<!-- table quic-recovery -->": ("quic-voip-reduced", "recovery"),
    "<!-- table quic-voip-variants-reduced -->": ("quic-voip-variants-reduced", "variants"),
    "<!-- table quic-h264-reduced frames -->": ("quic-h264-reduced", "frames"),
    "<!-- table quic-h264-deadlines-reduced frames -->": ("quic-h264-deadlines-reduced", "frames-deadlines"),
    "<!-- table quic-h264-gop-reduced frames -->": ("quic-h264-gop-reduced", "frames-gop"),
    "<!-- table quic-h264-reduced state -->": ("quic-h264-reduced", "state"),
    "<!-- table quic-voip-variants-reduced state -->": ("quic-voip-variants-reduced", "state"),
}
#: the loss-recovery table: these random-drop sweeps' cells, the transports that keep state
RECOVERY_SWEEPS = ("quic-voip-reduced", "quic-video-reduced")
#: the remedies table: the TCP remedies' sweep beside these rows of the VoIP sweep at its paths
REMEDIES_BESIDE = ("quic-voip-reduced", ("tcp", "quic-stream", "quic-frame-streams", "quic-datagram"))
#: the QUIC variants table (congestion control, reset deadline): beside these rows of the VoIP sweep
VARIANTS_BESIDE = ("quic-voip-reduced", ("quic-stream", "quic-frame-streams", "quic-datagram"))
#: the H.264 deadlines table: beside these rows of the H.264 sweep (datagrams without a deadline,
#: frame streams reset at 400 ms) on each path
DEADLINES_BESIDE = ("quic-h264-reduced", ("quic-frame-streams", "quic-datagram"))
#: the H.264 table of a stream per group of pictures: beside these rows of the H.264 sweep
GOP_BESIDE = ("quic-h264-reduced", ("tcp", "quic-stream", "quic-frame-streams"))
#: what the QUIC rows of the other sweeps run: CUBIC, frame streams reset 400 ms after their write
QUIC_DEFAULT_CC, QUIC_DEFAULT_DEADLINE_S = "cubic", 0.4


def label(flow: dict) -> str:
    """A row's name for the media flow: its transport, or TCP with its remedy (split-N, parallel
    connections)."""
    h = flow.get("heuristics") or {}
    if h.get("split", 1) > 1:
        return f"tcp split-{h['split']}"
    if h.get("connections", 1) > 1:
        return f"tcp {h['connections']} connections ({h.get('scheduler', 'blind')})"
    name = flow["transport"]
    cc, deadline_s = _quic_choices(flow)
    if (flow.get("quic") or {}).get("streams_per") == "gop":
        name += " per GOP"
    if cc is not None and cc != QUIC_DEFAULT_CC:
        name += f" {cc}"
    if flow["transport"] == "quic-datagram" and deadline_s is not None:
        name += f" dropped after {deadline_s * 1e3:.0f} ms"
    elif deadline_s is not None and deadline_s != QUIC_DEFAULT_DEADLINE_S:
        name += f" reset {deadline_s * 1e3:.0f} ms"
    return name


def _quic_choices(flow: dict) -> tuple[str | None, float | None]:
    """A QUIC flow's congestion control and deadline as its scenario gives them (frame streams:
    the reset, none when not given, as the sender has it; datagrams: the sender's drop); None,
    None for TCP and UDP."""
    if not flow["transport"].startswith("quic-"):
        return None, None
    quic = flow.get("quic") or {}
    deadline = quic.get("deadline_s") if flow["transport"] in ("quic-frame-streams", "quic-datagram") else None
    return quic.get("congestion_control", QUIC_DEFAULT_CC), deadline


def _scenario(sweep: Path) -> dict:
    import tomllib

    return tomllib.loads((sweep / "scenario.toml").read_text())


def _late(d: np.ndarray, deadlines_s=DEADLINES_S) -> list[float]:
    """The fraction of the packets sent that missed each playout delay: late, or never delivered
    (NaN) — :func:`tcpdelay.metrics.delay.miss_fraction`."""
    return [float(x) for x in miss_fraction(d, deadlines_s)]


def _recovery(sender: dict) -> dict:
    """The loss-recovery counters a run kept of one media sender (``run.json``'s
    ``media[].sender``): losses detected, probes and timeouts, streams reset (see the module
    doc); None where the transport has no such counter."""
    quic = sender.get("quic") or {}
    if quic:
        return {"lost": int(quic["lost_packets"]), "ptos": int(quic["ptos"]),
                "streams_reset": int(quic.get("streams_reset", 0)), "tlps": None, "rtos": None}
    info = sender.get("tcp_info_end") or []
    if not info:     # UDP: no transport state
        return {"lost": None, "ptos": None, "streams_reset": None, "tlps": None, "rtos": None}
    return {"lost": sum(int(c["total_retrans"]) for c in info), "ptos": None, "streams_reset": None,
            "tlps": int((sender.get("tcp_counters") or {}).get("TCPLossProbes", 0)),
            "rtos": sum(int(c["total_rto"]) for c in info)}


def _path_and_flow(ov: dict, scenario: dict) -> tuple[float, float, dict]:
    """A cell's RTT, random loss and media flow (its overrides over the sweep's scenario)."""
    flow = dict(ov.get("flows[0]") or scenario["flows"][0])
    if "flows[0].heuristics" in ov:
        flow["heuristics"] = ov["flows[0].heuristics"]
    rtt_s = ov.get("path.rtt_s", scenario["path"]["rtt_s"])
    loss = ov.get("path.forward.loss.p", ((scenario["path"].get("forward") or {}).get("loss") or {}).get("p", 0.0))
    return float(rtt_s), float(loss), flow


def cell_rows(sweep: Path) -> list[dict]:
    """One row per cell of ``sweep``: transport, RTT, loss, profile and the figures above."""
    scenario = _scenario(sweep)
    delays = media_delays(sweep)
    cells = CellIndex(delays)
    d_delay = delays["delay_s"].to_numpy(zero_copy_only=False)
    by_cell: dict[str, list[dict]] = {}
    for r in runs(sweep):
        by_cell.setdefault(r["cell_id"], []).append(r)
    rows = []
    for cell_id, rs in by_cell.items():
        rtt_s, loss, flow = _path_and_flow(rs[0]["overrides"], scenario)
        d = d_delay[cells.mask(cell_id)]
        got = d[np.isfinite(d)]
        if not got.size:
            raise SystemExit(f"{sweep.name}: cell {cell_id} has no delivered media packet (an unfinished run?)")
        goodput, bulk, web, qdrops, lateness, wire, recovery, path_drops = [], [], [], [], [], [], [], []
        for r in rs:
            metrics = json.loads((r["dir"] / "metrics.json").read_text())
            goodput += [f.get("goodput_bps") or 0.0 for f in metrics["flows"]]
            bulk.append(sum(c.get("goodput_bps") or 0.0 for c in metrics.get("cross", []) if c["kind"] == "bulk"))
            web.append(sum(c.get("goodput_bps") or 0.0 for c in metrics.get("cross", []) if c["kind"] != "bulk"))
            run = run_json(r["dir"])["run"]
            recovery += [_recovery(m["sender"]) for m in run["media"]]
            forward = run["link_counters"]["a_to_b"]
            qdrops.append(forward["drops"]["queue"])
            path_drops.append(forward["drops"]["loss"])
            wire.append(forward["packets_in"])
            lateness.append(emulator_lateness_us(r["dir"])[0])
        rows.append({
            "transport": label(flow), "mapping": flow["transport"], "quic": _quic_choices(flow),
            "profile": flow["profile"], "rtt_s": float(rtt_s), "loss": float(loss),
            "runs": len(rs), "packets": int(d.size), "lost": np.count_nonzero(~np.isfinite(d)) / d.size,
            "p50_ms": 1e3 * np.percentile(got, 50), "p95_ms": 1e3 * np.percentile(got, 95),
            "p99_ms": 1e3 * np.percentile(got, 99), "late": _late(d), "curve": _late(d, CURVE_S),
            "goodput_kbps": float(np.mean(goodput)) / 1e3, "bulk_mbps": float(np.mean(bulk)) / 1e6,
            "web_mbps": float(np.mean(web)) / 1e6, "queue_drops": float(np.mean(qdrops)),
            "lateness_ms": float(max(lateness)) / 1e3, "wire_per_packet": float(sum(wire)) / d.size,
            "wire_packets": int(sum(wire)), "path_drops": int(sum(path_drops)), "recovery": recovery,
        })
    return rows


@lru_cache(maxsize=None)
def model_row(profile: str, rtt_s: float, loss: float) -> dict:
    """The delay model's prediction for Linux TCP (``--stack linux``) of ``profile`` on this path."""
    from tcpdelay.model.delay.predict import predict

    p = predict(profile, rtt_s=rtt_s, loss=loss, stack="linux")
    row = {"transport": MODEL, "profile": profile, "rtt_s": rtt_s, "loss": loss, "unstable": bool(p.unstable)}
    if not p.unstable:
        row.update({"p50_ms": 1e3 * float(p.quantile(0.5)), "p95_ms": 1e3 * float(p.quantile(0.95)),
                    "p99_ms": 1e3 * float(p.quantile(0.99)),
                    "late": [float(p.late_fraction(t)) for t in DEADLINES_S],
                    "curve": [float(p.late_fraction(t)) for t in CURVE_S]})
    return row


def _order(r: dict) -> tuple:
    t = r["transport"]
    if t in ORDER:
        return (r["rtt_s"], r["loss"], ORDER.index(t), "")
    return (r["rtt_s"], r["loss"], ORDER.index(t.split(" ")[0]), t)     # a QUIC variant after its mapping


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %"


def loss_table(sweep_name: str, kind: str = "loss") -> str:
    rows = cell_rows(RESULTS / sweep_name)
    if kind == "remedies":
        rows += _beside(rows, REMEDIES_BESIDE)
    else:
        rows += [model_row(r["profile"], r["rtt_s"], r["loss"]) for r in rows if r["transport"] == "quic-stream"]
    rows.sort(key=_order)
    late_cols = " | ".join(f"late {int(t * 1e3)} ms" for t in DEADLINES_S)
    out = [f"| RTT (ms) | loss | transport | sent | lost | delay p50 / p95 / p99 (ms) | {late_cols} | goodput (kb/s) "
           "| forward packets per media packet | emulator lateness p99 (ms) |",
           "|" + "---|" * (9 + len(DEADLINES_S))]
    for r in rows:
        head = f"| {1e3 * r['rtt_s']:.0f} | {100 * r['loss']:g} % | {r['transport']} "
        if r["transport"] == MODEL:
            if r["unstable"]:
                out.append(head + "| – | – | unstable: the source's rate exceeds TCP's throughput |"
                           + " – |" * (len(DEADLINES_S) + 3))
            else:
                late = " | ".join(_pct(x) for x in r["late"])
                out.append(head + f"| – | – | {r['p50_ms']:.0f} / {r['p95_ms']:.0f} / {r['p99_ms']:.0f} | {late} | – | – | – |")
            continue
        late = " | ".join(_pct(x) for x in r["late"])
        out.append(head + f"| {r['packets']} | {_pct(r['lost'])} | {r['p50_ms']:.0f} / {r['p95_ms']:.0f} / "
                   f"{r['p99_ms']:.0f} | {late} | {r['goodput_kbps']:.1f} | {r['wire_per_packet']:.2f} | {r['lateness_ms']:.2f} |")
    return "\n".join(out)


def droptail_table(sweep_name: str) -> str:
    rows = sorted(cell_rows(RESULTS / sweep_name), key=_order)
    late_cols = " | ".join(f"late {int(t * 1e3)} ms" for t in DEADLINES_S)
    out = [f"| transport | runs | sent | lost | delay p50 / p95 / p99 (ms) | {late_cols} | media goodput per flow (kb/s) "
           "| bulk goodput (Mb/s) | web goodput (Mb/s) | overflow drops | emulator lateness p99 (ms) |",
           "|" + "---|" * (10 + len(DEADLINES_S))]
    for r in rows:
        late = " | ".join(_pct(x) for x in r["late"])
        out.append(f"| {r['transport']} | {r['runs']} | {r['packets']} | {_pct(r['lost'])} | {r['p50_ms']:.0f} / "
                   f"{r['p95_ms']:.0f} / {r['p99_ms']:.0f} | {late} | {r['goodput_kbps']:.1f} | {r['bulk_mbps']:.2f} "
                   f"| {r['web_mbps']:.2f} | {r['queue_drops']:.0f} | {r['lateness_ms']:.2f} |")
    return "\n".join(out)


def variants_table(sweep_name: str) -> str:
    """The QUIC mappings with other congestion control or reset deadline (``sweep_name``) beside
    the same mappings' rows of :data:`VARIANTS_BESIDE` (CUBIC, reset at 400 ms) on each path."""
    rows = cell_rows(RESULTS / sweep_name)
    rows += _beside(rows, VARIANTS_BESIDE)
    rows.sort(key=_order)
    late_cols = " | ".join(f"late {int(t * 1e3)} ms" for t in DEADLINES_S)
    out = [f"| RTT (ms) | loss | mapping | congestion control | reset at (ms) | sent | lost | delay p50 / p95 / p99 (ms) "
           f"| {late_cols} | goodput (kb/s) | emulator lateness p99 (ms) |",
           "|" + "---|" * (10 + len(DEADLINES_S))]
    for r in rows:
        cc, deadline_s = r["quic"]
        reset = "–" if deadline_s is None else f"{deadline_s * 1e3:.0f}"
        late = " | ".join(_pct(x) for x in r["late"])
        out.append(f"| {1e3 * r['rtt_s']:.0f} | {100 * r['loss']:g} % | {r['mapping']} | {cc} | {reset} | {r['packets']} "
                   f"| {_pct(r['lost'])} | {r['p50_ms']:.0f} / {r['p95_ms']:.0f} / {r['p99_ms']:.0f} | {late} "
                   f"| {r['goodput_kbps']:.1f} | {r['lateness_ms']:.2f} |")
    return "\n".join(out)


def _beside(rows: list[dict], spec: tuple[str, tuple[str, ...]], rows_of=None) -> list[dict]:
    """The rows of ``spec`` (a sweep and the transports to take from it: :data:`REMEDIES_BESIDE`,
    :data:`VARIANTS_BESIDE`, :data:`DEADLINES_BESIDE`) on the paths of ``rows``, made by
    ``rows_of`` (:func:`cell_rows` by default, :func:`frame_rows` for the frames tables)."""
    paths = {(r["rtt_s"], r["loss"]) for r in rows}
    beside, transports = spec
    return [r for r in (rows_of or cell_rows)(RESULTS / beside)
            if r["transport"] in transports and (r["rtt_s"], r["loss"]) in paths]


def late_table(sweep_name: str, droptail: bool = False, remedies: bool = False) -> str:
    """The late fraction of each cell at every playout delay of :data:`CURVE_S` (the random-drop
    sweeps with the delay model beside ``quic-stream``; the drop-tail sweep one row a transport;
    the remedies sweep beside the VoIP sweep's TCP and QUIC rows of its paths)."""
    rows = cell_rows(RESULTS / sweep_name)
    if remedies:
        rows += _beside(rows, REMEDIES_BESIDE)
    elif not droptail:
        rows += [model_row(r["profile"], r["rtt_s"], r["loss"]) for r in rows if r["transport"] == "quic-stream"]
    rows.sort(key=_order)
    cols = " | ".join(f"{t * 1e3:.0f} ms" for t in CURVE_S)
    head = "| transport |" if droptail else "| RTT (ms) | loss | transport |"
    out = [f"{head} late at {cols} |", "|" + "---|" * (head.count("|") - 1 + len(CURVE_S))]
    for r in rows:
        key = f"| {r['transport']} " if droptail else \
            f"| {1e3 * r['rtt_s']:.0f} | {100 * r['loss']:g} % | {r['transport']} "
        if r.get("unstable"):
            out.append(key + "| unstable: the source's rate exceeds TCP's throughput |" + " – |" * (len(CURVE_S) - 1))
        else:
            out.append(key + "| " + " | ".join(_pct(x) for x in r["curve"]) + " |")
    return "\n".join(out)


def recovery_rows() -> list[dict]:
    """One row per cell of :data:`RECOVERY_SWEEPS` whose transport keeps state (not UDP): the
    senders' loss-recovery counters summed over the cell's runs, with the packets that entered
    the link in the media's direction and those its random loss dropped (``run.json``'s link
    counters, ``a_to_b``)."""
    out = []
    for sweep in RECOVERY_SWEEPS:
        for r in cell_rows(RESULTS / sweep):
            if r["transport"] == "udp":
                continue
            total = {k: sum(x[k] for x in r["recovery"]) if r["recovery"][0][k] is not None else None
                     for k in r["recovery"][0]}
            out.append({**r, **{f"n_{k}": v for k, v in total.items()}})
    return out


def recovery_table() -> str:
    rows = sorted(recovery_rows(), key=lambda r: (r["profile"] != "voip",) + _order(r))
    out = ["| media | RTT (ms) | loss | transport | forward packets | dropped by the path "
           "| losses detected (TCP: segments retransmitted) | probe timeouts (QUIC: PTOs; TCP: tail loss probes / RTOs) "
           "| streams reset |",
           "|" + "---|" * 9]
    for r in rows:
        probes = f"{r['n_ptos']}" if r["n_ptos"] is not None else f"{r['n_tlps']} / {r['n_rtos']}"
        reset = "–" if r["transport"] != "quic-frame-streams" else f"{r['n_streams_reset']}"
        out.append(f"| {r['profile']} | {1e3 * r['rtt_s']:.0f} | {100 * r['loss']:g} % | {r['transport']} "
                   f"| {r['wire_packets']} | {r['path_drops']} | {r['n_lost']} | {probes} | {reset} |")
    return "\n".join(out)


FRAME_DEADLINES_S = (0.15, 0.4, 1.0)


def frame_rows(sweep: Path) -> list[dict]:
    """Per cell of a sweep of frames (module doc, *frames*): frames sent and lost, the delivered
    frames' delay percentiles, the late fractions at :data:`FRAME_DEADLINES_S` and of the I frames
    at 400 ms, beside :func:`cell_rows`' goodput and emulator lateness of the same cell."""
    from tcpdelay.traffic.video_file import PAPER_TRACE
    from tcpdelay.traffic.video_trace import parse_trace

    types, _ = parse_trace(PAPER_TRACE)
    delays = media_delays(sweep)
    cells = CellIndex(delays)
    seeds = delays["seed"].to_numpy()
    send = delays["send_time_s"].to_numpy()
    delay = delays["delay_s"].to_numpy(zero_copy_only=False)
    by_path = {(r["rtt_s"], r["loss"], r["transport"]): r for r in cell_rows(sweep)}
    scenario = _scenario(sweep)
    pooled: dict[str, tuple[dict, list, list]] = {}
    for r in runs(sweep):
        rtt_s, loss, flow = _path_and_flow(r["overrides"], scenario)
        row = by_path[(rtt_s, loss, label(flow))]
        m = cells.mask(r["cell_id"]) & (seeds == r["seed"])
        t, d = send[m], delay[m]
        # a frame: the packets written at one instant (send times kept at 1 ms; frames 33 ms apart)
        frame_t, inverse = np.unique(t, return_inverse=True)
        lost = np.zeros(frame_t.size, dtype=bool)
        np.logical_or.at(lost, inverse, ~np.isfinite(d))
        worst = np.full(frame_t.size, -np.inf)
        np.maximum.at(worst, inverse, np.where(np.isfinite(d), d, -np.inf))
        k = np.rint((frame_t - frame_t[0]) * 30).astype(int)
        _, fds, is_i = pooled.setdefault(r["cell_id"], (row, [], []))
        fds.append(np.where(lost, np.nan, worst))
        is_i.append(types[k % types.size] == "I")
    out = []
    for row, fds, is_i in pooled.values():
        fd, i_mask = np.concatenate(fds), np.concatenate(is_i)
        got = fd[np.isfinite(fd)]
        pct = (lambda q: 1e3 * float(np.percentile(got, q))) if got.size else (lambda q: None)  # noqa: E731
        out.append({**row, "frames": int(fd.size), "frames_lost": float(np.mean(~np.isfinite(fd))),
                    "frame_p50_ms": pct(50), "frame_p95_ms": pct(95), "frame_p99_ms": pct(99),
                    "frame_late": [float(x) for x in miss_fraction(fd, FRAME_DEADLINES_S)],
                    "i_frames": int(i_mask.sum()), "i_late_400": float(miss_fraction(fd[i_mask], (0.4,))[0])})
    return sorted(out, key=_order)


def frames_table(sweep_name: str, beside: tuple[str, tuple[str, ...]] | None = None) -> str:
    """The frames table of ``sweep_name``; with ``beside`` (:data:`DEADLINES_BESIDE`,
    :data:`GOP_BESIDE`) that sweep's rows of those transports on the same paths too."""
    rows = frame_rows(RESULTS / sweep_name)
    if beside is not None:
        rows = sorted(rows + _beside(rows, beside, frame_rows), key=_order)
    late_cols = " | ".join(f"late {t * 1e3:.0f} ms" for t in FRAME_DEADLINES_S)
    out = [f"| RTT (ms) | loss | transport | frames | frames lost | frame delay p50 / p95 / p99 (ms) | {late_cols} "
           "| I frames late 400 ms | goodput (Mb/s) | emulator lateness p99 (ms) |",
           "|" + "---|" * (9 + len(FRAME_DEADLINES_S))]
    for r in rows:
        late = " | ".join(_pct(x) for x in r["frame_late"])
        delays = ("none delivered whole" if r["frame_p50_ms"] is None else
                  f"{r['frame_p50_ms']:.0f} / {r['frame_p95_ms']:.0f} / {r['frame_p99_ms']:.0f}")
        out.append(f"| {1e3 * r['rtt_s']:.0f} | {100 * r['loss']:g} % | {r['transport']} | {r['frames']} "
                   f"| {_pct(r['frames_lost'])} | {delays} | {late} | {_pct(r['i_late_400'])} ({r['i_frames']}) "
                   f"| {r['goodput_kbps'] / 1e3:.2f} | {r['lateness_ms']:.2f} |")
    return "\n".join(out)


def state_rows(sweep: Path) -> list[dict]:
    """Per cell: the media sender's transport state over the run, from the sweep's kept
    ``transport_state.parquet`` (:mod:`tcpdelay.results.kept_transport_state`): samples, the
    window's median (kB), the smoothed RTT's median and p95 (ms), and for QUIC the share of
    samples with the bytes in flight within one packet (1200 bytes) of the window (the window
    limits the sender)."""
    from tcpdelay.results.kept_transport_state import kept_transport_state

    kept = kept_transport_state(sweep)
    if not kept:
        raise SystemExit(f"{sweep.name}: no transport_state.parquet (quic-tables.py --keep-state on the measuring machine)")
    by_path = {(r["rtt_s"], r["loss"], r["transport"]): r for r in cell_rows(sweep)}
    scenario = _scenario(sweep)
    out = []
    for r in runs(sweep):
        rtt_s, loss, flow = _path_and_flow(r["overrides"], scenario)
        key = (rtt_s, loss, label(flow))
        if flow["transport"] == "udp":
            continue
        s = kept[(r["cell_id"], r["seed"])]
        srtt = s["srtt_s"][np.isfinite(s["srtt_s"])]
        flight = s["bytes_in_flight"]
        bound = (float(np.mean(flight >= s["cwnd_bytes"] - 1200)) if np.isfinite(flight).all() and flight.size
                 else None)
        out.append({**by_path[key], "samples": int(s["time_s"].size),
                    "cwnd_kb": float(np.median(s["cwnd_bytes"])) / 1e3,
                    "srtt_p50_ms": 1e3 * float(np.median(srtt)), "srtt_p95_ms": 1e3 * float(np.percentile(srtt, 95)),
                    "window_bound": bound})
    return sorted(out, key=_order)


def state_table(sweep_name: str) -> str:
    out = ["| RTT (ms) | loss | transport | samples | window p50 (kB) | smoothed RTT p50 / p95 (ms) "
           "| window-bound (QUIC) | goodput (kb/s) |", "|" + "---|" * 8]
    for r in state_rows(RESULTS / sweep_name):
        bound = "–" if r["window_bound"] is None else _pct(r["window_bound"])
        out.append(f"| {1e3 * r['rtt_s']:.0f} | {100 * r['loss']:g} % | {r['transport']} | {r['samples']} "
                   f"| {r['cwnd_kb']:.1f} | {r['srtt_p50_ms']:.0f} / {r['srtt_p95_ms']:.0f} | {bound} "
                   f"| {r['goodput_kbps']:.0f} |")
    return "\n".join(out)


def table(sweep_name: str, kind: str) -> str:
    if kind == "state":
        return state_table(sweep_name)
    if kind == "frames":
        return frames_table(sweep_name)
    if kind == "frames-deadlines":
        return frames_table(sweep_name, DEADLINES_BESIDE)
    if kind == "frames-gop":
        return frames_table(sweep_name, GOP_BESIDE)
    if kind in ("late", "droptail-late", "remedies-late"):
        return late_table(sweep_name, droptail=kind == "droptail-late", remedies=kind == "remedies-late")
    if kind == "recovery":
        return recovery_table()
    if kind == "variants":
        return variants_table(sweep_name)
    return droptail_table(sweep_name) if kind == "droptail" else loss_table(sweep_name, kind)


def window_reading(sweep_name: str = "quic-voip-reduced", transport: str = "quic-datagram", rtt_s: float = 0.3,
                   loss: float = 0.05) -> dict:
    """What the page's claim 2 reads from one run's ``quic_state`` records (its sender's samples every
    10 ms): CUBIC's window (minimum, p5), the bytes in flight (p50) and the share of samples with the
    bytes in flight within 300 bytes of the window. The records are the run's own (``flows/<id>/
    quic_state``), kept on the machine that measured and not committed (results/.gitignore), so
    this runs only there, or after the cell is run again."""
    from tcpdelay.records import read_records

    for r in runs(RESULTS / sweep_name):
        ov = r["overrides"]
        if ((ov.get("flows[0]") or {}).get("transport") == transport and ov.get("path.rtt_s") == rtt_s
                and ov.get("path.forward.loss.p") == loss):
            state = read_records(r["dir"] / "flows" / "0", "quic_state")
            cwnd = state["cwnd_bytes"].to_numpy()
            flight = state["bytes_in_flight"].to_numpy()
            return {"samples": int(cwnd.size), "cwnd_min_bytes": float(cwnd.min()),
                    "cwnd_p5_bytes": float(np.percentile(cwnd, 5)), "in_flight_p50_bytes": float(np.median(flight)),
                    "window_bound_share": float(np.mean(flight >= cwnd - 300))}
    raise SystemExit(f"{sweep_name}: no run of {transport} at RTT {rtt_s} s, loss {loss}")


def pto_times(sweep_name: str = "quic-voip-reduced", rtt_s: float = 0.3) -> list[dict]:
    """When each QUIC run of ``sweep_name`` at ``rtt_s`` took its probe timeouts, from its
    sender's ``quic_state`` samples (the first taken once the handshake completed): the PTOs
    counted by then (the handshake's), the seconds from the first sample at which
    ``ptos_total`` rose, and at which the sender first had an RTT sample (``srtt_s`` set).
    Like :func:`window_reading`, from the runs' own records (the measuring machine only)."""
    from tcpdelay.records import read_records

    out = []
    for r in runs(RESULTS / sweep_name):
        ov = r["overrides"]
        transport = (ov.get("flows[0]") or {}).get("transport", "")
        if not transport.startswith("quic-") or ov.get("path.rtt_s") != rtt_s:
            continue
        state = read_records(r["dir"] / "flows" / "0", "quic_state")
        t, ptos = state["time_s"].to_numpy(), state["ptos_total"].to_numpy()
        srtt = state["srtt_s"].to_numpy(zero_copy_only=False)
        rose = np.nonzero(np.diff(ptos))[0] + 1
        sampled = np.nonzero(np.isfinite(srtt.astype(float)))[0]
        out.append({"transport": transport, "loss": ov.get("path.forward.loss.p"), "ptos": int(ptos[-1]),
                    "ptos_in_handshake": int(ptos[0]), "pto_at_s": [round(float(t[i] - t[0]), 3) for i in rose],
                    "first_rtt_sample_s": round(float(t[sampled[0]] - t[0]), 3) if sampled.size else None})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the tables of docs/experiments/media-over-quic.md")
    ap.add_argument("--only", metavar="TEXT", help="only the tables whose marker contains TEXT (e.g. voip)")
    ap.add_argument("--quic-state", action="store_true",
                    help="print claim 2's reading of the window and claim 12's PTO times from the runs' quic_state records "
                         "(the measuring machine only)")
    ap.add_argument("--keep-state", metavar="SWEEP",
                    help="write results/SWEEP/transport_state.parquet from its runs' quic_state / tcp_state "
                         "records (the measuring machine only), for the state tables")
    args = ap.parse_args(argv)
    if args.quic_state:
        print(json.dumps({"window": window_reading(), "ptos_rtt_300ms": pto_times()}, indent=1))
        return 0
    if args.keep_state:
        from tcpdelay.results.kept_transport_state import keep_transport_state

        sweep = RESULTS / args.keep_state
        print(f"{sweep}: {keep_transport_state(sweep, runs(sweep))} samples kept")
        return 0
    tables = {}
    for marker, spec in TABLES.items():
        if args.only and args.only not in marker:
            continue
        if not (RESULTS / spec[0] / "sweep.json").is_file():
            print(f"{marker}: results/{spec[0]} is missing, skipped", file=sys.stderr)
            continue
        tables[marker] = table(*spec)
    write_or_print(PAGE, tables, write=args.write, root=REPO_ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
