"""Contract tests: the course's HIP code against the real bindings of every supported hip-python.

No AMD GPU is lent to the course's CI, so the HIP runtime and hipBLAS are replaced by a stub
library (tests/hip_contract/stub_hip.c) and nothing else: device detection, the hip backend's
copies, compile (real hiprtc), launch, events and hipBLAS calls all go through the real
hip-python of each version in tests/hip_contract/versions.txt, with the exact arguments the
course passes, and the stub records what arrived at the C functions. A call whose arguments
do not match a binding's signature fails here, in that version's run.

`make test` installs each version under build/hip-python/ (`make hip-python-versions`). hip-python
installs on x86-64 Linux only: on any other machine the contract is a missing compiler
(tests/conftest.py: skipped, or a failure where the compilers are required).
"""
import json
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcourse.backends import hip_python
from kernelcourse.backends.compile_only import CompilerNotFound

pytestmark = [pytest.mark.hip]

HERE = Path(__file__).resolve().parent / "hip_contract"
REPO = HERE.parent.parent
INSTALLS = REPO / "build" / "hip-python"
REQUIREMENTS = [line.strip() for line in (HERE / "versions.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
GENERATION = {"6": "classic", "7": "classic", "10": "rocm-bindings"}
HIPBLAS_OP_N = 111          # hipBLAS's value for "not transposed"
HIPMEMCPY_HOST_TO_DEVICE, HIPMEMCPY_DEVICE_TO_HOST = 1, 2


def version_of(requirement: str) -> str:
    return requirement.split("==")[1]


@pytest.fixture(scope="session")
def stub_library(tmp_path_factory):
    """The stub compiled with the system C compiler (CI has gcc; its absence is a failure)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler, "no C compiler (cc or gcc) to build the HIP stub: apt-get install gcc"
    library = tmp_path_factory.mktemp("stub") / "libstub_hip.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-Wno-unused-parameter",
                    str(HERE / "stub_hip.c"), "-o", str(library)], check=True)
    return library


@pytest.fixture(scope="session", params=REQUIREMENTS, ids=version_of)
def contract(request, stub_library, tmp_path_factory):
    """What one hip-python version's run handed the stub (child.py's JSON)."""
    require_hip_python_wheels()
    version = version_of(request.param)
    install = INSTALLS / version
    assert (install / "hip" / "__init__.py").is_file(), (
        f"hip-python {version} is not installed under {install.relative_to(REPO)}: "
        "run `make hip-python-versions` (make test does it)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(install), str(REPO)]),
           "KERNELCOURSE_CACHE": str(tmp_path_factory.mktemp("cache"))}
    child = subprocess.run([sys.executable, str(HERE / "child.py"), str(stub_library)],
                           capture_output=True, text=True, env=env, timeout=300)
    assert child.returncode == 0, f"hip-python {version}: the contract run failed:\n{child.stderr[-4000:]}"
    facts = json.loads(child.stdout.splitlines()[-1])
    if "compiler_missing" in facts:         # the launch test needs a real hiprtc compile
        raise CompilerNotFound(facts["reason"], facts["compiler_missing"], facts["fix"])
    facts["version"] = version
    facts["calls"] = [_parse(line) for line in facts["record"]]
    return facts


def require_hip_python_wheels():
    """Where hip-python does not install, `make hip-python-versions` installs none."""
    if not hip_python.published_here():
        raise CompilerNotFound(f"hip-python installs on x86-64 Linux only, not on "
                               f"{platform.machine()}", "hip-python", "run it on an x86-64 Linux machine")


def _parse(line: str) -> tuple[str, dict]:
    """'hipMemcpy dst=0x1 size=4 kind=1' -> ('hipMemcpy', {'dst': '0x1', 'size': '4', ...})"""
    name, *fields = line.split()
    return name, dict(field.split("=", 1) for field in fields if "=" in field)


def calls(facts, name: str) -> list[dict]:
    return [fields for called, fields in facts["calls"] if called == name]


def address(text: str) -> int:
    return 0 if text == "(nil)" else int(text, 16)


def test_the_installed_generation_is_recognised(contract):
    assert contract["generation"] == GENERATION[contract["version"].split(".")[0]]
    assert contract["hip_module"] == ("hip.hip" if contract["generation"] == "classic"
                                      else "rocm.bindings.hip")


def test_detection_reaches_the_property_call_and_reads_every_field(contract):
    assert calls(contract, "hipGetDeviceCount")
    assert calls(contract, "hipGetDeviceProperties") == [{"device": "0"}]
    assert contract["device"] == {"vendor": "amd", "name": "AMD Instinct MI250X", "arch": "gfx90a",
                                  "lockstep_width": 64, "multiprocessors": 110,
                                  "l2_bytes": 8 << 20, "shared_per_block": 64 << 10}


def test_copies_pass_destination_source_size_and_direction(contract):
    assert contract["round_trip_equal"]
    uploads = [c for c in calls(contract, "hipMemcpy") if c["kind"] == str(HIPMEMCPY_HOST_TO_DEVICE)]
    downloads = [c for c in calls(contract, "hipMemcpy") if c["kind"] == str(HIPMEMCPY_DEVICE_TO_HOST)]
    x = contract["pointers"]["x"]
    assert address(uploads[0]["dst"]) == x and uploads[0]["size"] == "4000"
    assert address(downloads[0]["src"]) == x and downloads[0]["size"] == "4000"
    assert contract["view_offset_bytes"] == 10 * 4


def test_the_module_is_loaded_from_the_code_object_and_the_kernel_found_by_name(contract):
    assert calls(contract, "hipModuleLoadData") == [{"elf": "1"}]
    assert [c["name"] for c in calls(contract, "hipModuleGetFunction")] == ["mixed_args"]


def test_launch_passes_grid_block_and_one_packed_buffer(contract):
    launch, = calls(contract, "hipModuleLaunchKernel")
    assert (launch["grid"], launch["block"], launch["shared"]) == ("8,1,1", "128,1,1", "256")
    assert address(launch["stream"]) == 0 and address(launch["params"]) == 0
    # The binding's constants are HIP's documented ones (the stub refuses any other key).
    assert contract["launch_param_keys"] == [1, 2, 3]     # BUFFER_POINTER, BUFFER_SIZE, END
    # The arguments end at byte 36; the buffer is sizeof the C struct holding them, 40, the
    # size HIP's own examples pass (the runtime adds the hidden arguments itself).
    assert int(launch["buffer_size"]) == 40


def test_each_argument_sits_at_the_offset_the_compiler_chose(contract):
    """mixed_args(int n, float* y, float a, const float* x, int stride) with (1000, y, 2.5, x, 1):
    the pointers after an int and a float start 4 bytes of padding later."""
    buffer = bytes.fromhex(contract["arguments"])
    explicit = [(offset, size) for offset, size, kind in contract["metadata_args"]
                if not kind.startswith("hidden")]
    expected = [struct.pack("<i", 1000), struct.pack("<Q", contract["pointers"]["y"]),
                struct.pack("<f", 2.5), struct.pack("<Q", contract["pointers"]["x"]),
                struct.pack("<i", 1)]
    assert [offset for offset, _ in explicit] == [0, 8, 16, 24, 32]   # what the compiler chose
    assert len(explicit) == len(expected)
    for (offset, size), value in zip(explicit, expected):
        assert size == len(value)
        assert buffer[offset:offset + size] == value, f"argument at offset {offset}"


def test_events_are_recorded_on_the_default_stream_and_read_start_to_stop(contract):
    start, stop = contract["events"]["start"], contract["events"]["stop"]
    created = [fields for name, fields in contract["calls"] if name == "hipEventCreate"]
    assert len(created) == 2
    records = calls(contract, "hipEventRecord")
    assert [(address(c["event"]), address(c["stream"])) for c in records] == [(start, 0), (stop, 0)]
    assert [address(c["event"]) for c in calls(contract, "hipEventSynchronize")] == [stop]
    elapsed, = calls(contract, "hipEventElapsedTime")
    assert (address(elapsed["start"]), address(elapsed["stop"])) == (start, stop)
    assert contract["elapsed_ms"] == pytest.approx(0.25)


def test_every_handle_is_given_back_to_the_call_that_frees_it(contract):
    assert contract["unraisable"] == []
    freed = {address(c["pointer"]) for c in calls(contract, "hipFree")}
    assert set(contract["allocations"]) <= freed
    for routine in ("fp32", "fp16"):
        assert set(contract["gemm"]["pointers"][routine].values()) <= freed
    assert [address(c["event"]) for c in calls(contract, "hipEventDestroy")] \
        == [contract["events"]["start"], contract["events"]["stop"]]
    assert [c["module"] for c in calls(contract, "hipModuleUnload")] == ["0x5100"]
    assert [c["handle"] for c in calls(contract, "hipblasDestroy")] == ["0xb1a5"]


@pytest.mark.parametrize("routine, dtype, one", [("hipblasSgemm", "fp32", "1"),
                                                ("hipblasHgemm", "fp16", "0x3c00")])
def test_library_gemm_reads_row_major_as_the_transposed_column_major_product(contract, routine,
                                                                             dtype, one):
    gemm = contract["gemm"]
    M, N, K, p = gemm["M"], gemm["N"], gemm["K"], gemm["pointers"][dtype]
    call, = calls(contract, routine)
    assert call["handle"] == "0xb1a5"                      # the one hipblasCreate gave
    assert (call["transa"], call["transb"]) == (str(HIPBLAS_OP_N), str(HIPBLAS_OP_N))
    # C^T (N x M) = B^T (N x K, leading dimension N) times A^T (K x M, leading dimension K)
    assert (int(call["m"]), int(call["n"]), int(call["k"])) == (N, M, K)
    assert (address(call["A"]), int(call["lda"])) == (p["B"], N)
    assert (address(call["B"]), int(call["ldb"])) == (p["A"], K)
    assert (address(call["C"]), int(call["ldc"])) == (p["C"], N)
    assert call["alpha"] == one and call["beta"] in ("0", "0x0000")


def test_the_oldest_and_newest_classic_releases_and_the_shim_are_all_checked():
    versions = [version_of(r) for r in REQUIREMENTS]
    for series in ("6.2.", "7.2.", "10."):
        assert any(v.startswith(series) for v in versions), f"no hip-python {series}x in versions.txt"



@pytest.mark.parametrize("machine", ["aarch64", "riscv64"])
def test_elsewhere_than_x86_64_the_contract_is_a_missing_compiler(monkeypatch, machine):
    monkeypatch.setattr(platform, "machine", lambda: machine)
    with pytest.raises(CompilerNotFound) as missing:
        require_hip_python_wheels()
    assert missing.value.compiler == "hip-python" and machine in missing.value.reason


def test_on_x86_64_the_contract_runs(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    require_hip_python_wheels()
