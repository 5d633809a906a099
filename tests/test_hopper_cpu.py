"""Lab 08's rungs on the cpu backend, whose kernels/cpu_hopper.h emulates hopper.h: TMA copies
that land lazily, mbarriers with phases, warpgroup-wide wgmma that reads shared memory when
its group retires, setmaxnreg, named barriers, TMA stores.

Every rung passes the CPU suite in fp16 and bf16 (its shapes whose N or K is not a multiple of
8 run lab 07's mma_ahead, as on a GPU) and a ragged suite TMA describes whole; a kernel that
declares thread-block clusters (__cluster_dims__) is refused by name. Known-wrong variants,
each a few exact edits of a rung's file (an edit not found exactly once fails its test), are each caught on the cpu
backend: named by the emulation, or as a wrong result verify() reports. Small kernels of
tests/kernels/hopper_probes.cu check the rest: the shared-memory window, setmaxnreg's rules,
an mbarrier never initialised, a TMA round trip (zero fill, clipping) and the fence before a
TMA store.
"""
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from kernelcourse import rungs
from kernelcourse.backends.compile_only import CompileError
from kernelcourse.backends.cpu import CpuBackend, KernelFault
from kernelcourse.gemm import CPU_SUITE, Shape, Suite
from kernelcourse.tensor_map import TensorMap
from kernelcourse.verify import verify

pytestmark = [pytest.mark.rungs, pytest.mark.lab08]

PROBES = Path(__file__).resolve().parent / "kernels" / "hopper_probes.cu"
EMULATED = rungs.HOPPER               # every rung: none uses thread-block clusters yet
TMA_CPU_SUITE = rungs.HOPPER[0].tma_suite(False)   # every shape TMA describes whole: no fallback
DEEP = Suite("deep", 64, (Shape(64, 64, 4096, "deep K: a ring that turns many times", signed=True),))


@pytest.fixture(scope="module")
def cpu():
    return CpuBackend(timeout_s=60)


@pytest.mark.parametrize("rung", EMULATED, ids=lambda r: r.name)
@pytest.mark.parametrize("bf16", [0, 1], ids=["fp16", "bf16"])
def test_passes_the_cpu_suite_falling_back_where_tma_cannot(cpu, rung, bf16):
    impl = rung.c_impl(cpu, KC_BF16=bf16)
    report = verify(impl, CPU_SUITE, verbose=False)
    assert report.passed and report.cause == "ok", str(report)
    assert report.dtype == ("bf16" if bf16 else "fp16")
    assert set(impl.run.fell_back) == {(s.M, s.N, s.K) for s in CPU_SUITE.shapes if s.N % 8 or s.K % 8}


@pytest.mark.parametrize("rung", [r for r in EMULATED if "BLOCKS" in r.defines], ids=lambda r: r.name)
@pytest.mark.parametrize("blocks", [1, 3])
def test_a_persistent_block_walks_several_tiles(cpu, rung, blocks):
    """The cpu device has no SMs to count (its default grid: CPU_BLOCKS = 2); with BLOCKS=1
    or 3 too, each block takes many tiles of the suite, and its ring turns on across them."""
    impl = rung.c_impl(cpu, BLOCKS=blocks)
    report = verify(impl, TMA_CPU_SUITE, verbose=False)
    assert report.passed and report.cause == "ok", str(report)
    assert impl.run.fell_back == {}, impl.run.fell_back


@pytest.mark.parametrize("rung", EMULATED, ids=lambda r: r.name)
@pytest.mark.parametrize("bf16", [0, 1], ids=["fp16", "bf16"])
def test_passes_every_shape_tma_can_describe(cpu, rung, bf16):
    impl = rung.c_impl(cpu, KC_BF16=bf16)
    report = verify(impl, TMA_CPU_SUITE, verbose=False)
    assert report.passed and report.cause == "ok", str(report)
    assert impl.run.fell_back == {}, impl.run.fell_back


def test_clusters_are_refused_before_compiling_with_their_line(cpu, tmp_path):
    source = tmp_path / "student.cu"
    source.write_text('#include "portable.h"\n#include "mma.h"\n#include "hopper.h"\n'
                      'extern "C" __global__ void __cluster_dims__(2, 1, 1) k(float* y) {\n'
                      '    y[0] = 1.0f;\n}\n')
    with pytest.raises(CompileError, match=r"student\.cu:4: the cpu backend does not emulate thread-block "
                                           r"clusters .*run on a Hopper GPU only \('__cluster_dims__'\)"):
        cpu.compile(source, "k", arch_suffix="a")


# --------------------------------------------------------------------------- known-wrong variants

@dataclass(frozen=True)
class Broken:
    """A rung's file with a mistake: `edits` (text of the file, what replaces it), each found
    exactly once. `says`: a pattern the crash must match; None: no crash, a wrong result."""

    name: str
    rung: str
    why: str
    edits: tuple[tuple[str, str], ...]
    says: str | None
    suite: Suite = TMA_CPU_SUITE
    defines: dict = field(default_factory=dict)     # BLOCKS=1: a persistent block walks every tile

    def apply(self, text: str) -> str:
        for old, new in self.edits:
            assert text.count(old) == 1, f"{self.name}: {old!r} is not in {self.rung}'s file exactly once"
            text = text.replace(old, new)
        return text


EXPECT_TX = "kc_mbarrier_arrive_expect_tx(&full[s], (BM * BK + BK * BN) * (int)sizeof(kc_elem));"
WAIT_FULL = "        // Wait: slice t has landed in stage s.\n        kc_mbarrier_wait(&full[s], (t / STAGES) % 2);\n"
RELEASE = "            if (t > 0 && leader)\n                kc_mbarrier_arrive(&empty[(it - 1) % STAGES]);\n"
RETIRE = "            kc_wgmma_wait<1>();\n            kc_wgmma_hold(acc);\n"
B_DESC = "kc_smem_desc(Bs + kk * 16 * B_BOX, BK * B_BOX * (int)sizeof(kc_elem), 1024)"
BROKEN = (
    Broken("no_fence", "wgmma_tma", "the kc_wgmma_fence() before the wgmmas left out",
           (("        kc_wgmma_fence();\n", ""),), r"no kc_wgmma_fence\(\) in warpgroup 0 since the block started"),
    Broken("expect_tx_too_few", "wgmma_wide", "the full barrier expects A's bytes only",
           ((EXPECT_TX, "kc_mbarrier_arrive_expect_tx(&full[s], BM * BK * (int)sizeof(kc_elem));"),),
           r"bytes landing beyond what was expected: .*kc_mbarrier_arrive_expect_tx said too few bytes"),
    Broken("expect_tx_too_many", "wgmma_wide", "the full barrier expects B's bytes twice",
           ((EXPECT_TX, "kc_mbarrier_arrive_expect_tx(&full[s], (BM * BK + 2 * BK * BN) * (int)sizeof(kc_elem));"),),
           r"deadlock: .* wait on line \d+ for phase 0 \(parity 0\) of the mbarrier initialised on line \d+ "
           r"\(the 1st of the 4 initialised there\), which still misses 0 of its 1 arrivals and 32768 bytes"),
    Broken("wrong_stride", "wgmma_tma", "A's descriptor steps 512 bytes from one 8-row group to the next",
           (("kc_smem_desc(As + kk * 16, 16, 1024)", "kc_smem_desc(As + kk * 16, 16, 512)"),), None),
    Broken("wrong_swizzle", "wgmma_tma", "B's descriptor says the 64-byte swizzle",
           ((B_DESC, f"({B_DESC} ^ 3ull << 62)"),), r"B's descriptor has swizzle mode 2 \(64 bytes\)"),
    Broken("reads_before_full", "wgmma_wide", "the wait on the full barrier moved after the wgmmas",
           ((WAIT_FULL, ""), ("        kc_wgmma_commit();\n",
                              "        kc_wgmma_commit();\n        kc_mbarrier_wait(&full[s], (t / STAGES) % 2);\n")),
           r"kc_wgmma_m64n256k16 reads a stage before its barrier: the TMA copy of line \d+"),
    # The producer refills the stage while the consumer's group still reads it: named where the
    # producer runs first (the forward order, one launch in three), so on a ring that turns.
    Broken("releases_before_wait", "wgmma_persistent", "a consumer releases its stage before kc_wgmma_wait",
           ((RETIRE + RELEASE, RELEASE + RETIRE),),
           r"kc_tma_load_2d writes shared memory that the wgmma of line \d+ \(warpgroup [12]\) still reads", DEEP),
    Broken("no_empty_arrive", "wgmma_persistent", "the consumers never release a stage",
           ((RELEASE, ""),),
           r"deadlock: .*1 thread waits on line \d+ for phase 0 \(parity 0\) of the mbarrier initialised on "
           r"line \d+ \(the 1st of the 4 initialised there\), which still misses 2 of its 2 arrivals and 0 bytes", DEEP),
    Broken("stores_before_the_last_wait", "wgmma_wide", "C stored from the accumulators before the last kc_wgmma_wait",
           (("    kc_wgmma_wait<0>();\n    kc_wgmma_hold(acc);\n\n", "\n"),
            ("            C[(size_t)row * N + col] = kc_to_elem(acc[i]);\n    }\n}",
             "            C[(size_t)row * N + col] = kc_to_elem(acc[i]);\n    }\n    kc_wgmma_wait<0>();\n}")), None),
    # Mistakes that show only where a persistent block walks more than one tile.
    Broken("restages_before_the_store_read", "wgmma_tma_store",
           "the next tile written into the staging tile before the last tile's stores have read it",
           (("        if (leader)\n            kc_tma_store_wait<0>();\n        kc_named_barrier(1 + consumer, 128);\n", ""),),
           None, defines={"BLOCKS": 1}),
    Broken("slice_count_per_tile", "wgmma_persistent",
           "the consumers count slices from 0 again on every tile, the producer does not",
           (("    int it = 0;\n    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {\n",
             "    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {\n        int it = 0;\n"),),
           r"reads a stage before its barrier", defines={"BLOCKS": 1}),
    Broken("no_proxy_fence", "wgmma_tma_store", "the staging tile handed to TMA without kc_fence_proxy_async()",
           (("        kc_fence_proxy_async();\n", ""),),
           r"kc_tma_store_2d: thread \d+ met this thread at its last barrier with no kc_fence_proxy_async\(\)"),
)


@pytest.mark.parametrize("broken", BROKEN, ids=lambda b: b.name)
def test_a_known_wrong_variant_is_caught(cpu, tmp_path, broken):
    rung = rungs.RUNG[broken.rung]
    path = tmp_path / rung.source.name
    path.write_text(broken.apply(rung.source.read_text()))
    report = verify(rung.with_files(source=path).c_impl(cpu, **broken.defines), broken.suite, verbose=False)
    assert not report.passed, str(report)
    crashes = [r.crash for r in report.results if r.crash]
    if broken.says is None:
        assert not crashes and report.cause not in ("ok", "crash"), str(report)
    else:
        assert report.cause == "crash" and crashes, str(report)
        assert re.search(broken.says, crashes[0]), crashes[0]
        assert f"{path}:" in crashes[0] or "deadlock" in crashes[0], crashes[0]


# --------------------------------------------------------------------------- probes

@pytest.fixture(scope="module")
def probes(cpu):
    return lambda name: cpu.compile(PROBES, name, arch_suffix="a")


def line_of(text: str) -> int:
    return next(n for n, line in enumerate(PROBES.read_text().splitlines(), 1) if text in line)


def test_a_shared_window_address_and_its_pointer_agree_modulo_1024(cpu, probes):
    out = cpu.to_device(np.zeros(2, np.float32))
    for shared_bytes in (16, 100, 5000):
        probes("smem_window")((1,), (32,), (out,), shared_bytes)
        window, pointer = cpu.to_host(out)
        assert window == pointer, (shared_bytes, window, pointer)


@pytest.mark.parametrize("kernel, says", [
    ("mixed_setmaxnreg", r"setmaxnreg is not warpgroup-uniform: thread 0 of warpgroup 0 asks for dec 40 "
                         r"registers, thread 64 for dec 48"),
    ("partial_setmaxnreg", r"divergent warpgroup: in block \(0, 0, 0\) 64 of the 128 threads of warpgroup 0 "
                           r"reached the warpgroup-wide operation on line {line}; every thread of a full "
                           r"warpgroup must"),
    ("raising_dec", r"kc_setmaxnreg_dec<48>: warpgroup 0 holds 40 registers a thread \(setmaxnreg on line "
                    r"\d+\); dec may only lower the count"),
    ("uninitialised_barrier", r"kc_mbarrier_wait: the mbarrier at shared address 0x[0-9a-f]+ was never "
                              r"initialised"),
])
def test_setmaxnreg_and_mbarrier_misuse_is_named(cpu, probes, kernel, says):
    out = cpu.to_device(np.zeros(128, np.float32))
    says = says.format(line=line_of("the other 64 go on, and finish"))
    with pytest.raises(KernelFault, match=says):
        probes(kernel)((1,), (128,), (out,))


def test_a_tma_round_trip_zero_fills_the_load_and_clips_the_store(cpu, probes):
    """A 64 x 64 box at (column 40, row 50) of a 100 x 72 matrix: what lies past its edges
    loads as zeros; stored at (0, 0) of a 70 x 48 matrix, the box is clipped there."""
    rng = np.random.default_rng(0)
    host = rng.integers(-8, 8, (100, 72)).astype(np.float32)
    source, target = cpu.to_device(host, "fp16"), cpu.to_device(np.full((70, 48), -1.0), "fp16")
    args = (TensorMap(source, 100, 72, 64, 64), TensorMap(target, 70, 48, 64, 64), 40, 50, 0, 0, 1)
    probes("tma_round_trip")((1,), (128,), args)
    box = np.zeros((64, 64), np.float32)
    box[:50, :32] = host[50:, 40:]
    want = np.full((70, 48), -1.0, np.float32)
    want[:64, :48] = 2 * box[:, :48]
    assert np.array_equal(cpu.to_host(target), want)
    with pytest.raises(KernelFault, match=r"kc_tma_store_2d: thread \d+ met this thread at its last barrier "
                                          r"with no kc_fence_proxy_async\(\)"):
        probes("tma_round_trip")((1,), (128,), args[:-1] + (0,))


@pytest.mark.parametrize("rung", [rungs.HOPPER[0], rungs.HOPPER[-1]], ids=lambda r: r.name)
def test_arrays_of_the_other_precision_are_refused_before_a_launch(cpu, rung):
    """A bf16 build reads its tensor maps as bf16: fp16 arrays (whose bits would be read as
    bf16 ones) are refused, with both types named; the rung storing C by TMA has no pointer
    argument left that would catch it."""
    from kernelcourse.args import ArgumentError
    impl = rung.c_impl(cpu, KC_BF16=1)
    A, B, C = (cpu.to_device(np.zeros(shape, np.float32), "fp16") for shape in ((64, 64), (64, 128), (64, 128)))
    with pytest.raises(ArgumentError, match="the kernel reads bfloat16 through it, the array holds float16"):
        impl(A, B, C, 64, 128, 64)


def test_a_copy_no_thread_waits_for_is_named_when_the_block_ends(cpu, probes):
    source = cpu.to_device(np.ones((64, 64), np.float32), "fp16")
    out = cpu.to_device(np.zeros(128, np.float32))
    with pytest.raises(KernelFault, match=r"the block finished with 1 TMA copies \(this one the first\) that "
                                          r"no thread waited for"):
        probes("unwaited_copy")((1,), (128,), (TensorMap(source, 64, 64, 64, 64), out))
