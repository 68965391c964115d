// Bytes a process has allocated, and their peak: loaded before everything else (LD_PRELOAD) into a benchmark's
// worker, it counts every block glibc's malloc family hands out (at its usable size) and every anonymous mmap of
// MAPPING_MIN_BYTES or more (featgraph's huge-page outputs; malloc's own large blocks are counted as blocks), so
// two libraries' peaks compare by what they asked for, apart from the program text paged in and the heap pages
// glibc keeps that the resident-set high-water mark also counts (featgraph/bench/measure.py: allocated_peak).
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <dlfcn.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/types.h>

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* block, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void* __libc_valloc(size_t size);
void* __libc_pvalloc(size_t size);
void __libc_free(void* block);
}

namespace {

const size_t MAPPING_MIN_BYTES = size_t(1) << 20;
const int MAPPING_SLOTS = 8192;  // anonymous mappings of at least MAPPING_MIN_BYTES alive at once

std::atomic<int64_t> live_bytes{0};
std::atomic<int64_t> peak_bytes{0};
std::atomic_flag mappings_lock = ATOMIC_FLAG_INIT;
void* mapped_at[MAPPING_SLOTS];
size_t mapped_bytes[MAPPING_SLOTS];

void count(int64_t change) {
  const int64_t now = live_bytes.fetch_add(change, std::memory_order_relaxed) + change;
  int64_t peak = peak_bytes.load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void* counted(void* block) {
  if (block != nullptr) count((int64_t)malloc_usable_size(block));
  return block;
}

struct MappingsLock {
  MappingsLock() {
    while (mappings_lock.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~MappingsLock() { mappings_lock.clear(std::memory_order_release); }
};

// An anonymous mapping of at least MAPPING_MIN_BYTES counted until munmap gives it back.
void* recorded(void* mapped, size_t length, int flags) {
  if (mapped == MAP_FAILED || !(flags & MAP_ANONYMOUS) || length < MAPPING_MIN_BYTES) return mapped;
  MappingsLock lock;
  for (int slot = 0; slot < MAPPING_SLOTS; ++slot) {
    if (mapped_at[slot] == nullptr) {
      mapped_at[slot] = mapped;
      mapped_bytes[slot] = length;
      count((int64_t)length);
      break;
    }
  }
  return mapped;
}

}  // namespace

extern "C" {

void* malloc(size_t size) { return counted(__libc_malloc(size)); }
void* calloc(size_t count_, size_t size) { return counted(__libc_calloc(count_, size)); }
void* memalign(size_t alignment, size_t size) { return counted(__libc_memalign(alignment, size)); }
void* aligned_alloc(size_t alignment, size_t size) { return counted(__libc_memalign(alignment, size)); }
void* valloc(size_t size) { return counted(__libc_valloc(size)); }
void* pvalloc(size_t size) { return counted(__libc_pvalloc(size)); }

int posix_memalign(void** out, size_t alignment, size_t size) {
  void* block = counted(__libc_memalign(alignment, size));
  if (block == nullptr) return ENOMEM;
  *out = block;
  return 0;
}

void free(void* block) {
  if (block != nullptr) count(-(int64_t)malloc_usable_size(block));
  __libc_free(block);
}

void* realloc(void* block, size_t size) {
  const int64_t before = block != nullptr ? (int64_t)malloc_usable_size(block) : 0;
  void* moved = __libc_realloc(block, size);
  if (moved != nullptr) {
    count((int64_t)malloc_usable_size(moved) - before);
  } else if (size == 0) {
    count(-before);  // realloc(block, 0) freed the block
  }
  return moved;
}

void* mmap(void* address, size_t length, int protection, int flags, int fd, off_t offset) {
  using Mmap = void* (*)(void*, size_t, int, int, int, off_t);
  static Mmap next = (Mmap)dlsym(RTLD_NEXT, "mmap");
  return recorded(next(address, length, protection, flags, fd, offset), length, flags);
}

void* mmap64(void* address, size_t length, int protection, int flags, int fd, off64_t offset) {
  using Mmap64 = void* (*)(void*, size_t, int, int, int, off64_t);
  static Mmap64 next = (Mmap64)dlsym(RTLD_NEXT, "mmap64");
  return recorded(next(address, length, protection, flags, fd, offset), length, flags);
}

int munmap(void* address, size_t length) {
  using Munmap = int (*)(void*, size_t);
  static Munmap next = (Munmap)dlsym(RTLD_NEXT, "munmap");
  if (length >= MAPPING_MIN_BYTES) {
    MappingsLock lock;
    for (int slot = 0; slot < MAPPING_SLOTS; ++slot) {
      if (mapped_at[slot] == address) {
        count(-(int64_t)mapped_bytes[slot]);
        mapped_at[slot] = nullptr;
        break;
      }
    }
  }
  return next(address, length);
}

int64_t featgraph_allocated_bytes() { return live_bytes.load(); }
int64_t featgraph_allocated_peak() { return peak_bytes.load(); }
void featgraph_allocated_peak_reset() { peak_bytes.store(live_bytes.load()); }
}
