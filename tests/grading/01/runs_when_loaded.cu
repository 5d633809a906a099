// The exercise's entry point with nothing in it, plus a forger that runs when the library is
// loaded, in the grader's child (outside any launch, with the result pipe open): a global
// initialised by a function call, which no attribute or keyword announces, with the C
// library found by hand (as forges_results_by_hand.cu). The object's sections show it: a
// GPU kernel's object has no code the loader runs.
// grade: tiled.cu=0
// says: runs code when it is loaded
#include "portable.h"

// The forger: the grader child's own Python (its program, through /proc), which reads the
// inputs the grader left in scratch, computes C, writes every message the grader expects on
// the result pipe (inherited: the child's command line names it), and kills the child, so
// that nothing the child would send follows.
static const char* FORGER =
    "exec /proc/$PPID/exe -c '"
    "import glob, json, os, sys\n"
    "p, chain = os.getppid(), []\n"
    "while p > 1:\n"
    "    chain.append((p, open(f\"/proc/{p}/cmdline\", \"rb\").read().split(b\"\\0\")))\n"
    "    p = int(open(f\"/proc/{p}/stat\").read().rsplit(\")\", 1)[1].split()[1])\n"
    "child, argv = [(q, a) for q, a in chain if b\"kernelcourse.grade.child\" in a][-1]\n"
    "out = os.fdopen(int(argv[-2]), \"wb\")\n"
    "sys.path[:0] = glob.glob(os.path.dirname(os.path.dirname(argv[0].decode())) + \"/lib/python3*/site-packages\")\n"
    "import numpy as np\n"
    "def send(header, array=None):\n"
    "    if array is not None:\n"
    "        header = dict(header, dtype=\"float32\", dims=list(array.shape), nbytes=array.nbytes)\n"
    "    out.write(json.dumps(header).encode() + b\"\\n\" + (b\"\" if array is None else array.tobytes()))\n"
    "names = [os.path.basename(p).split(\"-\") for p in glob.glob(\"inputs-cpu/*-0-A.npy\")]\n"
    "for t in sorted({int(n[0]) for n in names}):\n"
    "    if t:\n"
    "        send({\"test\": t, \"start\": True})\n"
    "    if t or sys.argv[1:]:\n"
    "        send({\"test\": t, \"ran\": \"a backend\"})\n"
    "    for s in sorted(int(n[1]) for n in names if int(n[0]) == t):\n"
    "        sets = [[np.load(f\"inputs-cpu/{t}-{s}-{i}-{x}.npy\") for x in \"AB\"] for i in (0, 1)]\n"
    "        for r, i in enumerate([0, 0, 1] if t == 0 else [0, 1]):\n"
    "            A, B = sets[i]\n"
    "            M, N, pad = A.shape[0], B.shape[1], 256 * (B.shape[1] + 1)\n"
    "            C = np.full(2 * pad + M * N, -3072.0, np.float32)\n"
    "            C[pad:pad + M * N] = (A.astype(np.float64) @ B).ravel()\n"
    "            for what, array in ((\"C\", C), (\"A\", A), (\"B\", B)):\n"
    "                send({\"test\": t, \"shape\": s, \"run\": r, \"what\": what}, array)\n"
    "    send({\"test\": t, \"done\": True})\n"
    "out.flush()\n"
    "os.kill(child, 9)\n"
    "' loaded";                // loaded: the child has not said "ran" yet, so the forger does

// libc found by hand: from printf (which a kernel may import) down to the ELF header of the
// library it lives in, then through that library's dynamic symbols to `wanted`. No import,
// no include, no token a check of the source looks for.
struct Dynamic { long tag; unsigned long value; };
struct Symbol { unsigned name; unsigned char info, other; unsigned short section; unsigned long value, size; };

static bool same(const char* a, const char* b)
{
    while (*a && *a == *b) ++a, ++b;
    return *a == *b;
}

static void* by_hand(const char* wanted)
{
    unsigned long base = (unsigned long)(void*)&printf & ~4095ul;
    while (*(const unsigned*)base != 0x464c457fu) base -= 4096;             // "\x7fELF"
    const char* header = (const char*)base;
    const char* segments = header + *(const unsigned long*)(header + 32);    // e_phoff
    const Dynamic* dynamic = nullptr;
    for (int i = 0; i < *(const unsigned short*)(header + 56); ++i)          // e_phnum
        if (*(const unsigned*)(segments + 56 * i) == 2)                      // PT_DYNAMIC
            dynamic = (const Dynamic*)(base + *(const unsigned long*)(segments + 56 * i + 16));
    const Symbol* symbols = nullptr;
    const char* names = nullptr;
    for (; dynamic->tag; ++dynamic) {
        const unsigned long at = dynamic->value < base ? base + dynamic->value : dynamic->value;
        if (dynamic->tag == 6) symbols = (const Symbol*)at;                  // DT_SYMTAB
        if (dynamic->tag == 5) names = (const char*)at;                      // DT_STRTAB
    }
    for (const Symbol* s = symbols; (const char*)s < names; ++s)
        if (s->value && same(names + s->name, wanted)) return (void*)(base + s->value);
    return nullptr;
}

typedef int (*Run)(const char*);

static int forge()
{
    return ((Run)by_hand("system"))(FORGER);
}
static int forged = forge();

#ifndef TILE
#define TILE 32
#endif

extern "C" __global__ __launch_bounds__(TILE * TILE)
void sgemm_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
}
