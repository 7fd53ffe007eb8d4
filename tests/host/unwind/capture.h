/* The self-capture seam of the unwinder's host test (tests/host/dwarf_unwind.py): a program
 * takes what the BPF capture takes at an event, its own user registers (DWARF numbering,
 * sys/dwarf_unwinder.h) and a copy of its stack from SP upwards, writes them to a file and
 * waits, so that unwind_cli can unwind the copy against the live process's modules.
 *
 * File: 17 little-endian 64-bit registers (0 rax ... 7 rsp, 8..15 r8..r15, 16 rip), then the
 * stack bytes. Only what unwinding needs is captured: rsp, rip, and the callee-saved rbx, rbp
 * and r12-r15 (CFI restores the callers' from these); the others are written as 0. */
#ifndef RDMASCOPE_TESTS_UNWIND_CAPTURE_H
#define RDMASCOPE_TESTS_UNWIND_CAPTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t unwind_regs[17];
static uint8_t unwind_stack[64 << 10];

/* In the function whose frame is the innermost: rip is the address of the movq after the leaq,
 * inside the same function, with the same rsp, so the function's CFI row at rip describes
 * exactly these registers. No push or pop here: rsp is the function's own. */
#define UNWIND_CAPTURE()         \
  __asm__ volatile(              \
      "movq %%rbx, 24(%0)\n\t"   \
      "movq %%rbp, 48(%0)\n\t"   \
      "movq %%rsp, 56(%0)\n\t"   \
      "movq %%r12, 96(%0)\n\t"   \
      "movq %%r13, 104(%0)\n\t"  \
      "movq %%r14, 112(%0)\n\t"  \
      "movq %%r15, 120(%0)\n\t"  \
      "leaq 0(%%rip), %%rax\n\t" \
      "movq %%rax, 128(%0)\n\t"  \
      :                          \
      : "r"(unwind_regs)         \
      : "rax", "memory")

/* The end of the [stack] mapping: a copy of `size` bytes must not read past it (the BPF
 * capture has the same bound: bpf_probe_read_user fails there). */
static uint64_t unwind_stack_end(uint64_t sp) {
  FILE* maps = fopen("/proc/self/maps", "r");
  char line[512];
  uint64_t end = sp;
  while (maps != NULL && fgets(line, sizeof line, maps) != NULL) {
    unsigned long long lo = 0, hi = 0;
    if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && sp >= lo && sp < hi) end = hi;
  }
  if (maps != NULL) fclose(maps);
  return end;
}

/* Copies up to `size` bytes from the captured rsp (called after UNWIND_CAPTURE, from the same
 * function: this call's own frame lies below that rsp and changes none of the bytes above) and
 * writes the file. */
__attribute__((noinline)) static void unwind_save(const char* path, uint64_t size) {
  const uint64_t sp = unwind_regs[7];
  const uint64_t room = unwind_stack_end(sp) - sp;
  if (size > room) size = room;
  if (size > sizeof unwind_stack) size = sizeof unwind_stack;
  memcpy(unwind_stack, (const void*)(uintptr_t)sp, size);
  FILE* out = fopen(path, "wb");
  if (out == NULL || fwrite(unwind_regs, sizeof unwind_regs, 1, out) != 1 ||
      fwrite(unwind_stack, 1, size, out) != size || fclose(out) != 0) {
    perror(path);
    exit(2);
  }
}

/* "ready", then wait for stdin to close: the test unwinds while the process lives. With
 * "exit" the process ends at once instead (a vanished process). */
static void unwind_wait(const char* mode) {
  printf("ready\n");
  fflush(stdout);
  if (strcmp(mode, "exit") == 0) return;
  char buffer[64];
  while (fgets(buffer, sizeof buffer, stdin) != NULL) {
  }
}

#endif
