/* Host helper for host_mr_exec_images (issue 38): one process, two images. Built twice, as
 * non-PIE programs without frame pointers (both load at the same address, and the test turns
 * address randomisation off, so the second image's code lies where the first image's other
 * code was): mr_exec_first (IMAGE 1) registers LEAKS regions from register_in_first_image,
 * prints "ready 1", and at a line on stdin execs mr_exec_second (IMAGE 2, same pid), which
 * registers LEAKS regions from register_in_second_image, prints "ready 2", and waits to be
 * killed. Unwound or named with the first image's modules, the second image's stack would read
 * as first_image_padding, never as register_in_second_image.
 * usage: mr_exec_first LEAKS SIZE SECOND_PROGRAM */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile long sink;

#if IMAGE == 1
/* Code where the second image has its registering function: 16 KiB never run. */
__attribute__((noinline, used)) void first_image_padding(void) {
  __asm__ volatile(".skip 16384, 0x90");
}
#define REGISTER register_in_first_image
#else
#define REGISTER register_in_second_image
#endif

/* Kept out of line and not tail-called (the volatile sum after the call). */
__attribute__((noinline)) int REGISTER(long leaks, size_t size) {
  for (long i = 0; i < leaks; i++) {
    void* buffer = malloc(size);
    if (!buffer || !ibv_reg_mr(NULL, buffer, size, IBV_ACCESS_LOCAL_WRITE)) return 1;
    sink += (long)size;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3 || (IMAGE == 1 && argc != 4)) {
    fprintf(stderr, "usage: %s LEAKS SIZE SECOND_PROGRAM\n", argv[0]);
    return 2;
  }
  if (REGISTER(atol(argv[1]), (size_t)atol(argv[2])) != 0) return 1;
  printf("ready %d\n", IMAGE);
  fflush(stdout);
#if IMAGE == 1
  char line[64];
  if (!fgets(line, sizeof line, stdin)) return 1;
  char* args[] = {argv[3], argv[1], argv[2], NULL};
  execv(argv[3], args);
  perror("execv");
  return 1;
#else
  for (;;) pause();
#endif
}
