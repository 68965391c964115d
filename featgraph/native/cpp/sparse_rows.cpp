// A dense matrix's nonzeros as compressed rows, and the linear layer's two products over them
// (featgraph/backends/cpu/sparse_rows.py). The source typedefs T (float or double, the data's type) and the
// prelude before this text, and defines FG_FORM, one of:
#define FG_COMPRESS 0        // the nonzeros of x (n x k), row by row in column order, and each row's count
#define FG_PRODUCT 1         // out[r, :] = sum over row r's nonzeros (c, v) of v * wt[c, :]   (x @ wt, wt k x m)
#define FG_WEIGHT_GRADIENT 2 // dwt[c, :] = sum over the nonzeros (r, c, v) of v * g[r, :]     (x^T @ g, g n x m)
// arg: rows n, width (k for COMPRESS, m for the products), threads, then COMPRESS's capacity per thread or
// WEIGHT_GRADIENT's k.
// NaN counts as nonzero.
#include <immintrin.h>
#include <omp.h>
constexpr int64_t FG_CHUNK = 16;  // a chunk is tested at once: most chunks of a sparse row hold no nonzero

// Appends row's nonzeros after position at (of capacity); returns the new position, or -1 past capacity
// (checked per chunk of 16, the room the vector stores below need).
static inline int64_t fg_compress_row(const T* __restrict__ row, int64_t width, int32_t* __restrict__ cols,
                                      T* __restrict__ vals, int64_t at, int64_t capacity) {
#if defined(__AVX512F__)
  if constexpr (sizeof(T) == 4) {  // compare, compress in registers, store 16 lanes (of which popcount count)
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int64_t start = 0; start < width; start += FG_CHUNK) {
      const int64_t left = width - start;
      const __mmask16 inside = left >= FG_CHUNK ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
      const __m512 v = _mm512_maskz_loadu_ps(inside, row + start);
      const __mmask16 nonzero = _mm512_mask_cmp_ps_mask(inside, v, _mm512_setzero_ps(), _CMP_NEQ_UQ);  // NaN too
      if (at + FG_CHUNK > capacity) return -1;  // no branch on the mask: which chunks hold nonzeros is random
      _mm512_storeu_ps(vals + at, _mm512_maskz_compress_ps(nonzero, v));
      const __m512i columns = _mm512_add_epi32(lanes, _mm512_set1_epi32((int32_t)start));
      _mm512_storeu_si512(cols + at, _mm512_maskz_compress_epi32(nonzero, columns));
      at += __builtin_popcount((unsigned)nonzero);
    }
    return at;
  }
#endif
  for (int64_t start = 0; start < width; start += FG_CHUNK) {
    const int64_t stop = start + FG_CHUNK < width ? start + FG_CHUNK : width;
    int any = 0;
    #pragma omp simd reduction(| : any)
    for (int64_t j = start; j < stop; ++j) any |= !(row[j] == (T)0);
    if (!any) continue;
    if (at + FG_CHUNK > capacity) return -1;
    for (int64_t j = start; j < stop; ++j) {
      if (!(row[j] == (T)0)) {
        cols[at] = (int32_t)j;
        vals[at++] = row[j];
      }
    }
  }
  return at;
}

extern "C" void run(void** ptr, const int64_t* arg) {
  const int64_t n = arg[0], width = arg[1];
  const int threads = (int)arg[2];
#if FG_FORM == FG_COMPRESS
  // thread t takes rows [n t / nt, n (t + 1) / nt) and writes their nonzeros at t * capacity in cols and vals;
  // used[t] says how many, or -1 where they would pass capacity (the caller then multiplies densely)
  const T* __restrict__ x = (const T*)ptr[0];
  int64_t* __restrict__ row_nnz = (int64_t*)ptr[1];
  int32_t* __restrict__ cols = (int32_t*)ptr[2];
  T* __restrict__ vals = (T*)ptr[3];
  int64_t* __restrict__ used = (int64_t*)ptr[4];
  const int64_t capacity = arg[3];
  #pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
    int32_t* __restrict__ my_cols = cols + t * capacity;
    T* __restrict__ my_vals = vals + t * capacity;
    int64_t at = 0;
    for (int64_t r = lo; r < hi && at >= 0; ++r) {
      const int64_t row_start = at;
      at = fg_compress_row(x + r * width, width, my_cols, my_vals, at, capacity);
      if (at >= 0) row_nnz[r] = at - row_start;
    }
    used[t] = at;
  }
#elif FG_FORM == FG_PRODUCT
  const int64_t* __restrict__ row_ptr = (const int64_t*)ptr[0];
  const int32_t* __restrict__ cols = (const int32_t*)ptr[1];
  const T* __restrict__ vals = (const T*)ptr[2];
  const T* __restrict__ wt = (const T*)ptr[3];
  T* __restrict__ out = (T*)ptr[4];
  #pragma omp parallel for schedule(dynamic, 64) num_threads(threads)
  for (int64_t r = 0; r < n; ++r) {
    T* __restrict__ o = out + r * width;
    #pragma omp simd
    for (int64_t f = 0; f < width; ++f) o[f] = 0;
    for (int64_t j = row_ptr[r]; j < row_ptr[r + 1]; ++j) {
      const T v = vals[j];
      const T* __restrict__ w = wt + (int64_t)cols[j] * width;
      #pragma omp simd
      for (int64_t f = 0; f < width; ++f) o[f] += v * w[f];
    }
  }
#else
  // thread t sums its rows' share into dwt (t = 0) or its own zeroed k x m slice of scratch, then every thread
  // adds the slices' part of the k x m elements it owns into dwt
  const int64_t* __restrict__ row_ptr = (const int64_t*)ptr[0];
  const int32_t* __restrict__ cols = (const int32_t*)ptr[1];
  const T* __restrict__ vals = (const T*)ptr[2];
  const T* __restrict__ g = (const T*)ptr[3];
  T* __restrict__ dwt = (T*)ptr[4];
  T* __restrict__ scratch = (T*)ptr[5];
  const int64_t total = arg[3] * width;  // k x m
  #pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    T* __restrict__ acc = t == 0 ? dwt : scratch + (t - 1) * total;
    for (int64_t r = n * t / nt; r < n * (t + 1) / nt; ++r) {
      const T* __restrict__ gr = g + r * width;
      for (int64_t j = row_ptr[r]; j < row_ptr[r + 1]; ++j) {
        const T v = vals[j];
        T* __restrict__ d = acc + (int64_t)cols[j] * width;
        #pragma omp simd
        for (int64_t f = 0; f < width; ++f) d[f] += v * gr[f];
      }
    }
    #pragma omp barrier
    const int64_t lo = total * t / nt, hi = total * (t + 1) / nt;
    for (int64_t s = 1; s < nt; ++s) {
      const T* __restrict__ part = scratch + (s - 1) * total;
      #pragma omp simd
      for (int64_t i = lo; i < hi; ++i) dwt[i] += part[i];
    }
  }
#endif
}
