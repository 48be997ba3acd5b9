#!/bin/sh
# Ground truth for the delay model's `linux` stack (docs/experiments/model-fidelity.md):
# CBR voip and video over Linux's default TCP (CUBIC, SACK, RACK-TLP, IW10) with Bernoulli drops,
# RTT 20/100/300 ms x drop rate 0.5/1/2/3/5 %, 100-s runs pooled per point so that every point has
# at least 200 drops and 5 minutes of media (50 packets/s: 8 runs at 0.5 %, 4 at 1 %, 3 above).
# Run as root from a separate clone, one testbed at a time; rerunning resumes (complete runs are
# kept). Order: the drop rates where the model is judged most, then the rest.
set -e
OUT=${OUT:-results}
TD=${TD:-.venv/bin/tcpdelay}
common="--stack linux-default --profile voip --profile video --rtt-s 0.02 --rtt-s 0.1 --rtt-s 0.3 --duration-s 100 --jobs 1"
$TD validate --out "$OUT/fidelity-linux-2to5pct" $common --loss 0.02 --loss 0.03 --loss 0.05 --repetitions 3
$TD validate --out "$OUT/fidelity-linux-1pct" $common --loss 0.01 --repetitions 4
$TD validate --out "$OUT/fidelity-linux-0.5pct" $common --loss 0.005 --repetitions 8
