#!/bin/sh
# A second ground truth for the delay model's `classic` stack (docs/experiments/model-fidelity.md),
# beside ns-3: CBR voip and video over real Linux 6.1 with RACK off (`newreno-2008`: Reno, SACK,
# tcp_recovery 0, IW3), the sender on a QEMU guest booting Debian's 6.1 (issue 32 item 3;
# docs/testbed.md, "Reference-kernel hosts"), Bernoulli drops of data segments by the emulator,
# RTT 20/100/300 ms x 1/2/5 % (issue 18's points). The guest's CPU is emulated (TCG): a first pass
# of one 60-s run per point; REPS=3 DURATION=100 grows it (rerunning resumes, complete runs kept).
# Run as root from a separate clone, one testbed at a time.
set -e
OUT=${OUT:-results}
TD=${TD:-.venv/bin/tcpdelay}
$TD validate --out "$OUT/fidelity-classic-guest-61" --host-kernel debian-6.1 --stack newreno-2008 \
  --profile voip --profile video --rtt-s 0.02 --rtt-s 0.1 --rtt-s 0.3 --loss 0.01 --loss 0.02 --loss 0.05 \
  --duration-s "${DURATION:-60}" --repetitions "${REPS:-1}" --jobs 1 --model-stack classic
