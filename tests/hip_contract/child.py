"""One contract run: the course's HIP code against one installed hip-python, the stub beneath.

Run by tests/test_hip_python_contract.py in a fresh process (a binding loads its library
once per process) as `python child.py STUB_LIBRARY`, with the hip-python under test first
on PYTHONPATH. It drives the real code paths (device detection, the hip backend's copies,
compile, launch, events and hipBLAS) and prints, as JSON, what each call handed the stub
(or, where hiprtc is missing, which compiler and the command that adds it).
"""
import ctypes
import gc
import json
import struct
import sys
from pathlib import Path

import numpy as np

STUB = sys.argv[1]
KERNEL = Path(__file__).resolve().parent.parent / "kernels" / "mixed_args.cu"
# What the stub's hipGetDeviceProperties reports: an MI250X-like GPU that Debian's ROCm 5.2
# hiprtc can compile for (gfx90a).
PROPERTIES = {"name": "AMD Instinct MI250X", "gcnArchName": "gfx90a:sramecc+:xnack-",
              "warpSize": 64, "multiProcessorCount": 110, "l2CacheSize": 8 << 20,
              "sharedMemPerBlock": 64 << 10}


def properties_image(hip):
    """The bytes of a hipDeviceProp_t holding PROPERTIES, laid out as this binding sees it.

    The binding's char[] fields cannot be set from Python, so each field's offset is found
    by writing a marker at every 4-byte offset of a zeroed struct and reading the field back
    through the binding's own getter.
    """
    props = hip.hipDeviceProp_t()
    address, size = int(props), props.c_sizeof()

    def text(value):
        return value.decode() if isinstance(value, bytes) else str(value)

    image = bytearray(size)
    for field, value in PROPERTIES.items():
        marker = b"Zq\0" if isinstance(value, str) else struct.pack("<i", 0x5A5A5A)
        for offset in range(0, size - len(marker), 4):
            ctypes.memset(address, 0, size)
            ctypes.memmove(address + offset, marker, len(marker))
            got = getattr(props, field)
            if (text(got) == "Zq") if isinstance(value, str) else (int(got) == 0x5A5A5A):
                raw = value.encode() + b"\0" if isinstance(value, str) else struct.pack("<i", value)
                image[offset:offset + len(raw)] = raw
                break
        else:
            raise AssertionError(f"hipDeviceProp_t.{field} found at no offset")
    return bytes(image)


def main():
    import kernelcourse  # noqa: F401
    from kernelcourse.backends import hip_python
    from kernelcourse.backends.compile_only import amdgpu_metadata, hiprtc_version

    found = hip_python.bindings()
    facts = {"generation": found.generation, "hip_module": found.hip.__name__,
             "hiprtc": hiprtc_version()}           # resolves the real hiprtc first
    for library in ("amdhip64", "hipblas"):
        found.use_library(library, STUB)
    stub = ctypes.CDLL(STUB)                        # the same loaded object the bindings use
    stub.stub_record.restype = ctypes.c_char_p
    image = properties_image(found.hip)
    stub.stub_set_properties(image, ctypes.c_size_t(len(image)))

    from kernelcourse.backends.hip import HipBackend
    from kernelcourse.device import detect
    device = detect()
    facts["device"] = {k: getattr(device, k) for k in ("vendor", "name", "arch", "lockstep_width",
                                                       "multiprocessors", "l2_bytes", "shared_per_block")}
    backend = HipBackend()

    # Copies: the stub's memory is host memory, so a round trip must give the data back.
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    dx, dy = backend.to_device(x), backend.to_device(np.zeros_like(x))
    facts["round_trip_equal"] = bool(np.array_equal(backend.to_host(dx), x))
    facts["view_offset_bytes"] = backend.view(dy, 10, (5,)).pointer - dy.pointer

    # Compile (real hiprtc) and launch (the stub records the packed argument buffer).
    kernel = backend.compile(KERNEL, "mixed_args")
    kernel((8, 1, 1), (128, 1, 1), (np.int32(1000), dy, np.float32(2.5), dx, np.int32(1)),
           shared_mem=256)
    buffer = ctypes.POINTER(ctypes.c_ubyte)()
    size = stub.stub_last_arguments(ctypes.byref(buffer))
    facts["arguments"] = bytes(buffer[:size]).hex()
    from kernelcourse.backends.compile_only import hip_compile
    metadata = amdgpu_metadata(hip_compile(KERNEL, "gfx90a").binary)
    facts["metadata_args"] = [(a[".offset"], a[".size"], a[".value_kind"])
                              for a in metadata["amdhsa.kernels"][0][".args"]]
    facts["pointers"] = {"y": dy.pointer, "x": dx.pointer}

    # Events.
    start, stop = backend.event(), backend.event()
    start.record()
    stop.record()
    facts["elapsed_ms"] = backend.elapsed_ms(start, stop)
    facts["events"] = {"start": int(start.event), "stop": int(stop.event)}
    backend.synchronize()

    # hipBLAS, both precisions: row-major C = A @ B read column-major as C^T = B^T A^T.
    M, N, K = 3, 5, 7
    gemm_pointers = {}
    for dtype in ("fp32", "fp16"):
        A, B = backend.to_device(np.ones((M, K)), dtype), backend.to_device(np.ones((K, N)), dtype)
        C = backend.to_device(np.zeros((M, N)), dtype)
        backend.library_gemm(dtype)(A, B, C)
        gemm_pointers[dtype] = {"A": A.pointer, "B": B.pointer, "C": C.pointer}
    facts["gemm"] = {"M": M, "N": N, "K": K, "pointers": gemm_pointers}
    facts["allocations"] = [a.pointer for a in (dx, dy)]

    # Everything the course created is given back when its owner goes: the finalizers call
    # hipFree, hipEventDestroy, hipModuleUnload and hipblasDestroy (their errors would only
    # be printed, so they are collected here and reported).
    unraisable = []
    sys.unraisablehook = lambda info: unraisable.append(repr(info.exc_value))
    del kernel, start, stop, dx, dy, A, B, C, backend
    gc.collect()
    facts["unraisable"] = unraisable
    facts["launch_param_keys"] = [int(found.hip.HIP_LAUNCH_PARAM_BUFFER_POINTER),
                                  int(found.hip.HIP_LAUNCH_PARAM_BUFFER_SIZE),
                                  int(found.hip.HIP_LAUNCH_PARAM_END)]
    facts["record"] = stub.stub_record().decode().splitlines()
    print(json.dumps(facts))


if __name__ == "__main__":
    from kernelcourse.backends.compile_only import CompilerNotFound
    try:
        main()
    except CompilerNotFound as missing:     # the parent turns this into its own CompilerNotFound
        print(json.dumps({"compiler_missing": missing.compiler, "reason": missing.reason,
                          "fix": missing.fix}))
