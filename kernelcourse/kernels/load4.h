// load4.h: the guarded float4 load and store of the register-blocked rungs.
//
// Include it after portable.h. Every rung that reads A and B, or writes C, a float4 at a
// time does it through these two functions, so the rule for the edges lives in one place.
#pragma once

// Four consecutive floats row_ptr[col .. col+3] of a row with `limit` columns:
// one float4 load when the row is in range, 16-byte aligned and the four
// columns all exist; otherwise one guarded load per element, and 0.0f for any
// element outside the matrix, never a skipped write.
static __device__ __forceinline__ float4 load4(const float* row_ptr, int col, int limit,
                                               bool row_ok, bool aligned)
{
    if (row_ok && aligned && col + 3 < limit)
        return *reinterpret_cast<const float4*>(row_ptr + col);
    float4 v;
    v.x = (row_ok && col + 0 < limit) ? row_ptr[col + 0] : 0.0f;
    v.y = (row_ok && col + 1 < limit) ? row_ptr[col + 1] : 0.0f;
    v.z = (row_ok && col + 2 < limit) ? row_ptr[col + 2] : 0.0f;
    v.w = (row_ok && col + 3 < limit) ? row_ptr[col + 3] : 0.0f;
    return v;
}

// Four consecutive floats into row_ptr[col .. col+3] of a row with `limit` columns: one
// float4 store when the row is 16-byte aligned and the four columns all exist; otherwise
// one store per column that exists, and nothing outside the matrix.
static __device__ __forceinline__ void store4(float* row_ptr, int col, int limit, bool aligned,
                                              const float* v)
{
    if (aligned && col + 3 < limit) {
        *reinterpret_cast<float4*>(row_ptr + col) = make_float4(v[0], v[1], v[2], v[3]);
        return;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
        if (col + j < limit)
            row_ptr[col + j] = v[j];
}
