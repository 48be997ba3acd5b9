"""Issue 54, item 6: ``tcpdelay evaluate``'s "Model vs a short measurement" table was wider than
a 1280-pixel screen: 17 columns, the first (12 rem wide, as every report table's first column)
holding "voip" on every row. The profile and the RTT, the same at every point and given in the
paragraph above, are no longer columns."""

from __future__ import annotations

import re
from html import unescape

from tcpdelay.experiments import measured_check as mc
from tcpdelay.report.evaluation_page import measured_check_section
from tcpdelay.report.html import Report

#: What the page's CSS gives a table (report/html.py): 0.85 rem text (13.6 px; a character of
#: it at most 8 px), cells padded 0.45 rem a side and bordered, a first column at least 12 rem.
CHAR_PX, CELL_PX, FIRST_MIN_PX = 8.0, 2 * 0.45 * 16 + 1, 12 * 16


def _point(stack: str, loss: float) -> dict:
    return {"profile": "voip", "stack": stack, "rtt_s": mc.RTT_S, "loss": loss, "runs": 1,
            "measured": {"mean_s": 0.0612, "p95_s": 0.1441, "std_s": 0.0308, "rtos_per_drop": 0.12,
                         "emulator_lateness_p99_us": 80.0},
            "model": {"mean_s": 0.0598, "p95_s": 0.1402, "std_s": 0.0291, "unstable": False,
                      "throughput_ratio": 11.28, "timeout_probability": 0.01},
            "relative_error": {"mean_s": -0.023, "tcp_level_mean_s": -0.11, "p95_s": -0.027, "std_s": -0.055},
            "model_at_realized_loss": {"loss": loss * 0.93, "unstable": False, "relative_error_mean": -0.04}}


def _table_px(html: str) -> float:
    """The least width the table can take: each column as wide as its longest word of header
    (headers wrap at spaces) or its longest cell (numbers do not wrap)."""
    table = html[html.index("Model vs a short measurement"):]
    table = table[table.index("<table>"):table.index("</table>")]
    head = [unescape(h) for h in re.findall(r"<th>(.*?)</th>", table)]
    rows = [[unescape(c) for c in re.findall(r"<td>(.*?)</td>", r)] for r in re.findall(r"<tr>(.*?)</tr>", table)]
    rows = [r for r in rows if r]
    widths = []
    for i, h in enumerate(head):
        chars = max([len(w) for w in h.split()] + [len(r[i]) for r in rows])
        widths.append(max(chars * CHAR_PX, FIRST_MIN_PX if i == 0 else 0) + CELL_PX)
    return sum(widths)


def test_the_measured_check_fits_a_1280_pixel_screen():
    data = {"_why": None, "duration_s": 20.0, "wall_s": 75.0, "failed": [],
            "points": [_point(s, x) for s, losses in mc.POINTS for x in losses]}
    report = Report("evaluate")
    measured_check_section(report, data)
    html = report.render()
    assert _table_px(html) <= 1280 - 2 * 16        # the page's margin of 1 rem a side
    head = re.findall(r"<th>(.*?)</th>", html[html.index("Model vs a short measurement"):])
    assert head[0] == "stack" and "profile" not in head and "RTT ms" not in head
    assert "VoIP (64 kb/s" in html and f"RTT {mc.RTT_S * 1e3:g} ms" in html
