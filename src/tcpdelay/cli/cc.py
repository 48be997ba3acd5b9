"""``tcpdelay cc``: the congestion controls tcpdelay can run on this machine (docs/congestion-control.md)."""

from __future__ import annotations

import click

from tcpdelay.cli.common import emit, json_option


@click.group("cc")
def cc_group() -> None:
    """TCP congestion controls: the kernel's own and the papers' variants as BPF programs."""


def variants_status() -> list[dict]:
    """Every variant: the name TCP_CONGESTION takes for its default parameters, where it comes
    from (``builtin``/``bpf``), its status here and its parameters."""
    from tcpdelay.testbed import bpf_cc
    from tcpdelay.testbed.congestion import VARIANTS, resolve
    from tcpdelay.testbed.tcp_settings import available_congestion_controls

    available = available_congestion_controls()
    out = []
    for v in VARIANTS.values():
        alg = resolve(v.name, available=available)
        if alg.source == "builtin":
            status = "builtin" if alg.kernel_name in available else "unavailable"
        elif alg.kernel_name in available:
            status = "loaded"
        elif (bpf_cc.bpf_dir() / f"{v.bpf_object}.bpf.o").is_file():
            status = "loadable"
        else:
            status = "not built"
        out.append({"name": v.name, "kernel_name": alg.kernel_name, "source": alg.source, "status": status,
                    "description": v.description, "reference": v.source,
                    "parameters": [{"name": p.name, "default": p.default, "unit": p.unit, "minimum": p.minimum,
                                    "maximum": p.maximum, "description": p.doc} for p in v.params],
                    "state": list(v.state)})
    return out


@cc_group.command("list")
@json_option
def list_cmd(as_json):
    """Every congestion control by name: built in, loadable (a BPF program built here), loaded
    (registered now) or not built; the name to give TCP_CONGESTION; its parameters."""
    doc = {"variants": variants_status()}

    def human(console):
        from rich.table import Table

        t = Table(box=None)
        for col in ("name", "TCP_CONGESTION", "source", "status", "parameters"):
            t.add_column(col)
        for v in doc["variants"]:
            params = ", ".join(f"{p['name']}={p['default']:g}{(' ' + p['unit']) if p['unit'] else ''}"
                               for p in v["parameters"]) or "—"
            t.add_row(v["name"], v["kernel_name"], v["source"], v["status"], params)
        console.print(t)

    emit(doc, as_json, human)


COMMANDS = [cc_group]
