"""Issue 54, item 6: ``playout --plot`` drew its "L+RTT+3/f" label over the title (a text at
y = 0.5 on a late-fraction axis that ends below it), and ``region --plot`` drew the ✗ (unstable)
of every RTT at one height, so that at a loss rate where several are unstable they stood on each
other. The figures are checked as drawn (renderer extents, marker positions)."""

from __future__ import annotations

import pytest

from tcpdelay.report import delay_plots


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions draw, kept (and written as usual)."""
    figs = []
    save = delay_plots._save

    def keep(fig, path):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        out = save(fig, path)            # laid out as written
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        figs.append((fig, canvas.get_renderer()))
        return out
    monkeypatch.setattr(delay_plots, "_save", keep)
    return figs


def test_the_playout_label_stays_off_the_title(drawn, tmp_path):
    from tcpdelay.model.delay import playout_advice

    advice = playout_advice(profile="voip", rtt_s=0.1, loss=0.02)
    delay_plots.plot_late_fraction(advice, tmp_path / "p.png")
    ((fig, renderer),) = drawn
    ax = fig.axes[0]
    title = ax.title.get_window_extent(renderer)
    texts = [t for t in ax.texts + ([ax.get_legend()] if ax.get_legend() else []) if t.get_visible()]
    assert texts and not any(t.get_window_extent(renderer).overlaps(title) for t in texts)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [f"L+RTT+3/f = {advice['recommended_playout_s'] * 1e3:.0f} ms"]
    assert all(t.get_window_extent(renderer).y1 <= ax.get_window_extent(renderer).y1 for t in ax.texts)


def test_the_unstable_marks_of_different_rtts_stand_apart(drawn, tmp_path):
    from tcpdelay.model.delay.region import working_region

    region = working_region(profile="video", rtts_s=[0.02, 0.1, 0.3], losses=[0.01, 0.05, 0.1], workers=1)
    delay_plots.plot_region(region, tmp_path / "r.png")
    ((fig, _),) = drawn
    marks = [line for line in fig.axes[0].get_lines() if line.get_marker() == "x"]
    at = {}
    for line in marks:
        for x, y in zip(line.get_xdata(), line.get_ydata()):
            at.setdefault(x, []).append(y)
    assert max(len(ys) for ys in at.values()) >= 2            # a loss rate where several RTTs are unstable
    for ys in at.values():
        assert len(set(ys)) == len(ys)                         # one height per RTT
        assert min(ys) > region["bound_s"]
