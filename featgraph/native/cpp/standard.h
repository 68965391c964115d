// The standard headers featgraph's C++ includes, compiled once per compiler, flags and CPU into a precompiled
// header in the kernel cache (featgraph/native/compiler.py: precompiled_header) and put before every source
// built there: parsing them is nine tenths of compiling a generated kernel. A header missing here is parsed
// where a source includes it, as without this file.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>
#include <omp.h>
#if defined(__SSE4_1__)
#include <immintrin.h>
#endif
