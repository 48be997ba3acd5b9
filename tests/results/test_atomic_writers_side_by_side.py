"""Two writers of one result file at once (two test workers filling the same gitignored cache, a
rerun beside a report): each writes its own temporary file, so neither fails and the file that
stays is one of theirs, whole."""

from __future__ import annotations

import threading
import time

from tcpdelay.atomic_file import temporary_name, write_atomic


def test_two_writers_of_one_file_at_once_both_succeed_and_leave_one_whole_file(tmp_path):
    path = tmp_path / "delays.parquet"
    both_writing = threading.Barrier(2)
    errors: list[BaseException] = []

    def writer(payload: bytes) -> None:
        def write(tmp):
            with open(tmp, "wb") as fh:
                fh.write(payload[:10])
                both_writing.wait(timeout=10)     # both temporary files exist and are half-written
                time.sleep(0.05)
                fh.write(payload[10:])
        try:
            write_atomic(path, write)
        except BaseException as err:  # noqa: BLE001 - collected and asserted below
            errors.append(err)

    payloads = [bytes([1]) * 1000, bytes([2]) * 1000]
    threads = [threading.Thread(target=writer, args=(p,)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert path.read_bytes() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["delays.parquet"]     # no temporary file left


def test_the_temporary_name_is_hidden_beside_the_file_and_the_writers_own(tmp_path):
    name = temporary_name(tmp_path / "run.json")
    assert name.parent == tmp_path and name.name.startswith(".run.json.") and name.suffix == ".tmp"
    other: list = []
    t = threading.Thread(target=lambda: other.append(temporary_name(tmp_path / "run.json")))
    t.start()
    t.join()
    assert other[0] != name
