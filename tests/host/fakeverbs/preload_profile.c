/* Posts known message sizes through the stand-in's data path, for the preload library's
 * profile counters (issue #14): run with LD_PRELOAD=librdmascope_preload.so. Driven by
 * tests/host/preload_profile.py, which checks what the exporter serves for each process.
 *
 *   preload_profile [--sequential | --many-threads]
 * Two threads, each with its own QP and CQ (so that each polls its own completions), each: 50
 * signalled sends of 2048 bytes (2 SGEs of 1024), each polled right after it is posted, and 25
 * receives of 512 bytes. Then the main thread: a chain of 3 signalled 2048-byte sends whose second
 * one fails (no SGE): only the first is posted and counted; and 10 receives of 4096 bytes posted to
 * an SRQ. Totals: send 101 work requests, 206,848 bytes, all in the (1024, 2048] bucket; recv 60,
 * of which 50 in (256, 512] and 10 in (2048, 4096], 66,560 bytes. --sequential: the second thread
 * starts when the first is done (so that with RDMASCOPE_PRELOAD_SAMPLE=1 no two pending samples
 * meet in the library's table: all 101 sends are timed).
 * --many-threads: then 70 more threads at once, each posting one signalled 64-byte send:
 * beyond the stats file's 64 per-thread shards, the last ones share one with atomic adds;
 * send 171 work requests, 211,328 bytes, 70 of them in (32, 64].
 * Then it forks two children, which count into files of their own and not into this one:
 *   a forked child opens the device again and posts 5 signalled sends of 300 bytes;
 *   an exec'd child (this program, "exec-child") posts 7 signalled sends of 100 bytes and
 *   3 receives of 64 bytes.
 * Output lines: "READY <pid>", "FORKED <pid>", "EXECED <pid>" (any order); every process
 * exits when stdin is closed or reads "exit". */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

static struct ibv_device device = {.name = "fakedev0"};

struct queues {
  struct ibv_context* context;
  struct ibv_pd pd;
  struct ibv_cq* cq;
};

static void open_queues(struct queues* q) {
  q->context = ibv_open_device(&device);
  CHECK(q->context);
  q->pd.context = q->context;
  q->cq = ibv_create_cq(q->context, 1023, NULL, NULL, 0);
  CHECK(q->cq);
}

static struct ibv_qp* new_qp(struct queues* q, struct ibv_cq* cq, struct ibv_srq* srq) {
  struct ibv_qp_init_attr attr = {
      .send_cq = cq, .recv_cq = cq, .srq = srq, .cap = {64, 64, 2, 1, 0}, .qp_type = IBV_QPT_RC};
  struct ibv_qp* qp = ibv_create_qp(&q->pd, &attr);
  CHECK(qp);
  return qp;
}

/* n signalled sends of `size` bytes in `sges` equal SGEs, one at a time, each polled. */
static void send_and_poll(struct ibv_qp* qp, struct ibv_cq* cq, int n, uint32_t size, int sges,
                          uint64_t first_wr_id) {
  static char buffer[4096];
  struct ibv_sge sg[2];
  for (int i = 0; i < sges; i++) {
    sg[i] = (struct ibv_sge){.addr = (uintptr_t)buffer, .length = size / sges};
  }
  for (int i = 0; i < n; i++) {
    struct ibv_send_wr wr = {.wr_id = first_wr_id + i,
                             .sg_list = sg,
                             .num_sge = sges,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED};
    struct ibv_send_wr* bad = NULL;
    CHECK(ibv_post_send(qp, &wr, &bad) == 0);
    struct ibv_wc wc[4];
    int got = 0;
    while (got == 0) got = ibv_poll_cq(cq, 4, wc);
    CHECK(got >= 1);
  }
}

static void post_receives(struct ibv_qp* qp, struct ibv_srq* srq, int n, uint32_t size) {
  struct ibv_sge sg = {.length = size};
  for (int i = 0; i < n; i++) {
    struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sg, .num_sge = 1};
    struct ibv_recv_wr* bad = NULL;
    CHECK((srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(qp, &wr, &bad)) == 0);
  }
}

static struct queues shared;

static void* worker(void* arg) {
  uintptr_t index = (uintptr_t)arg;
  struct ibv_cq* cq = ibv_create_cq(shared.context, 255, NULL, NULL, 0);
  CHECK(cq);
  struct ibv_qp* qp = new_qp(&shared, cq, NULL);
  send_and_poll(qp, cq, 50, 2048, 2, index * 1000);
  post_receives(qp, NULL, 25, 512);
  return NULL;
}

static void* one_send(void* arg) {
  (void)arg;
  struct ibv_cq* cq = ibv_create_cq(shared.context, 15, NULL, NULL, 0);
  CHECK(cq);
  send_and_poll(new_qp(&shared, cq, NULL), cq, 1, 64, 1, 7);
  return NULL;
}

/* Waits for "exit" or the end of stdin. */
static void wait_for_exit(void) {
  char line[64];
  while (fgets(line, sizeof line, stdin) && strncmp(line, "exit", 4) != 0) {
  }
}

static void say(const char* what) {
  printf("%s %d\n", what, getpid());
  fflush(stdout);
}

static int exec_child(void) {
  struct queues q;
  open_queues(&q);
  struct ibv_qp* qp = new_qp(&q, q.cq, NULL);
  send_and_poll(qp, q.cq, 7, 100, 1, 1);
  post_receives(qp, NULL, 3, 64);
  say("EXECED");
  wait_for_exit();
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "exec-child") == 0) return exec_child();
  int sequential = argc > 1 && strcmp(argv[1], "--sequential") == 0;
  int many = argc > 1 && strcmp(argv[1], "--many-threads") == 0;
  open_queues(&shared);
  pthread_t threads[2];
  for (uintptr_t i = 0; i < 2; i++) {
    CHECK(pthread_create(&threads[i], NULL, worker, (void*)(i + 1)) == 0);
    if (sequential) pthread_join(threads[i], NULL);
  }
  if (!sequential) {
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
  }

  /* A chain failing at its second work request: only the first was posted. */
  struct ibv_qp* qp = new_qp(&shared, shared.cq, NULL);
  struct ibv_sge sg[2] = {{.length = 1024}, {.length = 1024}};
  struct ibv_send_wr chain[3];
  for (int i = 0; i < 3; i++) {
    chain[i] = (struct ibv_send_wr){.wr_id = 9000 + i,
                                    .sg_list = sg,
                                    .num_sge = i == 1 ? 0 : 2,
                                    .opcode = IBV_WR_SEND,
                                    .send_flags = IBV_SEND_SIGNALED,
                                    .next = i < 2 ? &chain[i + 1] : NULL};
  }
  struct ibv_send_wr* bad = NULL;
  CHECK(ibv_post_send(qp, chain, &bad) != 0 && bad == &chain[1]);
  struct ibv_wc wc[4];
  CHECK(ibv_poll_cq(shared.cq, 4, wc) == 1);

  struct ibv_srq_init_attr srq_attr = {.attr = {.max_wr = 64, .max_sge = 1}};
  struct ibv_srq* srq = ibv_create_srq(&shared.pd, &srq_attr);
  CHECK(srq);
  post_receives(NULL, srq, 10, 4096);
  if (many) {
    pthread_t more[70];
    for (int i = 0; i < 70; i++) CHECK(pthread_create(&more[i], NULL, one_send, NULL) == 0);
    for (int i = 0; i < 70; i++) pthread_join(more[i], NULL);
  }
  say("READY");

  /* The children read the end of this pipe: they exit when the parent does. */
  int done[2];
  CHECK(pipe(done) == 0);
  pid_t forked = fork();
  CHECK(forked >= 0);
  if (forked == 0) {
    close(done[1]);
    struct queues q;
    open_queues(&q);
    send_and_poll(new_qp(&q, q.cq, NULL), q.cq, 5, 300, 1, 1);
    say("FORKED");
    char c;
    while (read(done[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  pid_t execed = fork();
  CHECK(execed >= 0);
  if (execed == 0) {
    close(done[1]);
    dup2(done[0], 0);
    /* By its real path, not /proc/self/exe: the comm is the program's name. */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n] = 0;
    execl(self, argv[0], "exec-child", (char*)NULL);
    _exit(127);
  }
  close(done[0]);
  wait_for_exit();
  close(done[1]);
  int status;
  int ok = 1;
  for (int i = 0; i < 2; i++) {
    CHECK(wait(&status) > 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok ? 0 : 1;
}
