"""What of the cuda backend's fault handling runs without a GPU (the rest, with one, is in
tests/test_gpu_harness.py): CUDA's errors named in the course's words, in every spelling
CuPy and torch give them; a sticky one losing the context for every later call; and the
child process of isolated launches, stopped when it hangs and reported when it dies."""
import importlib.util
import sys

import pytest

from kernelcourse.backends import cuda, cuda_errors

pytestmark = [pytest.mark.cuda]

MISALIGNED = "misaligned address: a vector load from an address that is not a multiple of 16"


class RuntimeErrorOfCuPy(Exception):
    """What CuPy raises: its status code as an attribute, CUDA's name and text in its message."""

    def __init__(self, status: int, text: str):
        super().__init__(text)
        self.status = status


@pytest.mark.parametrize("error", [
    RuntimeErrorOfCuPy(716, "cudaErrorMisalignedAddress: misaligned address"),
    RuntimeErrorOfCuPy(716, "no words at all"),                        # the status code alone
    "CUDA_ERROR_MISALIGNED_ADDRESS: misaligned address",                # the driver API's name
    RuntimeError("CUDA error: misaligned address\nCUDA kernel errors might be asynchronously "
                 "reported at some other API call"),                    # torch's, CUDA's text only
], ids=["runtime", "status", "driver", "torch"])
def test_a_misaligned_vector_load_is_named_in_every_spelling(error):
    known = cuda_errors.cuda_error(error)
    assert known is not None and known.name == "cudaErrorMisalignedAddress" and known.sticky
    assert known.sentence.startswith(MISALIGNED)


def test_every_error_has_its_own_code_name_text_and_sentence():
    errors = cuda_errors.CUDA_ERRORS
    for field in ("code", "name", "text", "sentence"):
        assert len({getattr(e, field) for e in errors}) == len(errors), field
    for e in errors:
        assert cuda_errors.cuda_error(RuntimeErrorOfCuPy(e.code, "")) is e
        assert cuda_errors.cuda_error(f"{e.name}: {e.text}") is e
        assert cuda_errors.cuda_error(f"failed with {e.name}") is e           # its name alone, no text
        assert cuda_errors.cuda_error(f"CUDA error: {e.text}") is e
        lead = e.sentence.split(":")[0]                 # the sentence starts with CUDA's own words
        assert lead in e.text or lead.replace(" ", "") in e.name.lower(), e
    assert cuda_errors.cuda_error("CUDA error: an illegal memory access was encountered").sentence.startswith(
        "illegal memory access: ")
    assert not cuda_errors.cuda_error(RuntimeErrorOfCuPy(701, "")).sticky      # refused launch: the context lives
    assert cuda_errors.cuda_error(ValueError("shape mismatch")) is None


class Backend:
    """Stands for the cuda backend: a method that raises what CuPy would."""

    last_launch = "sgemm_regblock (grid (2, 2, 1), block (16, 16, 1))"

    @cuda_errors.named_faults
    def synchronize(self, error=None):
        if error is not None:
            raise error

    @cuda_errors.named_faults
    def to_device(self):
        return "copied"


def test_a_sticky_error_is_named_once_and_then_every_call_says_the_context_is_lost(monkeypatch):
    monkeypatch.setattr(cuda_errors, "_lost", [])
    backend = Backend()
    with pytest.raises(ValueError, match="not CUDA's"):         # anything else passes through as it is
        backend.synchronize(ValueError("not CUDA's"))
    with pytest.raises(cuda_errors.GpuFault) as refused:         # not sticky: named, and the context lives
        backend.synchronize(RuntimeErrorOfCuPy(701, "cudaErrorLaunchOutOfResources: too many"))
    assert str(refused.value).startswith("too many resources requested for launch: ")
    assert backend.to_device() == "copied" and cuda_errors._lost == []
    with pytest.raises(cuda_errors.GpuFault) as fault:
        backend.synchronize(RuntimeErrorOfCuPy(716, "cudaErrorMisalignedAddress: misaligned address"))
    said = str(fault.value)
    assert said.startswith(f"{MISALIGNED} (a float4 needs 16-byte alignment")
    assert "(cudaErrorMisalignedAddress); raised by the first CUDA call after sgemm_regblock (grid" in said
    assert "The error is sticky" in said and cuda_errors._lost == [said.split(". The error is sticky")[0]]
    with pytest.raises(cuda_errors.GpuFault) as later:
        backend.to_device()
    assert str(later.value) == ("no CUDA call can run in this process any more: its GPU context was "
                                f"lost to an earlier error: {cuda_errors._lost[0]}")


def child(monkeypatch, script: str):
    """A _LaunchChild that runs `script` (Python) in place of the launching module."""
    monkeypatch.setattr(cuda._LaunchChild, "command", (sys.executable, "-c", script))
    return cuda._LaunchChild()


def test_the_childs_answer_comes_back_through_the_pipes(monkeypatch):
    echo = ("import sys; from kernelcourse.backends.cuda import _receive, _send\n"
            "job = _receive(sys.stdin.buffer)\n"
            "_send(sys.stdout.buffer, {'allocations': [job['allocations'][0][::-1]]})")
    launcher = child(monkeypatch, echo)
    reply = launcher.run({"allocations": [bytes(range(200)) * 1000]}, 60, "k (grid (1,), block (1,))")
    assert reply == {"allocations": [(bytes(range(200)) * 1000)[::-1]]}
    launcher.close()


def test_a_child_that_hangs_is_stopped_and_one_that_dies_is_reported(monkeypatch):
    hang = child(monkeypatch, "import sys, time; sys.stdin.buffer.read(8); time.sleep(600)")
    with pytest.raises(cuda_errors.GpuFault, match=r"^hang: k \(grid \(1,\)\) did not finish within 0.5 s"):
        hang.run({"allocations": []}, 0.5, "k (grid (1,))")
    assert hang.process.returncode == -9                               # killed, not left behind
    dead = child(monkeypatch, "import sys; sys.exit(3)")
    with pytest.raises(cuda_errors.GpuFault, match=r"ended without an answer \(exit code 3\)"):
        dead.run({"allocations": []}, 60, "k (grid (1,))")


def test_the_real_child_answers_a_job_it_cannot_run_with_its_error_or_dies_saying_so():
    launcher = cuda._LaunchChild()
    job = {"module": "no-such.cubin", "kernel": "k", "shared_mem": 0, "allocations": [], "args": []}
    if importlib.util.find_spec("cupy") is None:          # a CPU machine: it dies at `import cupy`
        with pytest.raises(cuda_errors.GpuFault, match=r"ended without an answer \(exit code 1\)"):
            launcher.run(job, 60, "k")
        return
    reply = launcher.run(job, 60, "k")
    launcher.process.wait(60)
    assert set(reply) == {"error"} and reply["error"], reply     # and it has exited
    assert launcher.process.returncode == 0
    launcher.close()
