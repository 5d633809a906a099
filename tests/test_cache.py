"""The disk cache of compiled kernels (kernelcourse/cache.py) shared by processes: two that
build the same kernel at once each read a whole binary and its log, and a write that fails
leaves nothing behind."""
import multiprocessing

import pytest

from kernelcourse import cache

pytestmark = [pytest.mark.compile]

SIZE = 8 << 20          # large enough that a write takes many system calls


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELCOURSE_CACHE", str(tmp_path))
    return tmp_path


def build(letter: str, rounds: int) -> None:
    """Build the same key over and over, each time a binary of one letter and its log."""
    for _ in range(rounds):
        cache.store("k", ".log", letter.encode())
        cache.store("k", ".so", letter.encode() * SIZE)


def test_processes_building_the_same_kernel_at_once_each_read_a_whole_file(fresh_cache):
    context = multiprocessing.get_context("fork")
    builders = [context.Process(target=build, args=(letter, 20)) for letter in "ab"]
    for builder in builders:
        builder.start()
    seen = set()
    while any(builder.is_alive() for builder in builders) or not seen:
        binary = cache.load("k", ".so")
        if binary is not None:
            assert len(binary) == SIZE and binary.count(binary[:1]) == SIZE, "half a file"
            seen.add(binary[:1])
    for builder in builders:
        builder.join()
        assert builder.exitcode == 0
    assert sorted(p.name for p in fresh_cache.iterdir()) == ["k.log", "k.so"]   # no temporary left


def test_a_hit_has_its_log_and_a_miss_compiles_once(fresh_cache):
    calls = []

    def compile_fn():
        calls.append(1)
        return b"binary", b"registers: 32"
    first = cache.build_once("key", ".cubin", compile_fn)
    again = cache.build_once("key", ".cubin", compile_fn)
    assert first == again == (b"binary", "registers: 32", fresh_cache / "key.cubin") and calls == [1]


def test_a_write_that_fails_leaves_no_file(fresh_cache):
    with pytest.raises(TypeError):
        cache.store("k", ".so", "text, where bytes belong")
    assert list(fresh_cache.iterdir()) == []
