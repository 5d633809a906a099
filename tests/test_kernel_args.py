"""Kernel signatures are read from the source, and launches that do not match are refused."""
import numpy as np
import pytest

from kernelcourse.args import ArgumentError
from kernelcourse.backends.base import Kernel
from kernelcourse.source import KernelSource

pytestmark = [pytest.mark.backends]

SOURCE = KernelSource('''
#include "portable.h"
extern "C" __global__ void __launch_bounds__(256)
scale(const float* __restrict__ x, float* y, int n, float alpha) {}
extern "C" __global__ void halves(const f16* a, unsigned n) {}
''', "scale.cu")


class HostArrays:
    """Stands in for a device: NumPy arrays play device arrays, and launches are recorded."""

    def __init__(self):
        self.launches = []

    def dtype_of(self, array):
        return str(array.dtype)

    def is_device_array(self, value):
        return isinstance(value, np.ndarray)

    def kernel(self, name):
        return Kernel(name, SOURCE.params_of(name), None,
                      lambda *launch: self.launches.append(launch), self)


def test_signatures_are_read_with_qualifiers_and_launch_bounds():
    params = SOURCE.params_of("scale")
    assert [(p.ctype, p.name) for p in params] == [
        ("float*", "x"), ("float*", "y"), ("int", "n"), ("float", "alpha")]
    assert [p.ctype for p in SOURCE.params_of("halves")] == ["f16*", "unsigned"]


def test_launch_bounds_with_nested_parentheses_before_and_after_void():
    """A bound computed from the tile defines, as regblock.cu could write it."""
    source = KernelSource('''
extern "C" __global__ void __launch_bounds__((BM / TM) * (BN / TN))
after_void(const float* A, float* C, int M) {}
extern "C" __global__ __launch_bounds__(((BM / TM) * (BN / TN)), 2) void
before_void(float* C, int N) {}
''', "bounds.cu")
    entries = source.entry_points()
    assert list(entries) == ["after_void", "before_void"]
    assert [(p.ctype, p.name) for p in entries["after_void"]] == [
        ("float*", "A"), ("float*", "C"), ("int", "M")]
    assert [(p.ctype, p.name) for p in entries["before_void"]] == [("float*", "C"), ("int", "N")]


def test_unknown_kernel_name_lists_the_ones_that_exist():
    with pytest.raises(KeyError, match="found: scale, halves"):
        SOURCE.params_of("scal")


def test_scalars_travel_as_explicit_numpy_types():
    device = HostArrays()
    x = np.ones(4, np.float32)
    device.kernel("scale")((1,), (4,), (x, x, 4, 2))
    grid, block, args, shared = device.launches[0]
    assert (grid, block, shared) == ((1, 1, 1), (4, 1, 1), 0)
    assert type(args[2]) is np.int32 and type(args[3]) is np.float32 and args[3] == 2.0


@pytest.mark.parametrize("args, message", [
    (("x", "y", 4), "takes 4 arguments, 3 given"),
    (("x", "y", 4, 1.0, 5), "takes 4 arguments, 5 given"),
    ((7, "y", 4, 1.0), "argument 0 \\('x', float\\*\\) of scale must be a device array"),
    (("x", "y", 4.5, 1.0), "argument 2 \\('n', int\\) of scale must be an integer"),
    (("x", "y", 2**31, 1.0), "does not fit in int32"),
    (("x", "y", 4, "two"), "must be a number"),
    (("x", "d", 4, 1.0), "argument 1 \\('y', float\\*\\) of scale must hold float32, the array holds float64"),
])
def test_mismatched_arguments_are_refused_before_launch(args, message):
    device = HostArrays()
    arrays = {"x": np.ones(4, np.float32), "y": np.ones(4, np.float32), "d": np.ones(4)}
    args = tuple(arrays.get(a, a) if isinstance(a, str) and a in arrays else a for a in args)
    with pytest.raises(ArgumentError, match=message):
        device.kernel("scale")((1,), (4,), args)
    assert device.launches == []


def test_block_over_1024_threads_is_refused():
    device = HostArrays()
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="2048 threads"):
        device.kernel("scale")((1,), (64, 32), (x, x, 4, 1.0))
