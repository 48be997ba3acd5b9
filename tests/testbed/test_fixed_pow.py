"""bpf/cc/fixed_pow.h, the fixed-point x^k Compound TCP's delay window grows by (BPF has no
floating point): compiled on the host from the same file the BPF program includes, and checked
against floating point over every window size it meets (1 .. 2^24 segments) and k in [0, 1]."""

import math
import random
import shutil
import subprocess
from pathlib import Path

import pytest

HEADER_DIR = Path(__file__).resolve().parents[2] / "bpf" / "cc"

HARNESS = r"""
#define TDCC_FIXED_POW_HOST
#include <stdio.h>
#include "fixed_pow.h"
int main(void) {
    unsigned x, k;
    while (scanf("%u %u", &x, &k) == 2)
        printf("%llu %u\n", (unsigned long long)fp_pow_q10(x, k), fp_log2_q16(x));
    return 0;
}
"""


@pytest.fixture(scope="module")
def fixed_pow(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.fail("no C compiler (cc, gcc or clang) to build the fixed-point harness")
    d = tmp_path_factory.mktemp("fixed_pow")
    (d / "harness.c").write_text(HARNESS)
    subprocess.run([cc, "-O2", "-Wall", "-Werror", f"-I{HEADER_DIR}", "-o", str(d / "harness"), str(d / "harness.c")],
                   check=True)

    def run(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
        out = subprocess.run([str(d / "harness")], input="\n".join(f"{x} {k}" for x, k in pairs),
                             capture_output=True, text=True, check=True).stdout.split("\n")
        return [tuple(map(int, line.split())) for line in out if line]
    return run


def test_power_within_a_tenth_of_a_percent_of_floating_point(fixed_pow):
    rng = random.Random(7)
    xs = list(range(1, 4097)) + [int(1.3 ** i) for i in range(32, 64)] + [rng.randrange(1, 2 ** 24) for _ in range(5000)]
    ks = [0, 1, 256, 512, 768, 819, 1000, 1024]
    pairs = [(x, k) for x in xs for k in ks]
    for (x, k), (got, _) in zip(pairs, fixed_pow(pairs), strict=True):
        want = x ** (k / 1024) * 1024
        assert abs(got - want) <= max(0.001 * want, 2), (x, k, got, want)


def test_log2_is_exact_at_powers_of_two_and_close_between(fixed_pow):
    pairs = [(1 << i, 768) for i in range(24)] + [(3, 768), (1000, 768), (12345678, 768)]
    for (x, _), (_, log2_q16) in zip(pairs, fixed_pow(pairs), strict=True):
        assert abs(log2_q16 / 65536 - math.log2(x)) < 2 / 65536, (x, log2_q16)


def test_the_growth_compound_uses_at_its_low_window(fixed_pow):
    """alpha·win^0.75 − 1 at win = 38 (the draft's low window), alpha = 1/8: 0.915 segments a round."""
    (got, _), = fixed_pow([(38, 768)])
    assert abs(got * 128 / 1024 / 1024 - 1 - (0.125 * 38 ** 0.75 - 1)) < 0.002
