"""bench.time_launches, the one timing loop under every timed thing: a fake backend whose
clock moves only as its launches say shows what the loop records around each launch, and
the cpu and Triton-interpreter backends show the wall clock standing in for events."""
import time

import numpy as np
import pytest

from kernelcourse import bench, roofline
from kernelcourse.backends import get_backend
from kernelcourse.backends.base import WallClockEvent
from kernelcourse.backends.cpu import CpuBackend
from kernelcourse.device import Device
from kernelcourse.gemm import flops
from kernelcourse.source import KernelSource
from kernelcourse.verify import GemmImpl

pytestmark = [pytest.mark.bench]


class FakeEvent:
    def __init__(self, backend):
        self.backend, self.t = backend, None

    def record(self):
        self.t = self.backend.now
        self.backend.log.append("record")


class FakeBackend:
    """A device whose clock (ms) advances by each launch's programmed duration; every call
    the timing loop makes is logged, in order."""
    label = "fake clock"

    def __init__(self, durations=()):
        self.now, self.log, self.durations = 0.0, [], list(durations)
        self.device = Device("cpu", "fake")

    def launch(self, *args):
        self.log.append(("launch", args))
        self.now += self.durations.pop(0) if self.durations else 2.0

    def synchronize(self):
        self.log.append("synchronize")

    def hold(self, ms):
        self.log.append(("hold", ms))
        self.now += ms

    def event(self):
        return FakeEvent(self)

    def elapsed_ms(self, start, stop):
        self.log.append("elapsed")
        return stop.t - start.t

    def to_device(self, host, dtype="fp32"):
        return np.array(host, copy=True)

    def copy(self, dst, src):
        self.launch()
        dst[...] = src


def launches(log):
    return [entry[1] for entry in log if isinstance(entry, tuple) and entry[0] == "launch"]


def test_each_timed_launch_gets_its_own_time_and_the_median_skips_the_warmup():
    fake = FakeBackend([100.0, 100.0, 5.0, 1.0, 3.0, 40.0, 2.0])
    run = bench.time_launches(fake, fake.launch, repeats=5, warmup=2)
    assert run.ms == [5.0, 1.0, 3.0, 40.0, 2.0]          # in launch order, warm-ups left out
    assert run.median == 3.0                               # not moved by the 40 ms outlier
    assert len(run.host_ms) == 5 and all(ms >= 0 for ms in run.host_ms)
    assert run.label == "fake clock"


def test_the_spread_is_the_10th_and_90th_percentile():
    run = bench.Launches([float(ms) for ms in (7, 3, 10, 1, 5, 9, 2, 8, 4, 6)], [0.0] * 10, "x")
    assert run.spread == (2.0, 10.0)


def test_warmup_calls_run_unheld_and_untimed_then_the_device_is_synchronized():
    fake = FakeBackend()
    bench.time_launches(fake, fake.launch, repeats=2, warmup=3)
    assert fake.log[:4] == [("launch", ())] * 3 + ["synchronize"]
    assert len(launches(fake.log)) == 3 + 2


def test_the_device_is_held_before_each_timed_launch_and_its_events():
    fake = FakeBackend()
    bench.time_launches(fake, fake.launch, repeats=3, warmup=1)
    timed = fake.log[2:2 + 4 * 3]                          # after the warm-up and its synchronize
    assert timed == [("hold", bench.HOLD_MS), "record", ("launch", ()), "record"] * 3


def test_hold_ms_0_holds_nothing():
    fake = FakeBackend()
    bench.time_launches(fake, fake.launch, repeats=3, warmup=1, hold_ms=0)
    assert not [entry for entry in fake.log if entry[0] == "hold"]


def test_times_are_read_only_after_the_last_stop_event_and_a_synchronize():
    fake = FakeBackend()
    bench.time_launches(fake, fake.launch, repeats=3)
    first_read = fake.log.index("elapsed")
    assert fake.log[first_read - 1] == "synchronize"
    assert "record" not in fake.log[first_read:]


def test_inputs_rotate_from_call_to_call_counting_the_warmup():
    fake = FakeBackend()
    bench.time_launches(fake, fake.launch, repeats=4, warmup=2, inputs=[(0,), (1,), (2,)])
    # the first timed call takes set 2, not the set 0 the last warm-up call may have left in L2
    assert launches(fake.log) == [(0,), (1,), (2,), (0,), (1,), (2,)]


def test_a_batch_is_timed_by_one_event_pair_and_shared_among_its_calls():
    fake = FakeBackend([1.0, 2.0, 3.0, 6.0, 4.0, 4.0, 4.0, 4.0])
    run = bench.time_launches(fake, fake.launch, repeats=2, hold_ms=0, batch=4)
    assert run.ms == [3.0, 4.0]
    assert fake.log.count("record") == 4 and len(launches(fake.log)) == 8
    assert len(run.host_ms) == 2


def fake_impl(fake):
    return GemmImpl("fake gemm", fake, lambda A, B, C, M, N, K: fake.launch(id(A), id(C)))


def test_time_gemm_takes_the_median_rotates_its_sets_and_passes_hold_ms_on():
    fake = FakeBackend([9.0] * 3 + [4.0, 1.0, 2.0, 8.0, 3.0])
    timing = bench.time_gemm(fake_impl(fake), 16, 16, 16, warmup=3, repeats=5, hold_ms=0.5)
    assert timing.ms == 3.0 and timing.ms_spread == (1.0, 8.0)
    assert timing.tflops == pytest.approx(flops(16, 16, 16) / 3.0 / 1e9)
    assert timing.label == "fake clock" and timing.repeats == 5 and timing.launch_ms >= 0
    assert fake.log.count(("hold", 0.5)) == 5
    calls = launches(fake.log)
    assert len(set(calls)) == min(len(calls), timing.buffers) > 1    # each set its own


def test_time_gemm_cycles_through_every_set_in_turn():
    fake = FakeBackend()
    timing = bench.time_gemm(fake_impl(fake), 16, 16, 16, warmup=10, repeats=60)
    calls = launches(fake.log)
    sets = timing.buffers
    assert len(set(calls[:sets])) == sets and calls[sets:] == calls[:len(calls) - sets]


def test_the_copy_bandwidth_is_bytes_read_and_written_over_the_median_copy():
    fake = FakeBackend([7.0] + [0.5, 0.25, 0.5])
    nbytes = 1 << 20
    assert roofline.measure_copy_bandwidth(fake, nbytes, repeats=3) == 2 * nbytes / 0.5 / 1e9
    assert fake.log.count(("hold", bench.HOLD_MS)) == 3     # held, as a GEMM's launches are


def test_the_wall_clock_event_times_what_happens_between_two_records():
    start, stop = WallClockEvent(), WallClockEvent()
    start.record()
    time.sleep(0.02)
    stop.record()
    assert 20.0 <= WallClockEvent.elapsed_ms(start, stop) < 2000.0


@pytest.fixture(scope="module")
def cpu():
    return CpuBackend(timeout_s=20)


# Any kernel with a GEMM's arguments will do: time_gemm times, it does not check.
TOUCH = KernelSource('#include "portable.h"\n'
                     'extern "C" __global__ void touch(const float* A, const float* B, float* C,\n'
                     '                                 int M, int N, int K)\n'
                     '{ C[threadIdx.x] = A[threadIdx.x] + B[threadIdx.x]; }\n', "touch.cu")


def test_the_cpu_backend_times_by_the_wall_clock_labelled_as_emulation(cpu):
    start, stop = cpu.event(), cpu.event()
    assert isinstance(start, WallClockEvent)
    start.record()
    time.sleep(0.01)
    stop.record()
    assert cpu.elapsed_ms(start, stop) == WallClockEvent.elapsed_ms(start, stop) >= 10.0
    before = dict(cpu.launches)
    kernel = cpu.compile(TOUCH, "touch")
    impl = GemmImpl("touch", cpu, lambda A, B, C, M, N, K: kernel((1,), (16,), (A, B, C, M, N, K)))
    timing = bench.time_gemm(impl, 16, 16, 16, warmup=2, repeats=3)
    assert timing.label == cpu.label == "CPU emulation (not GPU performance)"
    assert timing.ms > 0 and timing.buffers >= 2
    after = {k: n - before.get(k, 0) for k, n in cpu.launches.items() if n != before.get(k, 0)}
    assert after == {"touch": 2 + 3}        # warm-ups and timed launches; a hold launches nothing


def test_the_cpu_backend_copy_bandwidth_is_a_positive_finite_rate(cpu):
    rate = roofline.measure_copy_bandwidth(cpu, 1 << 20, repeats=3)
    assert np.isfinite(rate) and rate > 0


def test_the_triton_interpreter_times_by_the_same_wall_clock():
    triton = get_backend("triton")
    if triton.on_gpu:
        pytest.skip("Triton compiles for this machine's GPU; its events are torch's")
    start, stop = triton.event(), triton.event()
    assert isinstance(start, WallClockEvent)
    start.record()
    time.sleep(0.01)
    stop.record()
    assert triton.elapsed_ms(start, stop) >= 10.0
    assert "wall clock" in triton.label
