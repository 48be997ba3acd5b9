/* x^k in fixed point, for BPF programs (no floating point in the kernel) and for a host test.
 *
 * Compound TCP grows its delay window by alpha * win^k a round (k = 0.75 by default; Tan, Song,
 * Zhang and Sridharan, "A Compound TCP approach for high-speed and long distance networks",
 * INFOCOM 2006, Sec. 3). win^k = 2^(k * log2 win):
 * - log2 in Q16 (16 fractional bits): the integer part from the highest set bit, the fraction
 *   bit by bit by squaring the mantissa (Q30) and halving it when it reaches 2 (the classic
 *   digit-by-digit binary logarithm);
 * - 2^f for the fraction f (Q16) as the product of 2^(2^-j) for each set bit j (a table in Q30).
 * Relative error below 0.1 % for x in [1, 2^24] and k in [0, 1]; tests/testbed/test_fixed_pow.py
 * compiles this file on the host and checks it against floating point over that range.
 *
 * Plain C (no kernel headers): include it after vmlinux.h in a BPF program, after <stdint.h>
 * in a host program (which defines TDCC_FIXED_POW_HOST).
 */
#ifndef TDCC_FIXED_POW_H
#define TDCC_FIXED_POW_H

#ifdef TDCC_FIXED_POW_HOST
#include <stdint.h>
typedef uint32_t fp_u32;
typedef uint64_t fp_u64;
#define FP_INLINE static inline
#define FP_UNROLL
#else
typedef __u32 fp_u32;
typedef __u64 fp_u64;
#define FP_INLINE static __always_inline
#define FP_UNROLL _Pragma("unroll")
#endif

#define FP_Q30 (1ULL << 30)

/* 2^(2^-j) in Q30 for j = 1..16: round(2^30 * 2^(2^-j)). */
static const fp_u64 fp_exp2_frac_q30[16] = {
	1518500250ULL, 1276901417ULL, 1170923762ULL, 1121280436ULL,
	1097253708ULL, 1085434106ULL, 1079572136ULL, 1076653033ULL,
	1075196443ULL, 1074468888ULL, 1074105294ULL, 1073923544ULL,
	1073832680ULL, 1073787251ULL, 1073764537ULL, 1073753181ULL,
};

/* floor(log2 x) for x >= 1 (0 for x = 0). */
FP_INLINE fp_u32 fp_ilog2(fp_u64 x)
{
	fp_u32 n = 0;

	if (x >> 32) { x >>= 32; n += 32; }
	if (x >> 16) { x >>= 16; n += 16; }
	if (x >> 8) { x >>= 8; n += 8; }
	if (x >> 4) { x >>= 4; n += 4; }
	if (x >> 2) { x >>= 2; n += 2; }
	if (x >> 1) { n += 1; }
	return n;
}

/* log2(x) in Q16 for 1 <= x < 2^32. */
FP_INLINE fp_u32 fp_log2_q16(fp_u32 x)
{
	fp_u32 n, i, frac = 0;
	fp_u64 y;

	if (x <= 1)
		return 0;
	n = fp_ilog2(x);
	y = ((fp_u64)x << 30) >> n; /* mantissa in [1, 2), Q30 */
	/* branch-free, so the verifier walks one path: y in [1, 4) Q30 after squaring, and
	 * bit 31 set means y >= 2 */
	FP_UNROLL
	for (i = 0; i < 16; i++) {
		fp_u64 bit;

		y = (y * y) >> 30;
		bit = (y >> 31) & 1;
		y >>= bit;
		frac = (frac << 1) | (fp_u32)bit;
	}
	return (n << 16) | frac;
}

/* 2^(e / 2^16) in Q10 (1024 = 1.0), saturating at 2^40 (e below 30 * 2^16). */
FP_INLINE fp_u64 fp_exp2_q16_to_q10(fp_u32 e)
{
	fp_u32 ipart = e >> 16, j;
	fp_u64 r = FP_Q30;

	FP_UNROLL
	for (j = 0; j < 16; j++) {
		/* times 2^(2^-(j+1)) when that bit of the fraction is set, else times 1 (branch-free) */
		fp_u64 set = (e >> (15 - j)) & 1;
		fp_u64 m = FP_Q30 + ((fp_exp2_frac_q30[j] - FP_Q30) & (0 - set));

		r = (r * m) >> 30;
	}
	if (ipart > 30)
		ipart = 30;
	/* r < 2^31 (Q30 in [1, 2)): r << ipart < 2^61 */
	return (r << ipart) >> 20;
}

/* x^(k_q10 / 1024) in Q10, for 1 <= x < 2^24 and 0 <= k_q10 <= 1024. */
FP_INLINE fp_u64 fp_pow_q10(fp_u32 x, fp_u32 k_q10)
{
	fp_u64 e;

	if (x == 0)
		return 0;
	e = ((fp_u64)fp_log2_q16(x) * k_q10) >> 10;
	return fp_exp2_q16_to_q10((fp_u32)e);
}

#endif
