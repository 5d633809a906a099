// The course's own tiled kernel (labs/02-tiled/tiled.cu, right on every shape), included
// through the harness's include folder with the directive split by a backslash-newline, so
// that a search for "#include" on the text does not see it. Renamed as it is included, and
// called from an entry point of the file's own. Refused as a line splice; and the cpu
// backend refuses a header outside the harness's, whatever spelled the include.
// grade: tiled.cu=0
// says: tiled.cu, line 10: ends with a backslash
#include "portable.h"
#define sgemm_tiled lab_sgemm_tiled
#inc\
lude "../../labs/02-tiled/tiled.cu"
#undef sgemm_tiled

extern "C" __global__ void sgemm_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    lab_sgemm_tiled(A, B, C, M, N, K);
}
