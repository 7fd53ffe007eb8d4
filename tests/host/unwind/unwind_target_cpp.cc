// C++ at -O2 with debug info: a function template in a namespace (demangled name), called from
// a function inlined into its caller (an inline frame from DWARF, not in the symbol table).
//   unwind_target_cpp CAPTURE_FILE BYTES wait|exit
#include <cstdio>
#include <cstdlib>

#include "capture.h"

namespace unwind_test {

volatile int sink;

template <typename T>
struct Box {
  T value;
};

template <typename T>
__attribute__((noinline, noclone)) T leaf_fn(const char* path, Box<T> box) {
  volatile char pad[64];
  pad[0] = static_cast<char>(box.value);
  UNWIND_CAPTURE();
  unwind_save(path, static_cast<uint64_t>(box.value));
  return static_cast<T>(pad[0] + sink);
}

// Inlined into outer_fn: its call to leaf_fn lies inside outer_fn's code, and only DWARF's
// DW_TAG_inlined_subroutine says it is inlined_fn's.
__attribute__((always_inline)) inline long inlined_fn(const char* path, long size) {
  const long result = leaf_fn<long>(path, Box<long>{size});
  sink = sink + static_cast<int>(result);
  return result * 3;
}

__attribute__((noinline, noclone)) long outer_fn(const char* path, long size) {
  const long result = inlined_fn(path, size);
  sink = sink + 1;
  return result + 1;
}

}  // namespace unwind_test

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s CAPTURE_FILE BYTES wait|exit\n", argv[0]);
    return 2;
  }
  const long result = unwind_test::outer_fn(argv[1], std::strtol(argv[2], nullptr, 0));
  unwind_wait(argv[3]);
  return result == -1000 ? 1 : 0;
}
