"""A real HTTP server in a testbed host: Debian's nginx, started and stopped by the run, serving
one directory (papers/003 served its video from "a standard HTTP server").

Its configuration is written for the run into a work directory (nothing of the system's is read
or touched): one master and one worker process, both root like every process the testbed runs
(so the worker reads the run's files wherever they are: a pytest or cache directory under a
0700 parent would be out of ``nobody``'s reach), HTTP/1.1 with ``sendfile`` (the file's pages
go from the page cache to the socket without a copy through user space) and ``tcp_nopush`` (full
segments), ``listen ADDR:PORT`` with the socket's send buffer when given (else the kernel's
autotuning up to the host's ``tcp_wmem`` maximum), an access log of each request's time, bytes
and status. Its TCP variant is the host's: the testbed sets the congestion control of every
connection of the host's namespace (``congctl`` on its routes, docs/congestion-control.md), and
:func:`tcpdelay.transport.borrowed_socket.borrow_connections` reads it back from nginx's socket.

The processes live in the host's namespace: the testbed kills whatever is left in it when it
closes, even after the orchestrator died.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tcpdelay.errors import ParameterError
from tcpdelay.errors import TestbedError

ACCESS_LOG = "access.log"
ERROR_LOG = "error.log"
#: nginx's ``worker_processes``: the connections are the worker's.
WORKER_PROCESSES = 1


def nginx_binary() -> str:
    path = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if path is None:
        raise TestbedError("nginx is not installed (Debian/Ubuntu: apt-get install nginx)")
    return path


def config_text(work_dir: Path, root_dir: Path, address: str, port: int, sndbuf_bytes: int | None) -> str:
    """nginx.conf for one server (see the module doc)."""
    sndbuf = f" sndbuf={int(sndbuf_bytes)}" if sndbuf_bytes else ""
    tmp = work_dir / "tmp"
    return f"""daemon off;
master_process on;
worker_processes {WORKER_PROCESSES};
user root root;
pid {work_dir}/nginx.pid;
error_log {work_dir}/{ERROR_LOG} warn;
events {{ worker_connections 256; }}
http {{
    log_format tcpdelay '$remote_addr:$remote_port $msec $request_time $bytes_sent $status "$request"';
    access_log {work_dir}/{ACCESS_LOG} tcpdelay;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 60s;
    types {{ video/mp4 mp4; text/plain txt; }}
    default_type application/octet-stream;
    server {{
        listen {address}:{port}{sndbuf};
        root {root_dir};
        location / {{ }}
    }}
}}
"""


def nginx_pids(master_pid: int) -> list[int]:
    """``master_pid`` and its children's pids (its workers, as they are now), sorted."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(d) == master_pid or int(fields[1]) == master_pid:
                out.append(int(d))
    return sorted(out)


class NginxServer:
    """nginx serving ``root_dir`` on the host's address and ``port`` (context manager)."""

    def __init__(self, host, root_dir: str | os.PathLike, port: int, work_dir: str | os.PathLike, *,
                 sndbuf_bytes: int | None = None, start_timeout_s: float = 10.0):
        if not 1 <= int(port) <= 65535:
            raise ParameterError(f"port: {port!r} must be in 1..65535")
        self.root_dir = Path(root_dir).absolute()
        if not self.root_dir.is_dir():
            raise ParameterError(f"root_dir: {str(self.root_dir)!r} is not a directory")
        self.host, self.port, self.sndbuf_bytes = host, int(port), sndbuf_bytes
        self.work_dir = Path(work_dir).absolute()
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host.address}:{self.port}"

    def start(self) -> "NginxServer":
        binary = nginx_binary()
        (self.work_dir / "tmp").mkdir(parents=True, exist_ok=True)
        conf = self.work_dir / "nginx.conf"
        conf.write_text(config_text(self.work_dir, self.root_dir, self.host.address, self.port, self.sndbuf_bytes))
        self.proc = self.host.popen([binary, "-c", str(conf), "-p", str(self.work_dir), "-e",
                                     str(self.work_dir / ERROR_LOG)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise TestbedError(f"nginx exited with status {self.proc.returncode}: {self._error_tail()}")
            s = self.host.socket()
            try:
                s.settimeout(0.5)
                s.connect((self.host.address, self.port))
                # the master listens (and the kernel accepts) before it has forked its worker, and
                # the worker holds the connections a sampler borrows: started means both are there
                if len(self.pids()) == 1 + WORKER_PROCESSES:
                    return self
            except OSError:
                pass
            finally:
                s.close()
            if time.monotonic() > deadline:
                self.stop()
                raise TestbedError(f"nginx did not accept connections on {self.url} with its worker started in "
                                   f"{self.start_timeout_s:g} s: {self._error_tail()}")
            time.sleep(0.05)

    def pids(self) -> list[int]:
        """The master's and its workers' pids (after :meth:`start`: all of them)."""
        return [] if self.proc is None else nginx_pids(self.proc.pid)

    def _error_tail(self) -> str:
        try:
            lines = (self.work_dir / ERROR_LOG).read_text().strip().splitlines()
        except OSError:
            lines = []
        if not lines and self.proc is not None and self.proc.stderr is not None and self.proc.poll() is not None:
            lines = self.proc.stderr.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no message"

    def stop(self, grace_s: float = 3.0) -> dict:
        """Stop (SIGQUIT: finish what is in flight, then SIGKILL after ``grace_s``); returns what it
        served (:meth:`served`)."""
        if self.proc is not None and self.proc.poll() is None:
            workers = [p for p in self.pids() if p != self.proc.pid]
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            for pid in workers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        return self.served()

    def served(self) -> dict:
        """Requests from the access log: each one's client, time (s), bytes sent and status."""
        out = []
        try:
            text = (self.work_dir / ACCESS_LOG).read_text()
        except OSError:
            text = ""
        for line in text.splitlines():
            cols = line.split(" ", 5)
            if len(cols) >= 5 and cols[3].isdigit():
                out.append({"client": cols[0], "end_unix_s": float(cols[1]), "request_time_s": float(cols[2]),
                            "bytes_sent": int(cols[3]), "status": int(cols[4]),
                            "request": cols[5].strip('"') if len(cols) > 5 else ""})
        return {"requests": out, "bytes_sent": sum(r["bytes_sent"] for r in out)}

    def __enter__(self) -> "NginxServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
