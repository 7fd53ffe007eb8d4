/* main -> outer_fn -> leaf_fn, the registers and stack captured in leaf_fn (capture.h). Built
 * twice by tests/CMakeLists.txt: -O2 -fomit-frame-pointer without -g (rbp is a general
 * register: a frame-pointer walk cannot find the callers, CFI from .eh_frame can) and
 * -fno-omit-frame-pointer (both can).
 *   unwind_target CAPTURE_FILE BYTES wait|exit */
#include "capture.h"

static volatile int sink;

/* noclone: no leaf_fn.constprop.0 symbol; the work after each call: no tail call. */
__attribute__((noinline, noclone)) int leaf_fn(const char* path, long size) {
  /* A frame larger than 64 bytes: a 64-byte copy ends before the return address. */
  volatile char pad[256];
  pad[0] = (char)size;
  UNWIND_CAPTURE();
  unwind_save(path, (uint64_t)size);
  return pad[0] + sink;
}

__attribute__((noinline, noclone)) int outer_fn(const char* path, long size) {
  const int result = leaf_fn(path, size);
  sink += result;
  return result + 1;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s CAPTURE_FILE BYTES wait|exit\n", argv[0]);
    return 2;
  }
  const int result = outer_fn(argv[1], strtol(argv[2], NULL, 0));
  unwind_wait(argv[3]);
  return result == -1000 ? 1 : 0;
}
