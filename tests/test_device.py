"""Device detection: a vendor that is absent is 'not here'; one whose driver is here but whose
runtime cannot be asked is an error, never a quiet CPU fallback."""
import pytest

from kernelcourse import device
from kernelcourse.device import Device, DeviceDetectionError

pytestmark = [pytest.mark.backends]


@pytest.fixture
def fresh_detect():
    device.detect.cache_clear()
    yield device.detect
    device.detect.cache_clear()


def failing(message):
    def probe():
        raise RuntimeError(message)
    return probe


def test_no_device_node_means_cpu_with_what_ruled_each_vendor_out(fresh_detect, monkeypatch):
    monkeypatch.setattr(device, "device_node", lambda vendor: None)
    monkeypatch.setattr(device, "_nvidia", failing("cudaErrorInsufficientDriver"))
    monkeypatch.setattr(device, "_amd", failing("hipErrorNoDevice"))
    found = fresh_detect()
    assert found.vendor == "cpu" and not found.is_gpu
    assert "cudaErrorInsufficientDriver" in found.why_not["nvidia"]
    assert "hipErrorNoDevice" in found.why_not["amd"]


@pytest.mark.parametrize("vendor, node", [("amd", "/dev/kfd"), ("nvidia", "/dev/nvidia3")])
def test_a_device_node_whose_runtime_fails_is_an_error(fresh_detect, monkeypatch, vendor, node):
    monkeypatch.setattr(device, "device_node", lambda v: node if v == vendor else None)
    monkeypatch.setattr(device, "_nvidia", failing("no CUDA runtime"))
    monkeypatch.setattr(device, "_amd", failing("TypeError: hipGetDeviceProperties() takes 1 argument"))
    with pytest.raises(DeviceDetectionError, match=f"(?s){node} exists.*{vendor.upper()} GPU.*fix: rm -rf .venv && make setup"):
        fresh_detect()


def test_nvidia_nodes_are_found_whatever_their_number(monkeypatch):
    monkeypatch.setattr(device.glob, "glob", lambda pattern: ["/dev/nvidia3"]
                        if pattern == device.DEVICE_NODES["nvidia"] else [])
    assert device.device_node("nvidia") == "/dev/nvidia3"
    assert device.device_node("amd") is None
    assert device.any_gpu_node() == "/dev/nvidia3"
    # nvidiactl and nvidia-uvm exist on machines without a GPU too; they are not GPUs.
    import fnmatch
    assert not fnmatch.fnmatch("/dev/nvidiactl", device.DEVICE_NODES["nvidia"])
    assert not fnmatch.fnmatch("/dev/nvidia-uvm", device.DEVICE_NODES["nvidia"])


def test_slug_is_the_results_file_name_of_the_device():
    assert Device("nvidia", "NVIDIA H200").slug == "nvidia-h200"
    assert Device("amd", "AMD Instinct MI300X (gfx942)").slug == "amd-instinct-mi300x-gfx942"


def test_classic_hip_python_takes_rocms_own_libraries_by_path(tmp_path, monkeypatch):
    """Where ROCm is installed, its libraries, not whatever the loader finds first."""
    import types

    from kernelcourse.backends import hip_python
    (tmp_path / "lib").mkdir()
    for name in ("libamdhip64.so", "libhipblas.so"):           # no libhiprtc.so in this ROCm
        (tmp_path / "lib" / name).write_bytes(b"")
    modules = {f"hip.{m}": types.SimpleNamespace(DLL=f"lib{lib}.so".encode())
               for lib, m in hip_python.LIBRARIES.items()}
    monkeypatch.setattr(hip_python.importlib, "import_module", modules.__getitem__)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    found = hip_python.Bindings(hip=None, hiprtc=None, generation="classic")
    hip_python._find_rocm_libraries(found)
    assert found.library_file("amdhip64") == str(tmp_path / "lib" / "libamdhip64.so")
    assert found.library_file("hipblas") == str(tmp_path / "lib" / "libhipblas.so")
    assert found.library_file("hiprtc") == "libhiprtc.so"        # left to the loader
