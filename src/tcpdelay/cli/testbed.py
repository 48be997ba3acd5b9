"""``tcpdelay testbed up|status|down|clean``: emulation testbeds that outlive one command.

``up`` starts a supervisor process that builds the testbed and holds it (hosts, emulator) until
``down``; programs run in a host with ``ip netns exec td-<run>-<host> ...``. ``clean`` removes
what killed runs left behind. Python programs use :class:`tcpdelay.testbed.Testbed` instead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import click

from tcpdelay.cli.common import PROBABILITY, FiniteFloatRange, emit, fmt_bps, fmt_s, json_option
from tcpdelay.errors import ParameterError
from tcpdelay.testbed import netns as nsutil
from tcpdelay.testbed import runs
from tcpdelay.testbed.spec import PRESETS, parse_spec
from tcpdelay.errors import TestbedError


@click.group("testbed")
def testbed_group() -> None:
    """Emulation testbed: hosts in network namespaces on both sides of the tcpdelay-link emulator."""


def _load_config(path: str) -> dict:
    try:
        if path.endswith(".toml"):
            import tomllib

            with open(path, "rb") as f:
                return tomllib.load(f)
        with open(path) as f:
            return json.load(f)
    except OSError as err:
        raise ParameterError(f"--config {path}: {err.strerror}") from None
    except ValueError as err:
        raise ParameterError(f"--config {path}: not valid {'TOML' if path.endswith('.toml') else 'JSON'}: {err}") from None


def build_spec_data(config, left, right, delay_s, jitter_s, loss, rate_bps, queue_packets, queue_bytes,
                    tcp_preset, congestion_control, initcwnd, seed, cc: str | None = None,
                    queue_discipline: str | None = None, ecn: bool = False) -> dict:
    """The testbed spec (plain data) from ``--config`` with the flags on top. ``queue_discipline``
    (drop_tail, codel, fq_codel, pie: the link's ``aqm`` with its RFC defaults) and ``ecn`` (the
    discipline marks CE instead of dropping, and every host negotiates ECN: ``tcp_ecn = 1``)."""
    data = _load_config(config) if config else {}
    if left is not None or right is not None or "hosts" not in data:
        tcp = data.get("tcp", {})
        data["hosts"] = ([{"name": f"left{i}", "side": "left", "tcp": tcp} for i in range(left or 1)]
                         + [{"name": f"right{i}", "side": "right", "tcp": tcp} for i in range(right or 1)])
    data.pop("tcp", None)
    direction: dict = {}
    if delay_s is not None:
        direction["delay_s"] = delay_s
    if jitter_s is not None:
        direction["jitter_s"] = jitter_s
    if loss is not None:
        direction["loss"] = {"model": "bernoulli", "p": loss}
    if rate_bps is not None:
        direction["rate_bps"] = rate_bps
    if queue_packets is not None:
        direction["queue_packets"] = queue_packets
    if queue_bytes is not None:
        direction["queue_bytes"] = queue_bytes
    if queue_discipline is not None or ecn:
        from tcpdelay.link import aqm_named

        direction["aqm"] = aqm_named(queue_discipline or "drop_tail", ecn).model_dump()
    link = data.setdefault("link", {})
    for d in ("a_to_b", "b_to_a"):
        link[d] = {**link.get(d, {}), **direction}
    tcp_over: dict = {}
    if tcp_preset is not None:
        tcp_over.update(PRESETS[tcp_preset].model_dump(exclude_none=True))
    if congestion_control is not None:
        tcp_over["congestion_control"] = congestion_control
    if initcwnd is not None:
        tcp_over["initcwnd_segments"] = initcwnd
    if ecn:
        tcp_over["ecn"] = 1
    if tcp_over:
        for h in data["hosts"]:
            h["tcp"] = {**h.get("tcp", {}), **tcp_over}
    if seed is not None:
        data["seed"] = seed
    if cc:
        from tcpdelay.testbed.congestion import get_variant

        names = [n.strip() for n in cc.split(",") if n.strip()]
        for n in names:
            try:
                get_variant(n)
            except ParameterError as err:
                raise ParameterError(f"--cc: {err}") from None
        data["congestion_controls"] = [*data.get("congestion_controls", []), *names]
    return data


def _run_rows(info: dict) -> list[str]:
    guests = info.get("guests") or {}

    def where(n: str, h: dict) -> str:
        g = guests.get(n)
        if g is None:
            return f"({h.get('netns')})"
        return (f"(a QEMU guest: Linux {g.get('release')}, {g.get('accelerator')}, cc "
                f"{g.get('congestion_control')}{'' if g.get('alive') else ', not running'})")
    hosts = ", ".join(f"{n} {h.get('address')} {where(n, h)}" for n, h in info.get("hosts", {}).items())
    return [info["run_id"], "yes" if info["owner_alive"] else "no", str(info.get("topology") or "—"), hosts or "—"]


@testbed_group.command("up")
@click.option("--config", type=click.Path(dir_okay=False), default=None,
              help="A testbed spec as JSON or TOML (keys of TestbedSpec, docs/testbed.md); flags override it.")
@click.option("--left", type=click.IntRange(1, 200), default=None, help="Hosts on the left side [default: 1].")
@click.option("--right", type=click.IntRange(1, 200), default=None, help="Hosts on the right side [default: 1].")
@click.option("--delay-s", type=FiniteFloatRange(0, 60), default=None, help="One-way delay in seconds, each direction.")
@click.option("--jitter-s", type=FiniteFloatRange(0, 60), default=None, help="Delay variation in seconds, each direction.")
@click.option("--loss", type=PROBABILITY, default=None, help="Bernoulli loss probability, each direction.")
@click.option("--rate-bps", type=FiniteFloatRange(1, 1e12), default=None, help="Bottleneck rate in bit/s, each direction.")
@click.option("--queue-packets", type=click.IntRange(1, 10**8), default=None, help="Drop-tail queue limit in packets.")
@click.option("--queue-bytes", type=click.IntRange(1, 10**11), default=None, help="Drop-tail queue limit in bytes.")
@click.option("--queue-discipline", type=click.Choice(["drop_tail", "codel", "fq_codel", "pie"]), default=None,
              help="The bottleneck's queue discipline, each direction (RFC defaults; docs/emulator.md) [default: drop_tail].")
@click.option("--ecn", is_flag=True, default=False,
              help="The queue discipline marks ECN-capable packets CE instead of dropping them; every host sets tcp_ecn = 1.")
@click.option("--tcp-preset", type=click.Choice(sorted(PRESETS)), default=None, help="TCP settings of every host.")
@click.option("--congestion-control", default=None,
              help="Congestion control of every host (reno, cubic, bbr, vegas, westwood+, compound, ...: `tcpdelay cc list`).")
@click.option("--cc", "cc", default=None, metavar="NAME[,NAME]",
              help="Congestion controls to keep loaded while the testbed is up, for any program in its namespaces (TCP_CONGESTION).")
@click.option("--initcwnd", type=click.IntRange(1, 1000), default=None, help="Initial window in segments.")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=None, help="Seed of the emulator's randomness.")
@click.option("--host-kernel", default=None, metavar="KERNEL",
              help="Run the hosts of --host-kernel-side as QEMU guests booting this reference kernel (debian-6.1; docs/testbed.md).")
@click.option("--host-kernel-side", type=click.Choice(["left", "right", "both"]), default="left", show_default=True,
              help="Which side's hosts are guests (with --host-kernel).")
@click.option("--host-kernel-accel", type=click.Choice(["tcg", "kvm"]), default="tcg", show_default=True,
              help="QEMU's accelerator for the guests (kvm fails on some VMs).")
@json_option
def up_cmd(config, left, right, delay_s, jitter_s, loss, rate_bps, queue_packets, queue_bytes,
           queue_discipline, ecn, tcp_preset, congestion_control, cc, initcwnd, seed, host_kernel, host_kernel_side,
           host_kernel_accel, as_json):
    """Build a testbed and keep it up (until `tcpdelay testbed down RUN_ID`)."""
    nsutil.require_testbed_environment()
    data = build_spec_data(config, left, right, delay_s, jitter_s, loss, rate_bps, queue_packets,
                           queue_bytes, tcp_preset, congestion_control, initcwnd, seed, cc,
                           queue_discipline=queue_discipline, ecn=ecn)
    spec = parse_spec(data)
    from tcpdelay.testbed.emulator import find_binary

    find_binary()
    request = spec.model_dump(mode="json")
    if host_kernel is not None:
        from tcpdelay.testbed.guest import guest_request

        request["guests"] = guest_request(host_kernel, host_kernel_side, host_kernel_accel)
    proc = subprocess.Popen([sys.executable, "-m", "tcpdelay.testbed.supervisor"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, text=True)
    proc.stdin.write(json.dumps(request))
    proc.stdin.close()
    line = proc.stdout.readline()
    proc.stdout.close()
    try:
        reply = json.loads(line)
    except json.JSONDecodeError:
        proc.wait(5)
        raise TestbedError(f"the testbed supervisor died without a reply (exit {proc.returncode})") from None
    if not reply.get("ok"):
        proc.wait(5)
        raise TestbedError(reply.get("error") or "the testbed could not be built")
    tb = reply["testbed"]
    tb["supervisor_pid"] = proc.pid

    def human(console):
        console.print(f"testbed [bold]{tb['run_id']}[/bold] is up ({tb['topology']}, {tb['subnet']})")
        guests = tb.get("guests", {})
        for name, h in tb["hosts"].items():
            g = guests.get(name)   # a guest's TCP is its kernel's (the namespace's said bbr, the guest cubic)
            tcp = (g or h)["tcp"]
            console.print(f"  {name:8s} {h['address']:13s} cc={tcp.get('congestion_control')} "
                          f"initcwnd={tcp.get('initcwnd_segments') or 'kernel'}  "
                          + ("a QEMU guest (below)" if g else f"ip netns exec {h['netns']} ..."))
        a, b = spec.link.a_to_b, spec.link.b_to_a
        for label, d in (("left->right", a), ("right->left", b)):
            console.print(f"  {label}: delay {fmt_s(d.delay_s)}, rate "
                          f"{fmt_bps(d.rate_bps) if d.rate_bps else 'unlimited'}, loss {d.loss.model}, "
                          f"queue {d.aqm.discipline if d.aqm else 'drop_tail'}{' with ECN' if getattr(d.aqm, 'ecn', False) else ''}")
        for c in tb.get("congestion_controls", []):
            console.print(f"  congestion control {c['choice']}: TCP_CONGESTION {c['kernel_name']!r} ({c['source']})")
        for name, g in tb.get("guests", {}).items():
            console.print(f"  {name} is a QEMU guest: Linux {g['release']} ({g['accelerator']}, booted in "
                          f"{g['boot_s']:.1f} s, cc={g['tcp'].get('congestion_control')}); "
                          f"tcpdelay testbed exec {name} -- CMD")
        console.print(f"stop it with: tcpdelay testbed down {tb['run_id']}")

    emit(tb, as_json, human)


def counters_text(x: dict) -> str:
    """One direction's emulator counters in words: packets in and out, the drops (the total, then
    each reason that dropped any) and the CE marks (they printed as a Python dict, without them)."""
    drops = x.get("drops") or {}
    why = ", ".join(f"{k} {v}" for k, v in drops.items() if k != "total" and v)
    return (f"{x.get('packets_in')} packets in, {x.get('packets_out')} out, {drops.get('total', 0)} dropped"
            + (f" ({why})" if why else "") + f", {x.get('ce_marks', 0)} CE-marked")


def _counters_of(info: dict) -> dict | None:
    """Counters of a live run's emulator (SIGUSR1, then read its counters file)."""
    pid = (info.get("state") or {}).get("emulator_pid")
    if not pid or not nsutil.process_alive(pid):
        return None
    path = os.path.join(runs.state_dir(info["run_id"]), "counters.json")

    def content():
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError:
            return None

    before = content()
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        now = content()
        if now and now != before:
            try:
                return json.loads(now)
            except json.JSONDecodeError:
                pass
        time.sleep(0.01)
    return None


@testbed_group.command("status")
@click.argument("run_ids", nargs=-1)
@json_option
def status_cmd(run_ids, as_json):
    """List testbed runs on this machine (with the emulator's counters for live ones)."""
    nsutil.require_testbed_environment()      # first: one line without root, before any import
    from tcpdelay.testbed.guest import read_guests

    found = runs.find_runs()
    unknown = [r for r in run_ids if r not in found]
    if unknown:
        raise ParameterError(f"no testbed run {', '.join(unknown)}; runs here: {', '.join(found) or 'none'}")
    out = []
    for rid, info in found.items():
        if run_ids and rid not in run_ids:
            continue
        s = info.summary()
        s["guests"] = {n: {"release": g.get("release"), "accelerator": g.get("accelerator"),
                           "address": g.get("address"), "qemu_pid": g.get("qemu_pid"),
                           "congestion_control": (g.get("tcp") or {}).get("congestion_control"),
                           "alive": bool(g.get("qemu_pid")) and nsutil.process_alive(g["qemu_pid"])}
                       for n, g in read_guests(runs.state_dir(rid)).items()}
        s["counters"] = _counters_of({"run_id": rid, "state": info.state}) if info.alive else None
        out.append(s)
    res = {"runs": out}

    def human(console):
        from rich.table import Table

        from tcpdelay.cli.text_layout import print_wrapped

        if not out:
            console.print("no testbed runs")
            return
        t = Table(title="Testbed runs", title_justify="left")
        for col in ("run", "owner alive", "topology", "hosts"):
            t.add_column(col)
        for s in out:
            t.add_row(*_run_rows(s))
        console.print(t)
        for s in out:
            c = s.get("counters")
            if c:
                for d in ("a_to_b", "b_to_a"):
                    print_wrapped(console, f"{s['run_id']} {d}: {counters_text(c.get(d) or {})}")

    emit(res, as_json, human)


@testbed_group.command("down")
@click.argument("run_ids", nargs=-1)
@click.option("--all", "all_runs", is_flag=True, help="Every run on this machine.")
@json_option
def down_cmd(run_ids, all_runs, as_json):
    """Stop testbed runs: their owner tears them down; whatever is left is removed."""
    nsutil.require_testbed_environment()
    found = runs.find_runs()
    if not run_ids and not all_runs:
        raise ParameterError(f"give RUN_IDs or --all; runs here: {', '.join(found) or 'none'}")
    unknown = [r for r in run_ids if r not in found]
    if unknown:
        raise ParameterError(f"no testbed run {', '.join(unknown)}; runs here: {', '.join(found) or 'none'}")
    targets = list(found) if all_runs else list(run_ids)
    removed = []
    for rid in targets:
        info = found[rid]
        if info.alive:
            pid = int(info.state["owner_pid"])
            os.kill(pid, signal.SIGTERM)
            runs.wait_gone(pid, 15.0)
        removed.append(runs.remove_run(rid))
    res = {"removed": removed}
    emit(res, as_json, lambda console: console.print(
        "\n".join(f"run {r['run_id']} is down" for r in removed) or "nothing to stop"))


@testbed_group.command("clean")
@click.option("--all", "all_runs", is_flag=True, help="Also runs whose owner is still alive.")
@json_option
def clean_cmd(all_runs, as_json):
    """Remove what killed testbed runs left behind: processes, namespaces, links, state files."""
    nsutil.require_testbed_environment()
    res = runs.clean(include_live=all_runs)

    def human(console):
        for r in res["removed"]:
            console.print(f"removed run {r['run_id']}: {r['namespaces']} namespaces, "
                          f"{r['processes']} processes, {r['links']} links")
        if res["kept_live"]:
            console.print(f"kept live runs (owner alive; use --all or `down`): {', '.join(res['kept_live'])}")
        for name in res.get("congestion_controls", []):
            console.print(f"unregistered congestion control {name} (held by nothing)")
        if not res["removed"] and not res["kept_live"] and not res.get("congestion_controls"):
            console.print("nothing to clean")

    emit(res, as_json, human)


@testbed_group.command("exec", context_settings={"ignore_unknown_options": True})
@click.argument("host")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--run", "run_id", default=None, help="The run whose host it is (needed when several runs have HOST).")
@click.option("--timeout-s", type=FiniteFloatRange(0.1, 86400), default=600.0, show_default=True,
              help="Give up on a guest's command after this long.")
@json_option
def exec_cmd(host, command, run_id, timeout_s, as_json):
    """Run COMMAND on HOST of a live testbed (a namespace: ip netns exec; a reference-kernel
    guest: its command server); exits with COMMAND's status. Put `--` before COMMAND."""
    import shlex

    from tcpdelay.testbed.guest import guest_exec, read_guests

    nsutil.require_testbed_environment()
    found = {rid: info for rid, info in runs.find_runs().items() if info.alive and (run_id is None or rid == run_id)}
    if run_id is not None and not found:
        raise ParameterError(f"no live testbed run {run_id}; runs here: {', '.join(runs.find_runs()) or 'none'}")
    having = {rid: info for rid, info in found.items() if host in (info.state or {}).get("hosts", {})}
    if not having:
        hosts = sorted({h for info in found.values() for h in (info.state or {}).get("hosts", {})})
        raise ParameterError(f"no live testbed has host {host!r}; hosts: {', '.join(hosts) or 'none'}")
    if len(having) > 1:
        raise ParameterError(f"host {host!r} is in runs {', '.join(having)}; choose one with --run")
    rid, info = next(iter(having.items()))
    h = info.state["hosts"][host]
    guest = read_guests(runs.state_dir(rid)).get(host)
    if guest is not None:
        res = guest_exec(guest["netns"], guest["address"], shlex.join(command), timeout_s)
        kind, rc, out, err = "guest", res.returncode, res.stdout, res.stderr
    elif as_json:
        proc = subprocess.run(["ip", "netns", "exec", h["netns"], *command], capture_output=True, text=True)
        kind, rc, out, err = "netns", proc.returncode, proc.stdout, proc.stderr
    else:  # the command's own terminal streams
        sys.exit(subprocess.run(["ip", "netns", "exec", h["netns"], *command]).returncode)
    if as_json:
        emit({"run_id": rid, "host": host, "kind": kind, "command": list(command), "returncode": rc,
              "stdout": out, "stderr": err}, True, lambda console: None)
    else:
        sys.stdout.write(out)
        sys.stderr.write(err)
    sys.exit(rc)


COMMANDS = [testbed_group]
