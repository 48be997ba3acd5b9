"""The MPEG-4 TES source against the trace it is fitted to (papers/004 §3.1; docs/experiments/mpeg4-transport.md).

    .venv/bin/python benchmarks/mpeg4_tes_fit.py [--refit]

Prints, per frame type, the committed trace's statistics (data/video/mpeg4-1000k-25fps-600s,
made by ffmpeg's mpeg4 encoder: src/tcpdelay/traffic/mpeg4_tes_fit.py) beside the source's with
its default models: mean size, coefficient of variation and lag-1 autocorrelation of successive
frames of the type, estimated over 200 runs of 1200 frames (the first frames of 2000 runs for the
marginal). With --refit, fits the three models again and prints them (they must equal the
source's defaults: tests/traffic/test_mpeg4_tes_fit.py).
"""

from __future__ import annotations

import argparse
import sys

from tcpdelay.traffic.mpeg4_tes import DEFAULT_MODELS, Mpeg4TesSource
from tcpdelay.traffic.mpeg4_tes_fit import fit_models, frame_statistics, load_trace, source_statistics


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refit", action="store_true")
    args = ap.parse_args()
    types, sizes = load_trace()
    want = frame_statistics(types, sizes)
    rate = sizes.sum() * 8 / (len(sizes) / 25)
    src = Mpeg4TesSource(mean_rate_bps=rate, fps=25, gop="IBBPBBPBBPBB")
    got = source_statistics(src)
    print(f"trace: {len(sizes)} frames, {rate / 1e6:.3f} Mb/s, GOP {''.join(types[:12])}")
    print(f"{'type':4} {'frames':>6} {'mean B: trace':>14} {'model':>8} {'cv: trace':>10} {'model':>6} "
          f"{'lag-1: trace':>13} {'model':>6}   model (relative mean, cv, h)")
    for t in "IPB":
        m = DEFAULT_MODELS[t]
        print(f"{t:4} {want[t].count:>6} {want[t].mean_bytes:>14.0f} {got[t].mean_bytes:>8.0f} {want[t].cv:>10.3f} "
              f"{got[t].cv:>6.3f} {want[t].lag1:>13.3f} {got[t].lag1:>6.3f}   "
              f"({m.relative_mean}, {m.cv}, {m.innovation_half_width})")
    if args.refit:
        print("refit:", fit_models(types, sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
