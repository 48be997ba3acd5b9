"""The scenario's ``metrics`` key chooses what ``tcpdelay report`` shows (tables and figures);
the JSON keeps every metric."""

import json
import re
from pathlib import Path

from tcpdelay.experiments.scenario import DEFAULT_METRICS, METRICS
from tcpdelay.report.shown_metrics import shown_metrics

ROOT = Path(__file__).resolve().parents[2]


def _results(make_run, tmp_path, metrics_line: str | None):
    """A `tcpdelay run` directory of two repetitions, with a scenario.toml carrying ``metrics_line``."""
    out = tmp_path / "run"
    make_run(out / "seed-1", [0.05] * 100)
    make_run(out / "seed-2", [0.05] * 90 + [0.25] * 10, lost={0})
    lines = ['name = "by-hand"', "duration_s = 2.0", *([metrics_line] if metrics_line else []),
             "[[flows]]", 'profile = "voip"']
    (out / "scenario.toml").write_text("\n".join(lines) + "\n")
    return out


def _report(cli_exit, tmp_path, results, capsys):
    html = tmp_path / "report.html"
    assert cli_exit(["report", str(results), "--out", str(html), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    text = html.read_text()
    headers = re.findall(r"<th>([^<]*)</th>", text)
    return doc, text, headers


def test_listed_metrics_only(tmp_path, capsys, make_run, cli_exit):
    doc, html, headers = _report(cli_exit, tmp_path, _results(make_run, tmp_path, 'metrics = ["loss", "delay"]'), capsys)
    assert doc["metrics"] == ["delay", "loss"]
    assert "loss %" in headers and "mean ms" in headers and "p99 ms" in headers
    for gone in ("late % @100 ms", "MOS", "acceptable %", "RTPI", "goodput kb/s", "TCP retrans", "Jain",
                 "jitter ms", "discards %"):
        assert gone not in headers, gone
    # one delay CDF and the per-cell bars of the loss, no late-fraction or quality figure
    assert doc["figures"] == 2 and html.count("data:image/png;base64,") == 2
    assert [p["title"] for p in doc["plots"]] == ["Delay CDF, flow voip", "Media flows per cell"]
    assert "Delay CDF" in html and "Late fraction of flow" not in html and "Quality level over time" not in html
    # the JSON keeps every metric
    flow = doc["cells"][0]["flows"][0]
    assert flow["mos"] is not None and flow["late"]["late_fraction"] is not None


def test_metrics_without_a_column_before(tmp_path, capsys, make_run, cli_exit):
    doc, html, headers = _report(cli_exit, tmp_path, _results(make_run, tmp_path, 'metrics = ["jitter", "mos", "quality"]'), capsys)
    assert doc["metrics"] == ["jitter", "quality", "mos"]
    assert {"jitter ms", "MOS", "acceptable %"} <= set(headers)
    assert "mean ms" not in headers and "loss %" not in headers
    # the RFC 3550 jitter of the repetitions: 0 for the constant run, > 0 for the mixed one
    assert doc["cells"][0]["flows"][0]["jitter_rfc3550_s"] > 0
    assert doc["figures"] == 2 and "Quality level over time" in html
    assert [p["title"] for p in doc["plots"]] == ["Quality level, flow voip", "Media flows per cell"]


def test_default_metrics_when_the_key_is_absent(tmp_path, capsys, make_run, cli_exit):
    doc, _, headers = _report(cli_exit, tmp_path, _results(make_run, tmp_path, None), capsys)
    assert doc["metrics"] == list(DEFAULT_METRICS)
    assert "late % @100 ms" in headers and "MOS" not in headers


def test_bad_metrics_in_results_is_one_line(tmp_path, capsys, make_run, cli_exit):
    results = _results(make_run, tmp_path, 'metrics = ["delay", "colour"]')
    assert cli_exit(["report", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "metrics" in err and "colour" in err


def test_every_committed_results_directory_names_known_metrics():
    scenarios = sorted(ROOT.glob("results/*/scenario.toml"))
    assert scenarios
    for sc in scenarios:
        shown = shown_metrics(sc.parent)
        assert shown and set(shown) <= set(METRICS), sc
