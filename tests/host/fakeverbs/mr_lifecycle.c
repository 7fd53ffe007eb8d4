/* Drives the MR probes through the situations where per-thread call tracking and per-process
 * state used to go wrong (issue #11, items 8 and 9). Linked against the libibverbs stand-in,
 * whose fakeverbs_set_mr_hook() runs code inside the registration calls.
 *
 * usage: mr_lifecycle MODE ARGS...   (prints "READY <pid>" when the figures can be checked,
 *                                     then waits for commands on stdin; "exit" ends)
 *   loop THREADS HOLD SIZE JUMPS  threads loop ibv_reg_mr/ibv_dereg_mr (print "LOOPING <pid>")
 *                                 until "hold"; then with JUMPS=1 each thread longjmps out of
 *                                 one deregistration (before the free: the region stays
 *                                 registered) and out of one registration (the caller never
 *                                 gets the region); then each registers HOLD regions of SIZE
 *                                 and keeps them. Outstanding: THREADS x (HOLD + JUMPS).
 *   race SIZE                     thread A deregisters a region; between the stand-in's free
 *                                 and the return, thread B registers and gets the same
 *                                 pointer back ("REUSED 1" if it did); then B deregisters it.
 *                                 Outstanding: 0 regions; 2 registrations, 2 deregistrations.
 *   leader_exit REGIONS SIZE      a worker registers REGIONS regions, then main() calls
 *                                 pthread_exit: the process lives on in the worker.
 *   odp SIZE                      one implicit ODP registration (NULL, SIZE_MAX, ON_DEMAND)
 *                                 and one of SIZE bytes; "dereg" deregisters both. */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void fakeverbs_set_mr_hook(void (*hook)(int point, struct ibv_mr* mr));
enum { MR_REGISTERED = 1, MR_BEFORE_FREE = 2, MR_AFTER_FREE = 3 };

#include "common/check.h"

static void wait_for(const char* command) {
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = 0;
    if (strcmp(line, command) == 0) return;
  }
  exit(0);
}

/* --- loop: longjmp out of calls -------------------------------------------------------- */

static __thread sigjmp_buf jump_env;
static __thread int jump_at; /* the hook point to longjmp from, 0: none */

static void jumping_hook(int point, struct ibv_mr* mr) {
  (void)mr;
  if (jump_at == point) {
    jump_at = 0;
    siglongjmp(jump_env, 1);
  }
}

static long threads, hold, size, jumps;
static atomic_int holding;
static pthread_barrier_t held;

static void* loop_thread(void* arg) {
  (void)arg;
  char* buffer = malloc((size_t)size);
  while (!atomic_load(&holding)) {
    struct ibv_mr* mr = ibv_reg_mr(NULL, buffer, (size_t)size, IBV_ACCESS_LOCAL_WRITE);
    CHECK(mr && ibv_dereg_mr(mr) == 0);
  }
  if (jumps) {
    struct ibv_mr* mr = ibv_reg_mr(NULL, buffer, (size_t)size, IBV_ACCESS_LOCAL_WRITE);
    CHECK(mr);
    jump_at = MR_BEFORE_FREE;
    if (sigsetjmp(jump_env, 1) == 0) ibv_dereg_mr(mr); /* never returns: mr stays */
    jump_at = MR_REGISTERED;
    if (sigsetjmp(jump_env, 1) == 0) ibv_reg_mr(NULL, buffer, (size_t)size, 0);
  }
  for (long i = 0; i < hold; i++) {
    CHECK(ibv_reg_mr(NULL, buffer, (size_t)size, IBV_ACCESS_LOCAL_WRITE));
  }
  pthread_barrier_wait(&held);
  return NULL;
}

static int loop_mode(void) {
  fakeverbs_set_mr_hook(jumping_hook);
  pthread_barrier_init(&held, NULL, (unsigned)threads + 1);
  pthread_t tids[64];
  CHECK(threads >= 1 && threads <= 64);
  for (long t = 0; t < threads; t++) pthread_create(&tids[t], NULL, loop_thread, NULL);
  printf("LOOPING %d\n", getpid());
  fflush(stdout);
  wait_for("hold");
  atomic_store(&holding, 1);
  pthread_barrier_wait(&held);
  return 0;
}

/* --- race: a registration reuses the pointer a deregistration just freed ---------------- */

static sem_t go_register, registered;
static struct ibv_mr* b_mr;
static char race_buffer[1 << 16];

static void racing_hook(int point, struct ibv_mr* mr) {
  (void)mr;
  if (point != MR_AFTER_FREE) return;
  sem_post(&go_register);
  sem_wait(&registered); /* B's registration returns while A is still inside ibv_dereg_mr */
}

static void* racer_b(void* arg) {
  (void)arg;
  sem_wait(&go_register);
  b_mr = ibv_reg_mr(NULL, race_buffer, (size_t)size, IBV_ACCESS_LOCAL_WRITE);
  CHECK(b_mr);
  sem_post(&registered);
  return NULL;
}

static int race_mode(void) {
  sem_init(&go_register, 0, 0);
  sem_init(&registered, 0, 0);
  pthread_t b;
  pthread_create(&b, NULL, racer_b, NULL);
  struct ibv_mr* a_mr = ibv_reg_mr(NULL, race_buffer, (size_t)size, IBV_ACCESS_LOCAL_WRITE);
  CHECK(a_mr);
  uintptr_t a_pointer = (uintptr_t)a_mr;
  fakeverbs_set_mr_hook(racing_hook);
  CHECK(ibv_dereg_mr(a_mr) == 0);
  fakeverbs_set_mr_hook(NULL);
  pthread_join(b, NULL);
  printf("REUSED %d\n", (uintptr_t)b_mr == a_pointer);
  CHECK(ibv_dereg_mr(b_mr) == 0);
  return 0;
}

/* --- leader_exit: main() calls pthread_exit, the process goes on --------------------------- */

static pthread_t main_thread;

static void* survivor(void* arg) {
  long regions = (long)(intptr_t)arg;
  char* buffer = malloc((size_t)size);
  for (long i = 0; i < regions; i++) {
    CHECK(ibv_reg_mr(NULL, buffer, (size_t)size, IBV_ACCESS_LOCAL_WRITE));
  }
  CHECK(pthread_join(main_thread, NULL) == 0);
  /* The join returns at the kernel's clear_child_tid, before do_exit() reaches the exit
   * tracepoint: wait until the leader is a zombie (exit_notify(), after the tracepoint). */
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", getpid());
  for (int i = 0; i < 5000; i++) {
    char stat[512] = {0};
    FILE* f = fopen(path, "r");
    if (!f) break;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    const char* state = strrchr(stat, ')');
    if (n == 0 || !state || state[2] == 'Z') break;
    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
  }
  printf("READY %d\n", getpid());
  fflush(stdout);
  wait_for("exit");
  exit(0);
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "loop") == 0 && argc == 6) {
    threads = atol(argv[2]);
    hold = atol(argv[3]);
    size = atol(argv[4]);
    jumps = atol(argv[5]);
    loop_mode();
  } else if (strcmp(mode, "race") == 0 && argc == 3) {
    size = atol(argv[2]);
    race_mode();
  } else if (strcmp(mode, "leader_exit") == 0 && argc == 4) {
    size = atol(argv[3]);
    main_thread = pthread_self();
    pthread_t worker;
    pthread_create(&worker, NULL, survivor, (void*)(intptr_t)atol(argv[2]));
    pthread_exit(NULL);
  } else if (strcmp(mode, "odp") == 0 && argc == 3) {
    size = atol(argv[2]);
    char* buffer = malloc((size_t)size);
    struct ibv_mr* implicit = ibv_reg_mr(NULL, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND);
    struct ibv_mr* plain = ibv_reg_mr(NULL, buffer, (size_t)size, IBV_ACCESS_LOCAL_WRITE);
    CHECK(implicit && plain);
    printf("READY %d\n", getpid());
    wait_for("dereg");
    CHECK(ibv_dereg_mr(implicit) == 0 && ibv_dereg_mr(plain) == 0);
    printf("DEREGISTERED\n");
  } else {
    fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
    return 2;
  }
  printf("READY %d\n", getpid());
  wait_for("exit");
  return 0;
}
