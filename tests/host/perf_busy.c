/* Test target for the perf tests: THREADS threads spin (or sleep, with "sleep") for SECONDS,
 * then the process exits. Prints "READY" once its threads run.
 * usage: perf_busy THREADS SECONDS [sleep] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double seconds;
static int sleeping;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void* work(void* arg) {
  (void)arg;
  double end = now() + seconds;
  volatile unsigned long spins = 0;
  while (now() < end) {
    if (sleeping)
      usleep(10000);
    else
      spins++;
  }
  return NULL;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  seconds = argc > 2 ? atof(argv[2]) : 1;
  sleeping = argc > 3 && strcmp(argv[3], "sleep") == 0;
  pthread_t ids[64];
  for (int i = 1; i < threads && i < 64; i++) pthread_create(&ids[i], NULL, work, NULL);
  printf("READY\n");
  fflush(stdout);
  work(NULL);
  for (int i = 1; i < threads && i < 64; i++) pthread_join(ids[i], NULL);
  return 0;
}
