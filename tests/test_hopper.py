"""Lab 08's rungs, hopper.h and tensor maps: Hopper's wgmma fed by TMA.

CPU: TMA's rules on a matrix (named when broken); the tensor map's encoding reaches the
driver with cuda.bindings' real argument types (only the missing driver stops it here);
a kc_tensor_map parameter takes a TensorMap and nothing else; each rung builds for sm_90a
with no spills, and a plain sm_90 build is refused for wgmma; the hip backend refuses it by
name (the cpu backend runs it: tests/test_hopper_cpu.py). GPU (`-m gpu`, an NVIDIA Hopper
GPU): every rung against the float64 reference on ragged shapes TMA can describe (no
fallback), in fp16 and bf16, and the GPU suite, where the shapes TMA cannot describe run lab
07's rung and say why.
"""
import numpy as np
import pytest

from kernelcourse import rungs
from kernelcourse.args import ArgumentError, pack
from kernelcourse.backends.compile_only import CompileError, nvrtc_compile
from kernelcourse.backends.hip import HipBackend
from kernelcourse.device import Device
from kernelcourse.gemm import GPU_SUITE, Shape, Suite
from kernelcourse.source import KernelSource
from kernelcourse.tensor_map import TensorMap, encode_cuda, refusal
from kernelcourse.verify import verify

pytestmark = [pytest.mark.rungs, pytest.mark.lab08]

HOPPER = rungs.HOPPER
TMA_SUITE = rungs.HOPPER[0].tma_suite(True)   # every shape TMA describes whole: no fallback


def test_tmas_rules_are_named():
    assert refusal(0x1000, 64, 64, 2, 64, 64) is None
    assert "multiple of 16" in refusal(0x1008, 64, 64, 2, 64, 64)
    assert "16-byte boundary" in refusal(0x1000, 64, 1001, 2, 64, 64)
    assert "at most 256" in refusal(0x1000, 64, 64, 2, 512, 64)
    assert "wider than the 128-byte swizzle" in refusal(0x1000, 64, 128, 2, 64, 128)
    assert "whole 16-byte chunks" in refusal(0x1000, 64, 64, 2, 64, 4)
    with pytest.raises(ValueError, match="16-byte boundary"):
        encode_cuda(0x1000, 64, 1001, "float16", 64, 64)


def test_the_encoding_reaches_the_driver_with_real_argument_types():
    """cuda.bindings checks every argument's type before it calls the driver: without a
    driver the call gets as far as loading it; with one, the driver answers (or encodes)."""
    try:
        encoded = encode_cuda(0x10000, 256, 256, "bfloat16", 64, 64)
    except TypeError:
        raise                                  # an argument of the wrong type: the bug to catch
    except RuntimeError as exc:                # no driver to load, or the driver said no
        assert (type(exc).__name__ == "DynamicLibNotFoundError"
                or "cuTensorMapEncodeTiled failed" in str(exc)), exc
    else:                                      # a driver encoded it: 128 bytes, passed by value
        assert encoded.dtype.itemsize == 128 and any(bytes(encoded))


def test_a_tensor_map_parameter_takes_a_tensor_map():
    params = KernelSource.load(HOPPER[0].source).params_of(HOPPER[0].kernel)
    assert [p.ctype for p in params[:3]] == ["kc_tensor_map", "kc_tensor_map", "kc_elem*"]
    device = object()
    is_device = lambda a: a is device                                           # noqa: E731
    a_map = TensorMap(device, 64, 64, 64, 64)
    packed = pack("k", params, (a_map, a_map, device, 64, 64, 64), lambda a: "float16", is_device)
    assert packed[0] is a_map and packed[3] == np.int32(64)
    with pytest.raises(ArgumentError, match="'a_map', kc_tensor_map.*must be a TensorMap, got object"):
        pack("k", params, (device, a_map, device, 64, 64, 64), lambda a: "float16", is_device)
    with pytest.raises(ArgumentError, match="must describe a device array"):
        pack("k", params, (TensorMap("host", 1, 1, 1, 1), a_map, device, 1, 1, 1),
             lambda a: "float16", is_device)


@pytest.mark.parametrize("rung", HOPPER, ids=lambda r: r.name)
@pytest.mark.parametrize("bf16", [0, 1])
def test_builds_for_sm90a_without_spills_and_not_for_plain_sm90(rung, bf16):
    d = rung.build(32, KC_BF16=bf16).defines
    usage = nvrtc_compile(rung.source, "sm_90a", d).resources[rung.kernel]
    assert (usage.spill_stores, usage.spill_loads, usage.stack_bytes) == (0, 0, 0)
    # what it declares, and what its launch asks for where the stages are dynamic
    assert usage.shared_bytes + rung.build(32, KC_BF16=bf16).launch_shared >= rung.shared_bytes(KC_BF16=bf16)
    with pytest.raises(CompileError, match="Instruction 'wgmma.* not supported on .target 'sm_90'"):
        nvrtc_compile(rung.source, "sm_90", d)


@pytest.mark.parametrize("rung", HOPPER, ids=lambda r: r.name)
def test_the_hip_backend_refuses_it_by_name(rung):
    """No AMD GPU is needed to see it: the refusal comes before anything is compiled (the cpu
    backend runs these rungs: tests/test_hopper_cpu.py)."""
    hip = HipBackend.__new__(HipBackend)              # its device, without a GPU's runtime
    hip.device = Device("amd", "AMD Instinct MI300X", "gfx942", lockstep_width=64, multiprocessors=304)
    with pytest.raises(NotImplementedError, match=r"needs sm_90 \(Hopper\), built for sm_90a for wgmma "
                                                  r"and TMA, which AMD GPUs do not have .* is gfx942"):
        rung.c_impl(hip)
    b200 = HipBackend.__new__(HipBackend)            # (any backend object: the rung asks its device)
    b200.device = Device("nvidia", "NVIDIA B200", "sm_100", 32, 148)
    with pytest.raises(NotImplementedError, match=r"this GPU, NVIDIA B200, is sm_100"):
        rung.c_impl(b200)


# --------------------------------------------------------------------------- on the GPU

@pytest.fixture(scope="module")
def hopper():
    from kernelcourse.device import detect
    device = detect()
    if device.vendor != "nvidia" or not device.arch.startswith("sm_9"):
        pytest.skip(f"needs an NVIDIA Hopper GPU (sm_90); this machine: {device.describe()}")
    from kernelcourse.backends import get_backend
    return get_backend("cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("rung", HOPPER, ids=lambda r: r.name)
@pytest.mark.parametrize("bf16", [0, 1])
def test_passes_every_shape_tma_can_describe(hopper, rung, bf16):
    impl = rung.c_impl(hopper, KC_BF16=bf16)
    report = verify(impl, suite=TMA_SUITE, verbose=False)
    assert report.passed, report.diagnosis
    assert impl.run.fell_back == {}, impl.run.fell_back


@pytest.mark.gpu
@pytest.mark.parametrize("rung", [r for r in HOPPER if "BLOCKS" in r.defines], ids=lambda r: r.name)
def test_a_persistent_block_walks_several_tiles(hopper, rung):
    """With one block per SM the suite's ragged shapes give each block one tile at most: three
    blocks walk them all, their rings turning on from tile to tile."""
    impl = rung.c_impl(hopper, BLOCKS=3)
    report = verify(impl, suite=TMA_SUITE, verbose=False)
    assert report.passed, report.diagnosis
    assert impl.run.fell_back == {}, impl.run.fell_back


@pytest.mark.gpu
@pytest.mark.parametrize("rung", HOPPER, ids=lambda r: r.name)
def test_passes_in_an_isolated_launch(hopper, rung):
    """Isolated (as make check runs a kernel under test), each launch runs in a child process
    whose arrays live elsewhere: the tensor maps are encoded there, from the child's copies."""
    impl = rung.c_impl(hopper, KC_BF16=1)
    with hopper.isolated():
        report = verify(impl, suite=Suite("isolated", 8, TMA_SUITE.shapes[:3]), verbose=False)
    assert report.passed, report.diagnosis


@pytest.mark.gpu
@pytest.mark.parametrize("rung", HOPPER, ids=lambda r: r.name)
def test_passes_the_gpu_suite_falling_back_where_tma_cannot(hopper, rung):
    impl = rung.c_impl(hopper)
    report = verify(impl, suite=GPU_SUITE, verbose=False)
    assert report.passed, report.diagnosis
    refused = {(s.M, s.N, s.K) for s in GPU_SUITE.shapes if s.N % 8 or s.K % 8}
    assert set(impl.run.fell_back) == refused
    assert all("16-byte boundary" in why for why in impl.run.fell_back.values())
