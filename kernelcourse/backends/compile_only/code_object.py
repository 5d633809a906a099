"""Reading an AMD code object (an ELF file) with no LLVM tools: its kernels' metadata.

The compiler stores a MessagePack map in an ELF note owned by 'AMDGPU': per kernel, its
VGPRs, SGPRs, LDS, scratch, spills and the offset and size of every argument. A few lines
of `struct` read it, so a machine with only hip-python and the HIP runtime can too.
"""
from __future__ import annotations

import struct

from .build import ResourceUsage, required


def code_object_usage(code: bytes, target: str) -> dict[str, ResourceUsage]:
    """Each kernel's VGPRs, SGPRs, LDS, scratch and spills, from an AMD code object's metadata."""
    usage = {}
    for kernel in amdgpu_metadata(code)["amdhsa.kernels"]:
        name = kernel[".name"]

        def field(key: str) -> int:
            return required(kernel, key, f"the metadata of kernel {name}")
        usage[name] = ResourceUsage(
            target, name, field(".vgpr_count"), field(".group_segment_fixed_size"),
            field(".vgpr_spill_count"), field(".sgpr_spill_count"),
            field(".private_segment_fixed_size"), field(".sgpr_count"))
    return usage


_SHT_NOTE = 7                 # ELF section type of notes
_NT_AMDGPU_METADATA = 32      # note type of the code object's metadata (code object v3 and later)


def amdgpu_metadata(code: bytes) -> dict:
    """The metadata map of an AMD code object (an ELF file), as `llvm-readelf --notes` shows it.

    The compiler stores it as MessagePack in a note owned by 'AMDGPU'. Reading it here takes
    a few lines of `struct` and needs no LLVM tools, which a machine with only hip-python
    and the HIP runtime may lack.
    """
    if code[:5] != b"\x7fELF\x02":
        raise ValueError("not a 64-bit ELF file: expected an AMD code object")
    table, = struct.unpack_from("<Q", code, 0x28)                  # e_shoff
    entry_size, count = struct.unpack_from("<HH", code, 0x3A)      # e_shentsize, e_shnum
    for header in range(table, table + entry_size * count, entry_size):
        kind, = struct.unpack_from("<I", code, header + 4)         # sh_type
        start, size = struct.unpack_from("<QQ", code, header + 24)  # sh_offset, sh_size
        if kind != _SHT_NOTE:
            continue
        note = start
        while note < start + size:        # each note: sizes, type, owner, description
            owner_size, desc_size, note_type = struct.unpack_from("<III", code, note)
            owner = code[note + 12:note + 12 + owner_size].rstrip(b"\0")
            desc = note + 12 + -(-owner_size // 4) * 4             # fields are 4-byte aligned
            if owner == b"AMDGPU" and note_type == _NT_AMDGPU_METADATA:
                return _msgpack(code, desc)[0]
            note = desc + -(-desc_size // 4) * 4
    raise ValueError("the code object carries no AMDGPU metadata note")


# The MessagePack formats a code object's metadata uses: type byte -> struct format of a
# number, or of the length that precedes a string, byte string, array or map.
_MSGPACK_CONSTANTS = {0xC0: None, 0xC2: False, 0xC3: True}
_MSGPACK_NUMBERS = {0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
                    0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
_MSGPACK_SIZED = {0xC4: (">B", "bin"), 0xC5: (">H", "bin"), 0xC6: (">I", "bin"),
                  0xD9: (">B", "str"), 0xDA: (">H", "str"), 0xDB: (">I", "str"),
                  0xDC: (">H", "array"), 0xDD: (">I", "array"),
                  0xDE: (">H", "map"), 0xDF: (">I", "map")}


def _msgpack(data: bytes, pos: int):
    """Decode the MessagePack value at data[pos]; return it and the position after it."""
    tag = data[pos]
    pos += 1
    if tag <= 0x7F:                                    # small non-negative integer
        return tag, pos
    if tag >= 0xE0:                                    # small negative integer
        return tag - 0x100, pos
    if tag in _MSGPACK_CONSTANTS:
        return _MSGPACK_CONSTANTS[tag], pos
    if tag in _MSGPACK_NUMBERS:
        fmt = _MSGPACK_NUMBERS[tag]
        return struct.unpack_from(fmt, data, pos)[0], pos + struct.calcsize(fmt)
    if tag <= 0x8F:                                    # the length is in the type byte
        kind, length = "map", tag & 0x0F
    elif tag <= 0x9F:
        kind, length = "array", tag & 0x0F
    elif tag <= 0xBF:
        kind, length = "str", tag & 0x1F
    elif tag in _MSGPACK_SIZED:
        fmt, kind = _MSGPACK_SIZED[tag]
        length = struct.unpack_from(fmt, data, pos)[0]
        pos += struct.calcsize(fmt)
    else:
        raise ValueError(f"MessagePack type 0x{tag:02x} is not used by AMDGPU metadata")
    if kind in ("str", "bin"):
        raw = bytes(data[pos:pos + length])
        return (raw.decode() if kind == "str" else raw), pos + length
    items = []
    for _ in range(2 * length if kind == "map" else length):
        item, pos = _msgpack(data, pos)
        items.append(item)
    return (dict(zip(items[::2], items[1::2])) if kind == "map" else items), pos
