/* Registers regions, then execs another program without deregistering them, from the main
 * thread or from a second thread: the kernel releases the old image's regions at the exec
 * (the uverbs fd is O_CLOEXEC: ib_uverbs_close -> uverbs_destroy_ufile_hw), so the exporter
 * must stop counting them for the pid and count them as released at exec. The same holds for
 * the CQs of the old image (verbs probes).
 *
 * usage: mr_exec REGIONS SIZE CQ_ENTRIES main|thread PROGRAM [ARGS...]
 *   registers REGIONS regions of SIZE bytes (all left registered), creates a CQ of CQ_ENTRIES
 *   (none if 0), prints "REGISTERED <pid>", waits for a line on stdin, then execs PROGRAM ARGS
 *   from the chosen thread. */
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char** exec_argv;

static void* exec_program(void* arg) {
  (void)arg;
  execv(exec_argv[0], exec_argv);
  perror("execv");
  exit(1);
}

int main(int argc, char** argv) {
  if (argc < 6 || (strcmp(argv[4], "main") != 0 && strcmp(argv[4], "thread") != 0)) {
    fprintf(stderr, "usage: %s REGIONS SIZE CQ_ENTRIES main|thread PROGRAM [ARGS...]\n", argv[0]);
    return 2;
  }
  long regions = atol(argv[1]);
  long size = atol(argv[2]);
  int cq_entries = atoi(argv[3]);
  char* buffer = malloc((size_t)size);
  for (long i = 0; i < regions; i++) {
    if (!ibv_reg_mr(NULL, buffer, (size_t)size, IBV_ACCESS_LOCAL_WRITE)) abort();
  }
  static struct ibv_device device = {.name = "fakedev0"};
  static struct ibv_context context = {.device = &device};
  if (cq_entries > 0 && !ibv_create_cq(&context, cq_entries, NULL, NULL, 0)) abort();
  printf("REGISTERED %d\n", getpid());
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) return 0;
  exec_argv = &argv[5];
  if (strcmp(argv[4], "main") == 0) exec_program(NULL);
  /* A non-leader thread execs: de_thread() kills the leader (this thread, blocked below) and
   * the exec'ing thread takes over its pid. */
  pthread_t thread;
  if (pthread_create(&thread, NULL, exec_program, NULL) != 0) return 1;
  pthread_join(thread, NULL);
  return 1;
}
