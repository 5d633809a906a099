"""hip-python, whichever of its two generations is installed, behind one small adapter.

hip-python's releases follow ROCm's (6.2.x for ROCm 6.2, ..., 7.2.x for ROCm 7.2), and a
later generation, 10.x, is a shim over the `rocm-bindings-*` packages. The calls the
course makes differ between the two in three places, and only here:

  generation       versions    hipGetDeviceProperties              text fields  libraries found by
  'classic'        6.2 - 7.2   (props, device) -> (status,)        bytes        dlopen of a bare name,
                                                                                 the module's DLL global
  'rocm-bindings'  10.x        (device) -> (status, props)         str          rocm.bindings.util.paths
                                                                                 .get_library_path()

Every other call (hipMalloc, hipMemcpy, hipModuleLaunchKernel, the hiprtc and hipBLAS
functions) has the same signature in both; tests/test_hip_python_contract.py calls each one
the way the course does against the real bindings of 6.2.0, 7.2.2 and 10.0.
"""
from __future__ import annotations

import functools
import importlib
import os
import platform
from dataclasses import dataclass

FIX = ("pip install hip-python matching your ROCm (make setup pins it; see SETUP.md, "
       "'Supported ROCm / hip-python pairs')")
# hip-python installs on x86-64 Linux only: its classic releases have wheels for x86-64 alone,
# and 10.x needs the rocm-bindings-* packages, which do too. pyproject.toml's `cpu` extra asks
# for it there alone.
MACHINE = "x86_64"


def published_here() -> bool:
    """Whether hip-python installs on this machine's processor."""
    return platform.machine() == MACHINE

# The C library behind each binding, and the classic generation's module that loads it.
LIBRARIES = {"amdhip64": "chip", "hiprtc": "chiprtc", "hipblas": "chipblas"}


@dataclass(frozen=True)
class Bindings:
    """The installed hip-python: its hip and hiprtc modules and which generation it is."""

    hip: object
    hiprtc: object
    generation: str            # 'classic' or 'rocm-bindings'

    def blas(self):
        """hip-python's hipBLAS module (an extra: hip-python[libraries] on 10.x)."""
        try:
            from hip import hipblas
        except ImportError as exc:
            raise ImportError("hip-python's hipBLAS bindings are missing: pip install "
                              "'hip-python[libraries]' (matching your ROCm)") from exc
        return hipblas

    def library_file(self, library: str) -> str:
        """What the bindings will hand dlopen for `library` (a path, or a bare file name)."""
        if self.generation == "classic":
            return os.fsdecode(importlib.import_module(f"hip.{LIBRARIES[library]}").DLL)
        from rocm.bindings.util import paths
        return os.fsdecode(paths.get_library_path(library))

    def use_library(self, library: str, path: str) -> None:
        """Make the bindings load `library` from `path`. Only the first call of a library's
        functions loads it, so this must come before that."""
        if self.generation == "classic":
            importlib.import_module(f"hip.{LIBRARIES[library]}").DLL = os.fsencode(path)
        else:
            _LIBRARY_OVERRIDES[library] = path
            _route_rocm_bindings_lookups()

    def device_properties(self, device: int = 0) -> dict:
        """The properties the course reads, as plain Python values."""
        from .status import checked
        if self.generation == "classic":
            props = self.hip.hipDeviceProp_t()
            checked(self.hip.hipGetDeviceProperties(props, device), "hipGetDeviceProperties")
        else:
            props = checked(self.hip.hipGetDeviceProperties(device), "hipGetDeviceProperties")
        return {"name": _text(props.name),
                "arch": _text(props.gcnArchName).split(":")[0],  # 'gfx90a:sramecc+:xnack-'
                "lockstep_width": int(props.warpSize),
                "multiprocessors": int(props.multiProcessorCount),
                "l2_bytes": int(props.l2CacheSize),
                "shared_per_block": int(props.sharedMemPerBlock)}


def _text(value) -> str:
    """A char[] field: bytes in the classic generation, str in rocm-bindings."""
    return (value.decode(errors="replace") if isinstance(value, bytes) else str(value)).rstrip("\0")


@functools.lru_cache(maxsize=1)
def bindings() -> Bindings:
    """The installed hip-python, or an ImportError that says how to install it."""
    try:
        from hip import hip, hiprtc
    except ImportError as exc:
        if not published_here():
            raise ImportError(f"hip-python is not available on {platform.machine()}: it installs "
                              "on x86-64 Linux only, so hiprtc and the hip backend cannot run "
                              "here") from exc
        raise ImportError(f"hip-python is not installed: {FIX}") from exc
    generation = "rocm-bindings" if hip.__name__.startswith("rocm.") else "classic"
    found = Bindings(hip, hiprtc, generation)
    if generation == "classic":
        _find_rocm_libraries(found)
    return found


def _find_rocm_libraries(found: Bindings) -> None:
    """The classic generation dlopens bare names ('libamdhip64.so'), which the loader finds
    wherever its search path says: on a machine with ROCm and another HIP runtime (Debian's,
    say), perhaps the wrong one. Where ROCm is installed ($ROCM_PATH, default /opt/rocm),
    its own libraries are the ones that match this hip-python: name them by path."""
    rocm_lib = os.path.join(os.environ.get("ROCM_PATH", "/opt/rocm"), "lib")
    for library in LIBRARIES:
        installed = os.path.join(rocm_lib, os.path.basename(found.library_file(library)))
        if os.path.exists(installed):
            found.use_library(library, installed)


_LIBRARY_OVERRIDES: dict[str, str] = {}


def _route_rocm_bindings_lookups() -> None:
    """rocm-bindings asks paths.get_library_path at each library's first call; answer from
    _LIBRARY_OVERRIDES first (installed once)."""
    from rocm.bindings.util import paths
    if getattr(paths.get_library_path, "kernelcourse_routed", False):
        return
    original = paths.get_library_path

    def get_library_path(shortname, *args, **kwargs):
        if shortname in _LIBRARY_OVERRIDES:
            return os.fsencode(_LIBRARY_OVERRIDES[shortname])
        return original(shortname, *args, **kwargs)
    get_library_path.kernelcourse_routed = True
    paths.get_library_path = get_library_path
