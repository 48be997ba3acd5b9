"""The reproductions, by id: each one's paper, sections, sweeps (scenario file, results directory,
backend, size), the summaries it keeps in its results and the tables of its page.

A :class:`Reproduction` is data; ``tcpdelay reproduce`` (:mod:`tcpdelay.cli.reproduce`) looks
one up by id, runs its sweeps through the sweep machinery (resuming), calls its ``summarize``
and rewrites its page's tables (:mod:`tcpdelay.reproductions.page_tables`).

Sizes: ``reduced`` is what was run for the page on this project's machine (fewer cells, shorter
runs or fewer repetitions, as each page says); ``full`` is the paper's size. A sweep marked
``page`` is one whose committed results the page shows; without ``--size`` or ``--backend`` a
reproduction runs exactly those.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tcpdelay.reproductions.sweep_data import REPO_ROOT

BACKENDS = ("testbed", "ns3")
SIZES = ("reduced", "full")


@dataclass(frozen=True)
class Sweep:
    """One sweep of a reproduction: ``scenario`` (a file under ``experiments/``) run on
    ``backend`` into ``RESULTS/<result>`` (``shard``: the part ``I/N`` of its grid), or, with
    ``validate``, the §5.1 validation grid (``tcpdelay validate`` with those options)."""

    section: str | tuple[str, ...]
    result: str
    backend: str
    size: str
    scenario: str | None = None
    shard: str | None = None
    validate: dict | None = None
    page: bool = True

    def in_section(self, section: str) -> bool:
        return section in ((self.section,) if isinstance(self.section, str) else self.section)

    def scenario_path(self) -> Path | None:
        return None if self.scenario is None else REPO_ROOT / "experiments" / self.scenario


@dataclass(frozen=True)
class Reproduction:
    """A paper's reproduction on one page (docs/experiments/<page>)."""

    id: str
    paper: str
    sections: tuple[str, ...]
    page: str
    sweeps: tuple[Sweep, ...]
    #: Writes the summaries of the sweeps present in a results directory; returns the files.
    summarize: Callable[[Path, tuple[Sweep, ...]], list[Path]]
    #: The page's tables from a results directory: marker line -> table text.
    tables: Callable[[Path], dict[str, str]] | None = None
    #: What a reader of ``--list`` should know beyond the fields above ('' if nothing).
    notes: str = ""

    @property
    def page_path(self) -> Path:
        return REPO_ROOT / "docs" / "experiments" / self.page

    @property
    def sizes(self) -> tuple[str, ...]:
        return tuple(s for s in SIZES if any(w.size == s for w in self.sweeps))

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(b for b in BACKENDS if any(w.backend == b for w in self.sweeps))

    def scenarios(self) -> list[str]:
        """The scenario files of every sweep (``experiments/...``), in order, each once."""
        names = [f"experiments/{w.scenario}" for w in self.sweeps if w.scenario]
        if any(w.validate is not None for w in self.sweeps):
            names.append("experiments/validate-5.1.toml")
        return list(dict.fromkeys(names))


# --- summaries ---------------------------------------------------------------------------------

def _write_json(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def _present(results: Path, sweeps: tuple[Sweep, ...]) -> list[Sweep]:
    return [w for w in sweeps if (results / w.result / "sweep.json").is_file()
            or (w.validate is not None and (results / w.result / "validation-delays.parquet").is_file())]


def _summarize_droptail(results: Path, sweeps: tuple[Sweep, ...]) -> list[Path]:
    from tcpdelay.reproductions.delay_friendliness import droptail_rows

    return [_write_json(results / w.result / "summary.json", droptail_rows(results / w.result))
            for w in _present(results, sweeps)]


def _summarize_split(results: Path, sweeps: tuple[Sweep, ...]) -> list[Path]:
    from tcpdelay.reproductions.delay_friendliness import split_rows

    return [_write_json(results / w.result / "summary.json", split_rows(results / w.result))
            for w in _present(results, sweeps)]


def _summarize_playout(results: Path, sweeps: tuple[Sweep, ...]) -> list[Path]:
    """``RESULTS/playout-6/<stack>.json`` for both stacks, from the validation results present
    (the first directory that has a point wins, in the order of the sweeps)."""
    from tcpdelay.reproductions.delay_friendliness import playout_json, playout_points

    dirs = [results / w.result for w in _present(results, sweeps)]
    if not dirs:
        return []
    out = results / "playout-6"
    out.mkdir(parents=True, exist_ok=True)
    return [_write_json(out / f"{stack}.json", playout_json(playout_points(dirs, stack)))
            for stack in ("newreno-2008", "linux-default")]


def _summarize_latency(results: Path, sweeps: tuple[Sweep, ...]) -> list[Path]:
    from tcpdelay.reproductions.tcp_latency import write_summary

    return [p for w in _present(results, sweeps) for p in write_summary(w.summary_kind, results / w.result)]


def _summarize_hspa(results: Path, sweeps: tuple[Sweep, ...]) -> list[Path]:
    """``hspa-audio.json`` of the page loads with the bulk download (4 Mb/s), and of the 8 Mb/s
    variant alone."""
    from tcpdelay.reproductions.hspa_audio import write_summary

    have = {w.result for w in _present(results, sweeps)}
    groups = []
    for web, bulk in (("hspa-audio-web", "hspa-audio-bulk"), ("hspa-audio-web-8m", None)):
        if web in have:
            groups.append([results / web] + ([results / bulk] if bulk in have else []))
    return [p for g in groups for p in write_summary(g)]


def _summarize_video(results: Path, sweeps: tuple[Sweep, ...]) -> list[Path]:
    from tcpdelay.reproductions.video_tcp_variants import write_summary

    return [p for w in _present(results, sweeps) for p in write_summary(results / w.result)]


def _summarize_mpeg4(results: Path, sweeps: tuple[Sweep, ...]) -> list[Path]:
    from tcpdelay.reproductions.mpeg4_transport import write_summary

    return [p for w in _present(results, sweeps) for p in write_summary(results / w.result)]


# --- page tables -------------------------------------------------------------------------------

def _tables_latency(results: Path) -> dict[str, str]:
    from tcpdelay.reproductions.tcp_latency import page_tables

    return page_tables(results)


def _tables_mpeg4(results: Path) -> dict[str, str]:
    from tcpdelay.reproductions.mpeg4_transport import page_tables

    return {f"<!-- table {name} -->": text for name, text in page_tables(results).items()}


def _tables_split(results: Path) -> dict[str, str]:
    from tcpdelay.reproductions.delay_friendliness import split_page_tables

    return split_page_tables(results)


def _tables_video(results: Path) -> dict[str, str]:
    from tcpdelay.reproductions.video_tcp_variants import page_tables

    return page_tables(results)


def _tables_hspa(results: Path) -> dict[str, str]:
    from tcpdelay.reproductions.hspa_audio import page_tables

    return page_tables(results)


def _tables_playout(results: Path) -> dict[str, str]:
    from tcpdelay.reproductions.delay_friendliness import playout_page_tables

    return playout_page_tables(results)


def _tables_droptail(results: Path) -> dict[str, str]:
    from tcpdelay.reproductions.delay_friendliness import droptail_page_tables

    return droptail_page_tables(results)


# --- the catalog -------------------------------------------------------------------------------

BROSH = ("Brosh, Baset, Misra, Rubenstein and Schulzrinne, \"The Delay-Friendliness of TCP for "
         "Real-Time Traffic\" (SIGMETRICS 2008 / ToN 2010)")


@dataclass(frozen=True)
class LatencySweep(Sweep):
    """A sweep of Cardwell et al.'s reproduction, with the kind of summary it keeps."""

    summary_kind: str = "handshake"


def _latency_sweeps() -> tuple[Sweep, ...]:
    """Every committed sweep of docs/experiments/latency-cardwell.md: (section, result, scenario
    file stem, backend, summary kind, shard). The ``-linux`` results are the testbed's."""
    rows = [
        ("III", "fig3", "fig3", "ns3", "handshake"), ("III", "fig3-linux", "fig3-linux", "testbed", "handshake"),
        ("III", "fig4", "fig4", "ns3", "handshake"), ("III", "fig4-linux", "fig4-linux", "testbed", "handshake"),
        ("IV-A", "lossfree", "lossfree", "ns3", "lossfree"),
        ("IV-A", "lossfree-linux-rtt16", "lossfree-linux", "testbed", "lossfree", "1/3"),
        ("IV-A", "lossfree-linux-rtt64", "lossfree-linux", "testbed", "lossfree", "2/3"),
        ("IV-A", "lossfree-linux-rtt256", "lossfree-linux", "testbed", "lossfree", "3/3"),
        ("IV-A", "lossfree-state", "lossfree-state", "ns3", "state"),
        ("IV-A", "lossfree-grid", "lossfree-grid", "ns3", "lossfree"),
        ("IV-A", "lossfree-grid-linux", "lossfree-grid-linux", "testbed", "lossfree"),
        ("IV-A", "lossfree-paper", "lossfree-paper", "ns3", "lossfree"),
        ("IV-A", "lossfree-linux-iw10", "lossfree-linux-iw10", "testbed", "lossfree"),
        ("IV-A", "loss", "loss", "ns3", "loss"), ("IV-A", "loss-nosack", "loss-nosack", "ns3", "loss"),
        ("IV-A", "loss-paper", "loss-paper", "ns3", "loss"), ("IV-A", "loss-iw10", "loss-iw10", "ns3", "loss"),
        ("IV-A", "loss-state", "loss-state", "ns3", "window"),
        ("IV-A", "loss-iw10-state", "loss-iw10-state", "ns3", "window"),
        ("IV-A", "loss-linux", "loss-linux", "testbed", "loss"),
        ("IV-A", "loss-linux-iw10", "loss-linux-iw10", "testbed", "loss"),
        ("IV-A", "loss-linux-iw10-1mb", "loss-linux-iw10-1mb", "testbed", "loss"),
        ("IV-A", "loss-linux-state", "loss-linux-state", "testbed", "window"),
        ("IV-A", "loss-linux-iw10-state", "loss-linux-iw10-state", "testbed", "window"),
    ]
    for trace in ("verizon", "tmobile", "att"):
        rows += [("IV-B", f"lte-{trace}", f"lte-{trace}", "ns3", "lte"),
                 ("IV-B", f"lte-{trace}-linux", f"lte-{trace}", "testbed", "lte")]
    return tuple(LatencySweep(section=r[0], result=f"latency-cardwell-{r[1]}", backend=r[3], size="full",
                              scenario=f"latency-cardwell-{r[2]}.toml", shard=r[5] if len(r) > 5 else None,
                              summary_kind=r[4]) for r in rows)


def _mpeg4_sweeps() -> tuple[Sweep, ...]:
    """Full size on ns-3 (``-ns3``), reduced on the testbed (``-reduced``) and, where committed,
    on ns-3 (``-reduced-ns3``)."""
    out = []
    for topo in ("wired", "wireless"):
        for part in ("", "-ftp"):
            base = f"mpeg4-4.1-{topo}{part}"
            out += [Sweep("4.1", f"{base}-ns3", "ns3", "full", f"{base}.toml"),
                    Sweep("4.1", f"{base}-reduced", "testbed", "reduced", f"{base}-reduced.toml"),
                    Sweep("4.1", f"{base}-reduced-ns3", "ns3", "reduced", f"{base}-reduced.toml")]
    out += [Sweep("4.2", f"mpeg4-4.2-{t}-ns3", "ns3", "full", f"mpeg4-4.2-{t}.toml") for t in ("wired", "wireless")]
    out += [Sweep("4.2", f"mpeg4-4.2-{t}-reduced", "testbed", "reduced", f"mpeg4-4.2-{t}-reduced.toml")
            for t in ("wired", "wireless")]
    out += [Sweep("4.2", "mpeg4-4.2-westwood-reduced", "testbed", "reduced", "mpeg4-4.2-westwood-reduced.toml")]
    for sec in ("4.3", "4.4"):
        out += [Sweep(sec, f"mpeg4-{sec}-ns3", "ns3", "full", f"mpeg4-{sec}.toml"),
                Sweep(sec, f"mpeg4-{sec}-reduced", "testbed", "reduced", f"mpeg4-{sec}-reduced.toml")]
    out += [Sweep("4.5", "mpeg4-4.5-ns3", "ns3", "full", "mpeg4-4.5.toml")]
    out += [Sweep("calibration", f"mpeg4-rate-calibration-{t}-ns3", "ns3", "full", f"mpeg4-rate-calibration-{t}.toml")
            for t in ("wired", "wireless")]
    return tuple(out)


def _video_sweeps() -> tuple[Sweep, ...]:
    out = []
    for part in ("5a", "5b", "5c", "5d"):
        sec = f"V-{part[1].upper()}"
        out.append(Sweep(sec, f"video-tcp-variants-{part}-reduced", "testbed", "reduced",
                         f"video-tcp-variants-{part}-reduced.toml"))
        if part in ("5a", "5b"):
            out.append(Sweep(sec, f"video-tcp-variants-{part}-vlc-reduced", "testbed", "reduced",
                             f"video-tcp-variants-{part}-vlc-reduced.toml"))
        out.append(Sweep(sec, f"video-tcp-variants-{part}", "testbed", "full", f"video-tcp-variants-{part}.toml",
                         page=False))
    return tuple(out)


REPRODUCTIONS: dict[str, Reproduction] = {r.id: r for r in (
    Reproduction(
        id="droptail-5.3", paper=BROSH, sections=("table-3", "table-4"), page="droptail-5.3.md",
        sweeps=(Sweep("table-3", "droptail-5.3", "testbed", "reduced", "droptail-5.3-reduced.toml"),
                Sweep("table-3", "droptail-5.3-long", "testbed", "reduced", "droptail-5.3-long.toml"),
                Sweep("table-4", "droptail-5.3-video", "testbed", "reduced", "droptail-5.3-video-reduced.toml"),
                Sweep("table-3", "droptail-5.3-full", "testbed", "full", "droptail-5.3.toml", page=False),
                Sweep("table-4", "droptail-5.3-video-full", "testbed", "full", "droptail-5.3-video.toml",
                      page=False)),
        summarize=_summarize_droptail, tables=_tables_droptail),
    Reproduction(
        id="playout-6", paper=BROSH, sections=("6.1", "6.6"), page="playout-6.md",
        sweeps=tuple(Sweep(("6.1", "6.6"), result, "testbed", "reduced", validate=opts) for result, opts in (
            ("validate-reduced", {}),
            ("validate-wide", {"grid": {"rtts_s": (0.02, 0.1, 0.3), "losses": (0.001, 0.01, 0.05, 0.1)}}),
            ("validate-boundary", {"grid": {"stacks": ("newreno-2008",), "rtts_s": (0.1, 0.3),
                                            "losses": (0.005, 0.03)}, "duration_s": 40.0})))
        + (Sweep(("6.1", "6.6"), "validate-full", "testbed", "full", validate={"full": True}, page=False),),
        summarize=_summarize_playout, tables=_tables_playout,
        notes=("the measurements are the §5.1 validation's (tcpdelay validate); 6.1 and 6.6 read the same runs; "
               "the page's Fig 23 table is generated, its working-region table is annotated by hand")),
    Reproduction(
        id="split-parallel-7", paper=BROSH, sections=("7",), page="split-parallel-7.md",
        sweeps=(Sweep("7", "split-parallel-7", "testbed", "reduced", "split-parallel-7-reduced.toml"),
                Sweep("7", "split-parallel-7-full", "testbed", "full", "split-parallel-7.toml", page=False)),
        summarize=_summarize_split, tables=_tables_split),
    Reproduction(
        id="latency-cardwell",
        paper="Cardwell, Savage and Anderson, \"Modeling TCP Latency\" (INFOCOM 2000)",
        sections=("III", "IV-A", "IV-B"), page="latency-cardwell.md", sweeps=_latency_sweeps(),
        summarize=_summarize_latency, tables=_tables_latency,
        notes="IV-B/C's modem and WAN paths replaced by Mahimahi LTE traces"),
    Reproduction(
        id="hspa-audio",
        paper="\"Interactive audio vs. concurrent TCP on a cellular (HSPA) access link\"",
        sections=("audio+n", "audio+bulk", "8m"), page="hspa-audio.md",
        sweeps=(Sweep("audio+n", "hspa-audio-web", "testbed", "reduced", "hspa-audio-web.toml"),
                Sweep("audio+bulk", "hspa-audio-bulk", "testbed", "reduced", "hspa-audio-bulk.toml"),
                Sweep("8m", "hspa-audio-web-8m", "testbed", "reduced", "hspa-audio-web-8m.toml")),
        summarize=_summarize_hspa, tables=_tables_hspa),
    Reproduction(
        id="video-tcp-variants",
        paper=("Watanabe, Kumazoe, Cavendish, Nobayashi, Ikenaga and Oie, \"Performance Characterization "
               "of Streaming Video over TCP Variants\" (INTERNET 2013)"),
        sections=("V-A", "V-B", "V-C", "V-D"), page="video-tcp-variants.md", sweeps=_video_sweeps(),
        summarize=_summarize_video, tables=_tables_video),
    Reproduction(
        id="mpeg4-transport",
        paper=("Papadimitriou and Tsaoussidis, \"On Transport Layer Mechanisms for Real-Time QoS\" "
               "(JMM 2005)"),
        sections=("4.1", "4.2", "4.3", "4.4", "4.5", "calibration"), page="mpeg4-transport.md",
        sweeps=_mpeg4_sweeps(), summarize=_summarize_mpeg4, tables=_tables_mpeg4),
)}
