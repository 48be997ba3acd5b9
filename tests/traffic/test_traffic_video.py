"""Video sources: the frame-size trace parser and the MPEG-4 TES model."""

import gzip

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tcpdelay.errors import ParameterError
from tcpdelay.traffic import Mpeg4TesSource, VideoTraceSource, parse_trace
from tcpdelay.traffic.mpeg4_tes import TesFrameModel, gop_pattern, stitch, tes_background
from tcpdelay.traffic.source import split_frame
from tcpdelay.traffic.video_file import PAPER_TRACE
from tcpdelay.traffic.video_trace import parse_trace_lines, write_trace


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("IPB"), st.integers(0, 10**7)), min_size=1, max_size=50))
def test_trace_round_trip(tmp_path_factory, frames):
    path = tmp_path_factory.mktemp("t") / "trace.txt"
    types, sizes = zip(*frames)
    write_trace(path, types, sizes)
    t2, s2 = parse_trace(path)
    assert list(t2) == list(types) and list(s2) == list(sizes)


def test_trace_layouts_and_comments():
    lines = ["# a comment", "", "I 1000", "1 p 200  # trailing", "2, B, 80, 1, 0.066",
             "3\tI\t4000"]
    types, sizes = parse_trace_lines(lines)
    assert list(types) == ["I", "P", "B", "I"] and list(sizes) == [1000, 200, 80, 4000]
    # explicit columns and sizes in bits: 8001 bits -> 1001 bytes (rounded up)
    t, s = parse_trace_lines(["0 40.0 I 8001"], type_column=2, size_column=3, size_unit="bits")
    assert list(t) == ["I"] and list(s) == [1001]


@pytest.mark.parametrize("line, message", [
    ("X 100", "no frame type"),
    ("I", "found 1 column"),
    ("I -5", "not a non-negative integer"),
    ("I 12.5", "not a non-negative integer"),
])
def test_bad_trace_lines_name_the_line(line, message):
    with pytest.raises(ParameterError, match=rf"line 2: .*{message}|line 2: {message}"):
        parse_trace_lines(["I 10", line])


def test_empty_or_missing_trace_is_an_error(tmp_path):
    (tmp_path / "empty.txt").write_text("# only a comment\n")
    with pytest.raises(ParameterError, match="no frames"):
        parse_trace(tmp_path / "empty.txt")
    with pytest.raises(ParameterError, match="trace file"):
        parse_trace(tmp_path / "missing.txt")


def test_a_csv_header_names_the_columns_and_gzip_is_read(tmp_path):
    # the index of papers/003's H.264 file (traffic/video_file.py): decode order, the type last
    lines = ["# a comment", "pts_s,size_bytes,pos_bytes,frame_type", "0.000000,195313,184849,I",
             "0.100000,22074,380162,P", "0.033333,12936,402236,B"]
    types, sizes = parse_trace_lines(lines)
    assert list(types) == ["I", "P", "B"] and list(sizes) == [195313, 22074, 12936]
    # columns given beside a header that names them: refused, not silently overridden
    with pytest.raises(ParameterError, match="header names the columns"):
        parse_trace_lines(lines, size_column=2)
    path = tmp_path / "frames.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")
    assert [list(a) for a in parse_trace(path)] == [list(types), list(sizes)]
    # the committed index itself: 624 s at 30 fps, 5.25 Mb/s, a key frame every 60 frames
    src = VideoTraceSource(PAPER_TRACE)
    assert len(src.frame_bytes) == 18720 and src.mean_rate_bps == pytest.approx(5.251e6, rel=1e-3)
    assert list(np.flatnonzero(src.frame_types[:121] == "I")) == [0, 60, 120]


def test_split_frame_packet_sizes():
    # 3000 payload bytes, 1446-byte packets carry 1434 payload bytes each: 1434 + 1434 + 132
    assert split_frame(3000, 1446) == [1446, 1446, 132 + 12]
    assert split_frame(1434, 1446) == [1446]
    assert split_frame(0, 1446) == [32]  # an empty frame still takes one minimum-size packet
    assert split_frame(1434 + 5, 1446) == [1446, 32]  # a 17-byte remainder is padded to 32


def test_trace_source_cuts_frames_and_loops(tmp_path):
    path = tmp_path / "t.txt"
    write_trace(path, ["I", "P", "B"], [3000, 500, 30])
    src = VideoTraceSource(path, fps=10.0, max_packet_bytes=1446)
    pkts = list(src.packets(0.45))  # frames at 0, .1, .2, .3, .4 -> trace frames 0 1 2 0 1
    assert [(p.frame_id, p.frame_type, p.size_bytes, p.frame_last) for p in pkts] == [
        (0, "I", 1446, False), (0, "I", 1446, False), (0, "I", 144, True),
        (1, "P", 512, True), (2, "B", 42, True),
        (3, "I", 1446, False), (3, "I", 1446, False), (3, "I", 144, True), (4, "P", 512, True)]
    assert pkts[3].at_s == pytest.approx(0.1)
    assert len(list(VideoTraceSource(path, fps=10.0, loop=False).packets(10.0))) == 5
    assert src.mean_rate_bps == pytest.approx((3000 + 500 + 30) / 3 * 8 * 10)


def test_gop_pattern():
    assert gop_pattern(12) == "IBBPBBPBBPBB"
    assert gop_pattern("ippp") == "IPPP"
    with pytest.raises(ParameterError):
        gop_pattern("PBB")


def test_tes_gop_pattern_is_exact_and_frames_are_packetized():
    src = Mpeg4TesSource(mean_rate_bps=2e6, fps=25.0)
    pkts = list(src.packets(2.0, seed=1))
    frames = {}
    for p in pkts:
        frames.setdefault(p.frame_id, []).append(p)
    assert sorted(frames) == list(range(50))  # 2 s at 25 fps
    assert "".join(frames[k][0].frame_type for k in range(24)) == "IBBPBBPBBPBB" * 2
    for k, ps in frames.items():
        assert all(p.at_s == pytest.approx(k / 25) for p in ps)
        assert [p.frame_last for p in ps] == [False] * (len(ps) - 1) + [True]
        assert all(p.size_bytes <= 1446 for p in ps)


def test_tes_mean_rate_and_type_means_within_tolerance():
    # models given (not the defaults, which are fitted to a trace: test_mpeg4_tes_fit.py)
    models = {"I": TesFrameModel(4.0, 0.25, 0.05), "P": TesFrameModel(2.0, 0.45, 0.1),
              "B": TesFrameModel(1.0, 0.5, 0.1)}
    src = Mpeg4TesSource(mean_rate_bps=1e6, fps=25.0, models=models)
    types, sizes = src.frames(240_000, seed=2)
    rate = sizes.mean() * 8 * 25
    # over 20 seeds the std of this estimate at 120 000 frames was 0.7 %; at 240 000 about 0.5 %:
    # 3 % is 6 standard errors
    assert rate == pytest.approx(1e6, rel=0.03)
    means = src.mean_frame_bytes()
    # I : P : B = 4 : 2 : 1 and 1 I + 3 P + 8 B per GOP: unit = (1e6/8 * 12/25) / 18 = 3333.3 B
    assert means["B"] == pytest.approx(1e6 / 8 * 12 / 25 / 18)
    for t in "IPB":
        assert sizes[types == t].mean() == pytest.approx(means[t], rel=0.06)
    # the marginal's coefficient of variation follows the model
    assert sizes[types == "B"].std() / sizes[types == "B"].mean() == pytest.approx(0.5, rel=0.1)


def test_tes_is_deterministic_and_prefix_consistent():
    src = Mpeg4TesSource(mean_rate_bps=5e5)
    t1, s1 = src.frames(100, seed=9)
    t2, s2 = src.frames(1000, seed=9)
    assert list(s1) == list(s2[:100])
    assert list(src.frames(100, seed=10)[1]) != list(s1)


def test_tes_background_is_uniform_and_stitching_keeps_it_uniform():
    rng = np.random.default_rng(0)
    u = np.concatenate([tes_background(rng, 2000, 0.2) for _ in range(50)])
    s = stitch(u)
    for x in (u, s):
        hist, _ = np.histogram(x, bins=10, range=(0, 1))
        assert np.all(np.abs(hist / x.size - 0.1) < 0.02)


def test_a_trace_file_is_parsed_once_until_it_changes(tmp_path):
    """Planning a sweep builds each cell's source from the same trace: the file is read once, its
    arrays shared read-only; written again, it is read again."""
    path = tmp_path / "trace.txt"
    write_trace(path, ["I", "P"], [1000, 200])
    t1, s1 = parse_trace(path)
    t2, s2 = parse_trace(path)
    assert t1 is t2 and s1 is s2
    with pytest.raises(ValueError):
        s1[0] = 5                                  # shared: nobody may change them
    write_trace(path, ["I", "P", "B"], [1000, 200, 80])
    t3, s3 = parse_trace(path)
    assert list(t3) == ["I", "P", "B"] and list(s3) == [1000, 200, 80]
    write_trace(path, ["P", "I", "B"], [2000, 100, 90])   # the same size, written again
    assert list(parse_trace(path)[1]) == [2000, 100, 90]
    assert list(parse_trace(path, size_unit="bits")[1]) == [250, 13, 12]
