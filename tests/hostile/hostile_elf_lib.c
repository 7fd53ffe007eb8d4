/* The library the hostile_elf test turns into hostile ELF files (tests/hostile/hostile_elf.py):
 * built -O2 -g without frame pointers, so that its frames need its CFI and its names its
 * symbol table or DWARF; the test copies it and rewrites the copies (debuglinks, truncated and
 * compressed sections, cyclic DWARF). hostile_register registers `size` bytes through
 * libibverbs (the fake one), so that the MR probes capture a stack through this library. */
#include <infiniband/verbs.h>
#include <stdlib.h>

volatile long hostile_sink;

__attribute__((noinline)) static struct ibv_mr* hostile_inner(void* buffer, size_t size) {
  struct ibv_mr* mr = ibv_reg_mr(NULL, buffer, size, IBV_ACCESS_LOCAL_WRITE);
  hostile_sink += (long)size; /* not a tail call: a frame of its own */
  return mr;
}

int hostile_register(size_t size) {
  void* buffer = malloc(size);
  if (!buffer || !hostile_inner(buffer, size)) return 1;
  hostile_sink += 1;
  return 0;
}
