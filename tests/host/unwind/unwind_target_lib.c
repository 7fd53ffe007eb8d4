/* main -> unwind_mid_call (stripped libunwind_mid.so) -> its internal function -> leaf_fn
 * (this program, called back), captured in leaf_fn.
 *   unwind_target_lib CAPTURE_FILE BYTES wait|exit */
#include "capture.h"

typedef int (*unwind_callback)(const char* path, long size);
int unwind_mid_call(unwind_callback callback, const char* path, long size);

static volatile int sink;

__attribute__((noinline, noclone)) int leaf_fn(const char* path, long size) {
  volatile char pad[32];
  pad[0] = (char)size;
  UNWIND_CAPTURE();
  unwind_save(path, (uint64_t)size);
  return pad[0] + sink;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s CAPTURE_FILE BYTES wait|exit\n", argv[0]);
    return 2;
  }
  const int result = unwind_mid_call(leaf_fn, argv[1], strtol(argv[2], NULL, 0));
  unwind_wait(argv[3]);
  return result == -1000 ? 1 : 0;
}
