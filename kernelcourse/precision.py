"""How wrong a GEMM may be in each precision, and which roundings can make it so: the
tolerance verify() judges by, and the bounds the diagnosis's precision rule holds an error
to before it names a rounding as the cause."""

# Relative error max|C - ref| / max|ref| allowed per operand precision:
#  fp32: the module's 1e-4, about 25x the sqrt(K)*eps rounding of a correct fp32 sum;
#  tf32: operands rounded to a 10-bit mantissa (eps 4.9e-4 each, about 1e-3 a product);
#  fp16: output rounded to fp16 (eps 4.9e-4) after an fp32 accumulation; 4x headroom;
#  bf16: output rounded to bf16 (eps 3.9e-3); 2.5x headroom.
# Any real bug (a missing guard, barrier or zero-fill, a wrong index) gives O(1e-2..1).
TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "fp16": 2e-3, "bf16": 1e-2}
# The unit roundoff u (half the gap between 1 and the next number) of each format a GEMM can
# round to on the way: fp16 and tf32 keep 10 mantissa bits, bf16 7.
UNIT_ROUNDOFF = {"fp16": 2.0 ** -11, "tf32": 2.0 ** -11, "bf16": 2.0 ** -8}
# The roundings that can make a GEMM of each precision miss its tolerance (what the
# precision rule may name), and the largest error each explains on a K-long dot product,
# relative to max|C|:
#   an accumulator in the format: each of the K additions rounds by at most u of the running
#     sum, at most max|C|: K * u. It grows with K, which the rule asks of the errors too;
#   operands rounded to a coarser format, products added in fp32: each product is off by at
#     most 2u of its size, K of them by at most 2u * sum|a*b|, which with signed inputs
#     reaches about sqrt(K) * max|C|: 4u * sqrt(K), with headroom. It does not grow with K.
# Tried in this order: the first whose bound and trend fit every failure is named.
ROUNDINGS = {
    "fp32": (("accumulator", "fp16"), ("operands", "tf32"), ("operands", "bf16")),
    "tf32": (("accumulator", "fp16"),),
    "fp16": (("accumulator", "fp16"),),
    "bf16": (("accumulator", "bf16"),),
}
OUTPUT_DTYPE = {"fp32": "fp32", "tf32": "fp32", "fp16": "fp16", "bf16": "bf16"}
