/* A shared library between main and the capture, stripped by tests/CMakeLists.txt (strip
 * --strip-all: no .symtab; .eh_frame stays, it is an allocated section): unwinding must go
 * through it, its internal function unnamed. -fomit-frame-pointer: rbp does not lead through
 * it either. */
typedef int (*unwind_callback)(const char* path, long size);

static volatile int mid_sink;

/* Internal (static, not exported): no name at all once stripped. */
__attribute__((noinline, noclone)) static int mid_internal(unwind_callback callback,
                                                           const char* path, long size) {
  const int result = callback(path, size);
  mid_sink += result;
  return result + 2;
}

__attribute__((visibility("default"))) int unwind_mid_call(unwind_callback callback,
                                                           const char* path, long size) {
  const int result = mid_internal(callback, path, size);
  mid_sink += 1;
  return result + 1;
}
