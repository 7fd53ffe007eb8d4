// A test seam for e2e tests (LD_PRELOAD into rdmascope): open(2) of a path containing
// $RDMASCOPE_HOLD_MATCH blocks until the test releases it, as a slow driver attribute would
// (mlx5's hw_counters are firmware queries). The test knows how many scrapes are in flight from
// the "rdmascope-hold: entered" lines on stderr, and releases them all by opening
// $RDMASCOPE_HOLD_FIFO for writing and closing it. Only while $RDMASCOPE_HOLD_FIFO.armed exists
// (start-up reads pass) and $RDMASCOPE_HOLD_FIFO.released does not.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*open_fn)(const char*, int, ...);

static void hold(const char* path) {
  const char* match = getenv("RDMASCOPE_HOLD_MATCH");
  const char* fifo = getenv("RDMASCOPE_HOLD_FIFO");
  if (match == NULL || fifo == NULL || strstr(path, match) == NULL) return;
  char armed[4096], released[4096];
  snprintf(armed, sizeof armed, "%s.armed", fifo);
  snprintf(released, sizeof released, "%s.released", fifo);
  struct stat st;
  if (stat(armed, &st) != 0 || stat(released, &st) == 0) return;
  char line[4200];
  const int n = snprintf(line, sizeof line, "rdmascope-hold: entered %s\n", path);
  if (n > 0) (void)!write(2, line, (size_t)n);
  // The real open, not ours: blocks until the test opens the write end; read() then returns
  // 0 once it closes it.
  open_fn real = (open_fn)dlsym(RTLD_NEXT, "open");
  const int fd = real(fifo, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char byte;
    while (read(fd, &byte, 1) > 0) {
    }
    close(fd);
  }
}

static int forward(const char* name, const char* path, int flags, va_list args) {
  hold(path);
  open_fn real = (open_fn)dlsym(RTLD_NEXT, name);
  if (flags & (O_CREAT | O_TMPFILE)) return real(path, flags, va_arg(args, mode_t));
  return real(path, flags);
}

int open(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const int fd = forward("open", path, flags, args);
  va_end(args);
  return fd;
}

int open64(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const int fd = forward("open64", path, flags, args);
  va_end(args);
  return fd;
}
