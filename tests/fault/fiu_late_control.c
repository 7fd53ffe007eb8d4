// libfiu's remote control, started once the exporter is serving (LD_PRELOAD, after libfiu's
// fiu_run_preload.so and fiu_posix_preload.so, with FIU_CTRL_FIFO="" so that fiu-run's own
// control thread does not start).
//
// Why: `rdmascope serve` drops its capabilities once its collectors are built and refuses to do
// so while any other thread exists (capabilities are per thread, docs/security.md); fiu-run
// starts its control thread in a constructor, before main(). The HTTP server's first
// epoll_create1() comes after the drop, so the control thread started there inherits the
// dropped set. `fiu-ctrl -f $RDMASCOPE_FIU_FIFO PID` then enables and disables failure points.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fiu-control.h>
#include <fiu.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_once_t started = PTHREAD_ONCE_INIT;

static void start_control(void) {
  const char* base = getenv("RDMASCOPE_FIU_FIFO");
  if (base == NULL) return;
  const int rc = fiu_rc_fifo(base);
  char line[256];
  const int n = snprintf(line, sizeof line, "fiu-late-control: %s (%s-%d.in)\n",
                         rc == 0 ? "ready" : "failed", base, (int)getpid());
  if (n > 0) (void)!write(2, line, (size_t)n);
}

int epoll_create1(int flags) {
  pthread_once(&started, start_control);
  int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "epoll_create1");
  return real(flags);
}
