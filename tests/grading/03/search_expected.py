# Looks everywhere a grader might have left its seed or its expected answers (the
# environment, other processes' environments and command lines, the grader's memory,
# files it can reach) and returns what it found. The child holds neither, and cannot read
# the grader's memory or files: it finds nothing and scores nothing.
# grade: total=0
# says: found nothing
import os

NAMES = ("grades.csv", "results.json", "summary.json", "expected", "answers")


def _read(path, limit=1 << 16):
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return b""


def _search():
    found = [f"env {k}" for k in os.environ if "SEED" in k or "GRADE" in k]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if pid == str(os.getpid()):
            continue
        if b"GRADE_SEED" in _read(f"/proc/{pid}/environ"):
            found.append(f"the environment of process {pid}")
        if b"kernelcourse.grade\0" in _read(f"/proc/{pid}/cmdline"):     # the grader itself
            try:
                open(f"/proc/{pid}/mem", "rb").close()
                found.append(f"the memory of the grader, process {pid}")
            except OSError:
                pass
    seen = 0
    for top in ("/tmp", os.path.expanduser("~"), os.path.dirname(os.getcwd()), "/autograder"):
        for folder, _, files in os.walk(top):
            seen += 1
            found += [os.path.join(folder, f) for f in files if f in NAMES or f.endswith(".npy")
                      and not os.path.join(folder, f).startswith(os.getcwd())]
            if seen > 2000:
                break
    return found


FOUND = _search()


def _report(**args):
    return "found nothing" if not FOUND else "found: " + "; ".join(FOUND[:5])


gemm_flops = naive_bytes = naive_intensity = tiled_bytes = tiled_intensity = _report
ridge_point = which_side = threads_for_tile = smallest_tile_to_cross = ridge_shift_factor = _report
