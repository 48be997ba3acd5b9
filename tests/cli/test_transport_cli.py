"""`tcpdelay send` / `tcpdelay recv` as a user runs them: two processes, --json, bad input."""

import json
import socket
import subprocess
import sys

import pytest

from tcpdelay.records import read_records

TCPDELAY = [sys.executable, "-m", "tcpdelay"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("extra", [["--transport", "udp"],
                                   ["--connections", "2", "--scheduler", "intelligent", "--split", "2"]])
def test_send_and_recv_commands_make_a_run(tmp_path, extra):
    port = _free_port()
    rx = subprocess.Popen([*TCPDELAY, "recv", "--listen", f"127.0.0.1:{port}", "--out",
                           str(tmp_path / "rx"), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "listening on" in rx.stderr.readline()
        tx = subprocess.run([*TCPDELAY, "send", "--to", f"127.0.0.1:{port}", "--profile", "voip",
                             "--duration-s", "0.5", "--out", str(tmp_path / "tx"), "--json", *extra],
                            capture_output=True, text=True, timeout=60)
        out, err = rx.communicate(timeout=30)
    finally:
        rx.kill()
    assert tx.returncode == 0, tx.stderr
    assert rx.returncode == 0, err
    sent = json.loads(tx.stdout)
    got = json.loads(out)
    assert sent["status"] == "completed" and sent["packets"] == 25
    (run,) = got["runs"]
    assert run["status"] == "completed" and run["received_packets"] == 25
    assert run["delay"]["delay_reference"] == "one-way" and 0 < run["delay"]["delay_p50_s"] < 0.05
    assert read_records(tmp_path / "tx", "sent").num_rows == 25
    assert read_records(tmp_path / "rx", "received").num_rows == 25


@pytest.mark.parametrize("args, match", [
    (["send", "--to", "nohostport"], "HOST:PORT"),
    (["send", "--to", "127.0.0.1:1", "--transport", "udp", "--connections", "2"], "parallel connections need"),
    (["send", "--to", "127.0.0.1:1", "--split", "0"], "split"),
    (["send", "--to", "127.0.0.1:1", "--profile", "voip", "--mpeg4-rate-bps", "1e6",
      "--video-trace", __file__], "choose one"),
    (["send", "--to", "no-such-host.invalid:9", "--connect-timeout-s", "5"], "cannot resolve"),
    (["recv", "--listen", "127.0.0.1"], "HOST:PORT"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, match):
    proc = subprocess.run([*TCPDELAY, *args, "--out", str(tmp_path / "o")], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and match in lines[0] and "Traceback" not in proc.stderr


def test_a_receiver_that_never_answers_is_exit_1_not_bad_input(tmp_path):
    """Good input, no receiver: nothing listening (refused), and a listener that accepts the
    connection and never answers the hello. Both are a failed run (1), not bad input (2)."""
    with socket.socket() as silent, socket.socket() as closed:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)                       # the kernel completes the handshake; no one reads
        closed.bind(("127.0.0.1", 0))          # bound, not listening: connection refused
        for port, match in ((silent.getsockname()[1], "did not accept the run"),
                            (closed.getsockname()[1], "cannot reach")):
            proc = subprocess.run([*TCPDELAY, "send", "--to", f"127.0.0.1:{port}", "--duration-s", "0.1",
                                   "--connect-timeout-s", "0.3", "--out", str(tmp_path / str(port))],
                                  capture_output=True, text=True, timeout=60)
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode == 1, proc.stderr
            assert len(lines) == 1 and lines[0].startswith("tcpdelay send: ") and match in lines[0], lines
            assert "Traceback" not in proc.stderr


def test_delay_summary_is_relative_to_the_minimum_without_a_shared_clock(tmp_path):
    from tcpdelay.cli.media import delay_summary
    from tcpdelay.records import RecordWriter
    from tcpdelay.transport import clock

    with RecordWriter(tmp_path, "received") as w:
        for seq, d in enumerate([1000.25, 1000.30, 1000.45]):   # clocks 1000 s apart
            w.append(flow_id=0, connection=0, seq=seq, size_bytes=172, send_time_s=seq * 0.02,
                     recv_time_s=seq * 0.02 + d)
    rel = delay_summary(tmp_path, clock.UNSYNCHRONIZED)
    assert rel["delay_reference"] == "relative-to-minimum"
    assert rel["delay_min_s"] == 0 and abs(rel["delay_max_s"] - 0.20) < 1e-9
    assert abs(rel["delay_p50_s"] - 0.05) < 1e-9
    one_way = delay_summary(tmp_path, clock.SHARED)
    assert one_way["delay_reference"] == "one-way" and abs(one_way["delay_min_s"] - 1000.25) < 1e-9


def test_clock_is_shared_only_with_the_same_kernel():
    from tcpdelay.transport import clock

    assert clock.clock_for_peer(clock.boot_id()) == clock.SHARED
    assert clock.clock_for_peer("00000000-0000-0000-0000-000000000000") == clock.UNSYNCHRONIZED
    assert clock.clock_for_peer("") == clock.UNSYNCHRONIZED


def test_signals_end_both_commands_cleanly_and_keep_the_records(tmp_path):
    """SIGTERM to the sender, then SIGINT to the receiver: each prints its result with status
    interrupted / sender-disconnected, exits 1, and keeps what it recorded."""
    import signal
    import time

    port = _free_port()
    rx = subprocess.Popen([*TCPDELAY, "recv", "--listen", f"127.0.0.1:{port}", "--out", str(tmp_path / "rx"),
                           "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "listening on" in rx.stderr.readline()
    tx = subprocess.Popen([*TCPDELAY, "send", "--to", f"127.0.0.1:{port}", "--duration-s", "30",
                           "--out", str(tmp_path / "tx"), "--json"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not list((tmp_path / "tx").glob("run.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        tx.send_signal(signal.SIGTERM)
        tx_out, _ = tx.communicate(timeout=20)
        rx_out, _ = rx.communicate(timeout=20)     # the sender's departure ends the run
    finally:
        tx.kill()
        rx.kill()
    assert tx.returncode == 1 and rx.returncode == 1
    sent = json.loads(tx_out)
    (run,) = json.loads(rx_out)["runs"]
    assert sent["status"] == "interrupted" and sent["packets"] >= 20
    assert run["status"] == "sender-disconnected"
    assert read_records(tmp_path / "tx", "sent").num_rows == sent["packets"]
    assert read_records(tmp_path / "rx", "received").num_rows == run["received_packets"] >= 20


def test_sigint_ends_a_waiting_receiver(tmp_path):
    import signal

    port = _free_port()
    rx = subprocess.Popen([*TCPDELAY, "recv", "--listen", f"127.0.0.1:{port}", "--out", str(tmp_path / "rx"),
                           "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "listening on" in rx.stderr.readline()     # imports done, socket bound
        rx.send_signal(signal.SIGINT)
        out, err = rx.communicate(timeout=20)
    finally:
        rx.kill()
    assert json.loads(out)["runs"] == [] and rx.returncode == 1, err
