/* Cases for the preload library (run with LD_PRELOAD=librdmascope_preload.so and
 * RDMASCOPE_PRELOAD_DIR set), each checking the library's stats file of this process
 * (preload/stats_file.h) against what the program did. Exit 0 and "PASS <case>" when every
 * check holds; "FAIL ..." lines and exit 1 otherwise. Driven by tests/host/preload_cases.py.
 *   threads   2 threads post signalled sends to their own QPs sharing one CQ (and receives
 *             to one SRQ), 2 threads poll that CQ: counts exact, outstanding 0 once drained
 *   contexts  100 open/close cycles, contexts at the address of a closed one (the stand-in
 *             reuses it), alternating two providers: each served its own provider's poll_cq,
 *             every context tracked; then 300 contexts open at once: the CQs of those
 *             beyond the library's 256 counted as untracked
 *   reuse     a CQ and a QP created at the address of one being destroyed, from within the
 *             destroy (as another thread could): the new ones keep their entries
 *   many      70,000 live QPs: the ones the library cannot track are counted (lost_qps), the
 *             others counted exactly; all destroyed, then 1,000 more: all tracked
 *   collide   QPs of two contexts whose (context, qp_num) would collide as context ^ qp_num << 1
 *             (numbers chosen from the contexts' addresses): receives of the one on an SRQ are
 *             counted on its SRQ, not taken for the other's
 *   errors    flush-error completions whose opcode is garbage, on a CQ fed by an SRQ QP:
 *             counted on the CQ, not on the SRQ
 *   fork      a child forked after the parent opened a device opens its own: its own file
 *   exec      opens a device and creates a CQ, then execs "exec-idle" (which never opens a
 *             device) or "exec-open" (which does: a file of its own, not the old name) */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stats_file.h"

int fakeverbs_deliver(struct ibv_qp* qp, int n);
void fakeverbs_reuse_next_destroyed(int kind, void (*hook)(void));
void fakeverbs_fail_next(int n);
enum { FAKE_KIND_CQ, FAKE_KIND_QP, FAKE_KIND_SRQ, FAKE_KIND_CONTEXT };
#define FAKE_ALT_VENDOR_ERR 0xa17

static int failures;
#define CHECK_EQ(what, got, want)                                                            \
  do {                                                                                       \
    unsigned long long got_ = (unsigned long long)(got), want_ = (unsigned long long)(want); \
    if (got_ != want_) {                                                                     \
      printf("FAIL %s: %llu (want %llu)\n", what, got_, want_);                              \
      failures++;                                                                            \
    }                                                                                        \
  } while (0)
#define REQUIRE(cond)                                        \
  do {                                                       \
    if (!(cond)) {                                           \
      printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                               \
    }                                                        \
  } while (0)

/* --- The stats file of a process ------------------------------------------------------- */

/* The newest file (highest image number) whose header names pid `pid`, mapped read-only. */
static const struct occ_file* stats_of(pid_t pid, char* path_out) {
  const char* dir = getenv("RDMASCOPE_PRELOAD_DIR");
  REQUIRE(dir);
  DIR* d = opendir(dir);
  REQUIRE(d);
  const struct occ_file* best = NULL;
  int best_n = -1;
  for (struct dirent* e; (e = readdir(d));) {
    unsigned long long ns, ticks;
    int file_pid, n;
    if (sscanf(e->d_name, "%llu-%d-%llu-%d.occ", &ns, &file_pid, &ticks, &n) != 4) continue;
    if (file_pid != (int)pid || n <= best_n) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    void* map = mmap(NULL, sizeof(struct occ_file), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) continue;
    const struct occ_file* f = map;
    if (f->header.magic != OCC_MAGIC || f->header.version != OCC_VERSION) continue;
    best = f;
    best_n = n;
    if (path_out) snprintf(path_out, 4096, "%s", path);
  }
  closedir(d);
  return best;
}

/* The slot of the CQ with this handle, or NULL. */
static const struct occ_cq* cq_slot(const struct occ_file* f, uint32_t handle) {
  for (int i = 0; f && i < OCC_MAX_CQS; i++) {
    if (f->cqs[i].in_use && f->cqs[i].handle == handle) return &f->cqs[i];
  }
  return NULL;
}

static const struct occ_srq* srq_slot(const struct occ_file* f, uint32_t handle) {
  for (int i = 0; f && i < OCC_MAX_SRQS; i++) {
    if (f->srqs[i].in_use && f->srqs[i].handle == handle) return &f->srqs[i];
  }
  return NULL;
}

static uint64_t expected(const struct occ_cq* c) { return c->expected + c->expected_shared; }
static uint64_t completed(const struct occ_cq* c) {
  return c->polled.completed + c->polled_shared.completed;
}
/* Calls: empty ones plus those that returned completions (stats_file.h, version 3). */
static uint64_t polls(const struct occ_cq* c) {
  return c->polled.empty_polls + c->polled_shared.empty_polls + c->polled.nonempty_polls +
         c->polled_shared.nonempty_polls;
}
static uint64_t empty_polls(const struct occ_cq* c) {
  return c->polled.empty_polls + c->polled_shared.empty_polls;
}
static uint64_t polled_entries(const struct occ_cq* c) {
  return c->polled.polled_entries + c->polled_shared.polled_entries;
}

/* Whether some process holds the file's liveness lock. */
static int locked(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  int rc = fcntl(fd, F_OFD_GETLK, &lock);
  close(fd);
  return rc == 0 ? lock.l_type != F_UNLCK : -1;
}

/* --- Objects ------------------------------------------------------------------------------ */

static struct ibv_sge sge = {.length = 64};
static struct ibv_device device0 = {.name = "fakedev0"};
static struct ibv_device alt_device = {.name = "fakealt0"};

static struct ibv_qp* make_qp(struct ibv_pd* pd, struct ibv_cq* cq, struct ibv_srq* srq) {
  struct ibv_qp_init_attr attr = {
      .send_cq = cq, .recv_cq = cq, .srq = srq, .cap = {64, 64, 1, 1, 0}, .qp_type = IBV_QPT_RC};
  struct ibv_qp* qp = ibv_create_qp(pd, &attr);
  REQUIRE(qp);
  return qp;
}

static int send_signalled(struct ibv_qp* qp, int n) {
  struct ibv_send_wr wrs[16];
  memset(wrs, 0, sizeof wrs);
  for (int i = 0; i < n; i++) {
    wrs[i].sg_list = &sge;
    wrs[i].num_sge = 1;
    wrs[i].opcode = IBV_WR_SEND;
    wrs[i].send_flags = IBV_SEND_SIGNALED;
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
  }
  struct ibv_send_wr* bad = NULL;
  return ibv_post_send(qp, wrs, &bad);
}

static int drain(struct ibv_cq* cq) {
  struct ibv_wc wc[64];
  int total = 0, n;
  while ((n = ibv_poll_cq(cq, 64, wc)) > 0) total += n;
  return total;
}

/* --- threads ------------------------------------------------------------------------------ */

#define SENDS_PER_POSTER 200000
#define SRQ_RECVS_PER_POSTER 100000
static struct ibv_cq* shared_cq;
static struct ibv_srq* shared_srq;
static atomic_long sent, reaped, poll_calls, empty_calls;

static void* poster(void* arg) {
  struct ibv_qp* qp = arg;
  struct ibv_recv_wr rwr = {.sg_list = &sge, .num_sge = 1};
  struct ibv_recv_wr* rbad;
  for (int i = 0; i < SENDS_PER_POSTER; i += 4) {
    while (atomic_load(&sent) - atomic_load(&reaped) > 2048) sched_yield(); /* ring: 4096 */
    REQUIRE(send_signalled(qp, 4) == 0);
    atomic_fetch_add(&sent, 4);
    if (i / 2 < SRQ_RECVS_PER_POSTER) {
      REQUIRE(ibv_post_srq_recv(shared_srq, &rwr, &rbad) == 0);
      REQUIRE(ibv_post_srq_recv(shared_srq, &rwr, &rbad) == 0);
    }
  }
  return NULL;
}

static void* poller(void* arg) {
  (void)arg;
  struct ibv_wc wc[8];
  while (atomic_load(&reaped) < 2L * SENDS_PER_POSTER) {
    int n = ibv_poll_cq(shared_cq, 8, wc);
    REQUIRE(n >= 0);
    atomic_fetch_add(&poll_calls, 1);
    if (n == 0) atomic_fetch_add(&empty_calls, 1);
    atomic_fetch_add(&reaped, n);
  }
  return NULL;
}

static void case_threads(void) {
  struct ibv_context* context = ibv_open_device(&device0);
  REQUIRE(context);
  struct ibv_pd pd = {.context = context};
  shared_cq = ibv_create_cq(context, 4095, NULL, NULL, 0);
  struct ibv_srq_init_attr srq_attr = {.attr = {.max_wr = 1 << 20, .max_sge = 1}};
  shared_srq = ibv_create_srq(&pd, &srq_attr);
  REQUIRE(shared_cq && shared_srq);
  struct ibv_qp* qp[2] = {make_qp(&pd, shared_cq, NULL), make_qp(&pd, shared_cq, NULL)};
  pthread_t threads[4];
  for (int i = 0; i < 2; i++) pthread_create(&threads[i], NULL, poster, qp[i]);
  for (int i = 2; i < 4; i++) pthread_create(&threads[i], NULL, poller, NULL);
  for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
  const struct occ_file* f = stats_of(getpid(), NULL);
  const struct occ_cq* c = cq_slot(f, shared_cq->handle);
  REQUIRE(c);
  CHECK_EQ("expected", expected(c), 2 * SENDS_PER_POSTER);
  CHECK_EQ("completed", completed(c), 2 * SENDS_PER_POSTER);
  CHECK_EQ("outstanding after a full drain", expected(c) - completed(c), 0);
  CHECK_EQ("polled entries", polled_entries(c), atomic_load(&reaped));
  CHECK_EQ("polls", polls(c), atomic_load(&poll_calls));
  CHECK_EQ("empty polls", empty_polls(c), atomic_load(&empty_calls));
  const struct occ_srq* s = srq_slot(f, shared_srq->handle);
  REQUIRE(s);
  CHECK_EQ("SRQ posted from 2 threads", s->posted + s->posted_shared, 2 * SRQ_RECVS_PER_POSTER);
}

/* --- contexts ----------------------------------------------------------------------------- */

static void case_contexts(void) {
  void* previous = NULL;
  int reused = 0;
  for (int i = 0; i < 100; i++) {
    int alt = i % 2;
    struct ibv_context* context = ibv_open_device(alt ? &alt_device : &device0);
    REQUIRE(context);
    if (context == previous) reused++;
    struct ibv_pd pd = {.context = context};
    struct ibv_cq* cq = ibv_create_cq(context, 15, NULL, NULL, 0);
    REQUIRE(cq);
    struct ibv_qp* qp = make_qp(&pd, cq, NULL);
    REQUIRE(send_signalled(qp, 1) == 0);
    struct ibv_wc wc;
    REQUIRE(ibv_poll_cq(cq, 1, &wc) == 1);
    if ((wc.vendor_err == FAKE_ALT_VENDOR_ERR) != alt) {
      printf("FAIL context %d (%s) served the other provider's poll_cq\n", i,
             alt ? "alt" : "plain");
      failures++;
    }
    const struct occ_cq* c = cq_slot(stats_of(getpid(), NULL), cq->handle);
    if (!c || polled_entries(c) != 1) {
      printf("FAIL context %d: its CQ is not tracked\n", i);
      failures++;
    }
    REQUIRE(ibv_destroy_qp(qp) == 0 && ibv_destroy_cq(cq) == 0);
    fakeverbs_reuse_next_destroyed(FAKE_KIND_CONTEXT, NULL);
    REQUIRE(ibv_close_device(context) == 0);
    previous = context;
  }
  CHECK_EQ("contexts opened at a closed one's address", reused, 99);
  /* 300 open at once: the library tracks 256 (MAX_CONTEXTS); the CQs of the others are
   * counted as untracked, not lost silently. */
  struct ibv_context* open[300];
  int tracked = 0;
  for (int i = 0; i < 300; i++) {
    REQUIRE((open[i] = ibv_open_device(&device0)));
    struct ibv_cq* cq = ibv_create_cq(open[i], 3, NULL, NULL, 0);
    REQUIRE(cq);
    tracked += cq_slot(stats_of(getpid(), NULL), cq->handle) != NULL;
  }
  const struct occ_file* f = stats_of(getpid(), NULL);
  CHECK_EQ("CQs of 300 contexts tracked", tracked, 256);
  CHECK_EQ("CQs of 300 contexts counted as untracked", f->header.lost_cqs, 300 - 256);
}

/* --- reuse -------------------------------------------------------------------------------- */

static struct ibv_context* reuse_context;
static struct ibv_pd reuse_pd;
static struct ibv_cq* created_cq;
static struct ibv_qp* created_qp;
static void create_cq_now(void) { created_cq = ibv_create_cq(reuse_context, 31, NULL, NULL, 0); }
static void create_qp_now(void) { created_qp = make_qp(&reuse_pd, created_cq, NULL); }

static void case_reuse(void) {
  reuse_context = ibv_open_device(&device0);
  REQUIRE(reuse_context);
  reuse_pd.context = reuse_context;
  struct ibv_cq* old_cq = ibv_create_cq(reuse_context, 15, NULL, NULL, 0);
  REQUIRE(old_cq);
  fakeverbs_reuse_next_destroyed(FAKE_KIND_CQ, create_cq_now);
  REQUIRE(ibv_destroy_cq(old_cq) == 0);
  REQUIRE(created_cq == old_cq); /* the stand-in reused the address */
  struct ibv_qp* old_qp = make_qp(&reuse_pd, created_cq, NULL);
  fakeverbs_reuse_next_destroyed(FAKE_KIND_QP, create_qp_now);
  REQUIRE(ibv_destroy_qp(old_qp) == 0);
  REQUIRE(created_qp == old_qp);
  REQUIRE(send_signalled(created_qp, 3) == 0);
  CHECK_EQ("polled", drain(created_cq), 3);
  const struct occ_file* f = stats_of(getpid(), NULL);
  const struct occ_cq* c = cq_slot(f, created_cq->handle);
  if (!c) {
    printf("FAIL the CQ created during the destroy lost its slot\n");
    failures++;
    return;
  }
  CHECK_EQ("CQ created during the destroy: polls", polls(c), 2);
  CHECK_EQ("QP created during the destroy: its sends", expected(c), 3);
  int in_use = 0;
  for (int i = 0; i < OCC_MAX_CQS; i++) in_use += f->cqs[i].in_use != 0;
  CHECK_EQ("CQ slots in use (the destroyed CQ's freed)", in_use, 1);
}

/* --- many --------------------------------------------------------------------------------- */

#define MANY_QPS 70000

static void case_many(void) {
  struct ibv_context* context = ibv_open_device(&device0);
  REQUIRE(context);
  struct ibv_pd pd = {.context = context};
  struct ibv_cq* cq = ibv_create_cq(context, 4095, NULL, NULL, 0);
  REQUIRE(cq);
  struct ibv_qp** qps = calloc(MANY_QPS, sizeof(*qps));
  REQUIRE(qps);
  for (int i = 0; i < MANY_QPS; i++) {
    qps[i] = make_qp(&pd, cq, NULL);
    REQUIRE(send_signalled(qps[i], 1) == 0);
    if (i % 1024 == 1023) drain(cq);
  }
  drain(cq);
  const struct occ_file* f = stats_of(getpid(), NULL);
  const struct occ_cq* c = cq_slot(f, cq->handle);
  REQUIRE(c);
  uint64_t lost = f->header.lost_qps;
  printf("%llu of %d QPs not tracked\n", (unsigned long long)lost, MANY_QPS);
  if (lost == 0 || lost >= MANY_QPS - 8192) {
    printf("FAIL lost QPs %llu: want some (more than the tables hold), fewer than %d\n",
           (unsigned long long)lost, MANY_QPS - 8192);
    failures++;
  }
  CHECK_EQ("sends of tracked QPs counted", expected(c), MANY_QPS - lost);
  /* Completions of untracked QPs still land on the tracked CQ (docs/preload.md). */
  CHECK_EQ("completions polled", completed(c), MANY_QPS);
  for (int i = 0; i < MANY_QPS; i++) REQUIRE(ibv_destroy_qp(qps[i]) == 0);
  /* Emptied tables are reusable (tombstones reclaimed): 1,000 new QPs all tracked. */
  for (int i = 0; i < 1000; i++) {
    qps[i] = make_qp(&pd, cq, NULL);
    REQUIRE(send_signalled(qps[i], 1) == 0);
  }
  drain(cq);
  CHECK_EQ("QPs lost after the tables emptied", f->header.lost_qps, lost);
  CHECK_EQ("their sends counted", expected(c), MANY_QPS - lost + 1000);
  CHECK_EQ("their completions", completed(c), MANY_QPS + 1000);
}

/* --- collide ---------------------------------------------------------------------------- */

static void case_collide(void) {
  /* Two contexts close in memory: their addresses differ in few low bits. */
  struct ibv_context* contexts[8];
  for (int i = 0; i < 8; i++) REQUIRE((contexts[i] = ibv_open_device(&device0)));
  struct ibv_context *a = NULL, *b = NULL;
  uint64_t d = UINT64_MAX;
  for (int i = 0; i < 8; i++) {
    for (int j = 0; j < 8; j++) {
      uint64_t x = ((uintptr_t)contexts[i] ^ (uintptr_t)contexts[j]) >> 1;
      if (i != j && x < d) d = x, a = contexts[i], b = contexts[j];
    }
  }
  REQUIRE(d < (1u << 16));
  struct ibv_pd pa = {.context = a}, pb = {.context = b};
  struct ibv_cq* cq_a = ibv_create_cq(a, 63, NULL, NULL, 0);
  struct ibv_cq* cq_b = ibv_create_cq(b, 63, NULL, NULL, 0);
  struct ibv_srq_init_attr srq_attr = {.attr = {.max_wr = 64, .max_sge = 1}};
  struct ibv_srq* srq = ibv_create_srq(&pa, &srq_attr);
  REQUIRE(cq_a && cq_b && srq);
  /* A QP on a, on the SRQ, whose number q1 has a partner q1 ^ d above it; then QP numbers are
   * used up until b's QP gets q2 = q1 ^ d: a ^ q1 << 1 == b ^ q2 << 1. */
  struct ibv_qp* qa;
  for (;;) {
    qa = make_qp(&pa, cq_a, srq);
    if ((qa->qp_num ^ d) > qa->qp_num) break;
    REQUIRE(ibv_destroy_qp(qa) == 0);
  }
  uint32_t q2 = qa->qp_num ^ (uint32_t)d;
  struct ibv_qp* qb;
  for (;;) {
    qb = make_qp(&pb, cq_b, NULL);
    if (qb->qp_num >= q2) break;
    REQUIRE(ibv_destroy_qp(qb) == 0);
  }
  REQUIRE(qb->qp_num == q2);
  struct ibv_recv_wr rwr = {.sg_list = &sge, .num_sge = 1};
  struct ibv_recv_wr* rbad;
  for (int i = 0; i < 10; i++) REQUIRE(ibv_post_srq_recv(srq, &rwr, &rbad) == 0);
  REQUIRE(fakeverbs_deliver(qa, 3) == 3);
  CHECK_EQ("polled", drain(cq_a), 3);
  const struct occ_file* f = stats_of(getpid(), NULL);
  const struct occ_srq* s = srq_slot(f, srq->handle);
  const struct occ_cq* c = cq_slot(f, cq_a->handle);
  REQUIRE(s && c);
  CHECK_EQ("SRQ receives consumed", s->consumed + s->consumed_shared, 3);
  CHECK_EQ("CQ completions (none expected there)", completed(c), 0);
}

/* --- errors ------------------------------------------------------------------------------- */

static void case_errors(void) {
  struct ibv_context* context = ibv_open_device(&device0);
  REQUIRE(context);
  struct ibv_pd pd = {.context = context};
  struct ibv_cq* cq = ibv_create_cq(context, 255, NULL, NULL, 0);
  struct ibv_srq_init_attr srq_attr = {.attr = {.max_wr = 128, .max_sge = 1}};
  struct ibv_srq* srq = ibv_create_srq(&pd, &srq_attr);
  REQUIRE(cq && srq);
  struct ibv_qp* qp = make_qp(&pd, cq, srq); /* sends and SRQ receives complete into cq */
  struct ibv_recv_wr rwr = {.sg_list = &sge, .num_sge = 1};
  struct ibv_recv_wr* rbad;
  for (int i = 0; i < 10; i++) REQUIRE(ibv_post_srq_recv(srq, &rwr, &rbad) == 0);
  REQUIRE(fakeverbs_deliver(qp, 4) == 4); /* 4 good receives */
  fakeverbs_fail_next(5);                 /* 5 sends flushed, opcode garbage (RECV) */
  REQUIRE(send_signalled(qp, 5) == 0);
  CHECK_EQ("polled", drain(cq), 9);
  const struct occ_file* f = stats_of(getpid(), NULL);
  const struct occ_cq* c = cq_slot(f, cq->handle);
  const struct occ_srq* s = srq_slot(f, srq->handle);
  REQUIRE(c && s);
  CHECK_EQ("CQ outstanding (5 sends, their 5 error completions)", expected(c) - completed(c), 0);
  CHECK_EQ("SRQ fill (10 posted, 4 consumed)",
           s->posted + s->posted_shared - (s->consumed + s->consumed_shared), 6);
}

/* --- fork --------------------------------------------------------------------------------- */

static void case_fork(void) {
  struct ibv_context* context = ibv_open_device(&device0);
  REQUIRE(context);
  char parent_path[4096];
  const struct occ_file* parent = stats_of(getpid(), parent_path);
  REQUIRE(parent);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    struct ibv_context* own = ibv_open_device(&device0);
    REQUIRE(own);
    struct ibv_pd pd = {.context = own};
    struct ibv_cq* cq = ibv_create_cq(own, 63, NULL, NULL, 0);
    REQUIRE(cq);
    struct ibv_qp* qp = make_qp(&pd, cq, NULL);
    REQUIRE(send_signalled(qp, 2) == 0);
    drain(cq);
    const struct occ_file* mine = stats_of(getpid(), NULL);
    const struct occ_cq* c = cq_slot(mine, cq->handle);
    if (!c || polled_entries(c) != 2) {
      printf("FAIL the child's CQ is not tracked in a file of its own\n");
      _exit(1);
    }
    if (cq_slot(parent, cq->handle)) {
      printf("FAIL the child's CQ shows in its parent's file\n");
      _exit(1);
    }
    _exit(0);
  }
  int status;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK_EQ("child's checks", WIFEXITED(status) ? WEXITSTATUS(status) : 99, 0);
  CHECK_EQ("parent's file still locked after the child exited", locked(parent_path), 1);
}

/* --- exec --------------------------------------------------------------------------------- */

static void case_exec(const char* self, const char* next) {
  struct ibv_context* context = ibv_open_device(&device0);
  REQUIRE(context);
  struct ibv_cq* cq = ibv_create_cq(context, 15, NULL, NULL, 0);
  REQUIRE(cq);
  char path[4096];
  REQUIRE(stats_of(getpid(), path));
  setenv("OCC_PREVIOUS_FILE", path, 1);
  execl(self, self, next, (char*)NULL);
  REQUIRE(!"exec");
}

static void case_exec_open(void) {
  const char* previous = getenv("OCC_PREVIOUS_FILE");
  REQUIRE(previous);
  CHECK_EQ("the old image's file unlocked (stale) after exec", locked(previous), 0);
  struct ibv_context* context = ibv_open_device(&device0);
  REQUIRE(context);
  struct ibv_cq* cq = ibv_create_cq(context, 7, NULL, NULL, 0);
  REQUIRE(cq);
  char path[4096];
  const struct occ_file* f = stats_of(getpid(), path);
  if (!f || !strcmp(path, previous)) {
    printf("FAIL the new image has no file of its own\n");
    failures++;
    return;
  }
  CHECK_EQ("new image's CQ tracked", cq_slot(f, cq->handle) != NULL, 1);
  CHECK_EQ("new image's file locked", locked(path), 1);
}

int main(int argc, char** argv) {
  REQUIRE(argc >= 2);
  const char* which = argv[1];
  if (!strcmp(which, "threads")) {
    case_threads();
  } else if (!strcmp(which, "contexts")) {
    case_contexts();
  } else if (!strcmp(which, "reuse")) {
    case_reuse();
  } else if (!strcmp(which, "many")) {
    case_many();
  } else if (!strcmp(which, "collide")) {
    case_collide();
  } else if (!strcmp(which, "errors")) {
    case_errors();
  } else if (!strcmp(which, "fork")) {
    case_fork();
  } else if (!strcmp(which, "exec")) {
    case_exec(argv[0], "exec-open");
  } else if (!strcmp(which, "exec-open")) {
    case_exec_open();
  } else if (!strcmp(which, "exec-idle-from")) {
    case_exec(argv[0], "exec-idle");
  } else if (!strcmp(which, "exec-idle")) {
    /* Never opens a device: the old image's file must not stay reported. */
    printf("READY %d\n", getpid());
    fflush(stdout);
    char line[16];
    while (fgets(line, sizeof line, stdin)) {
    }
    return 0;
  } else {
    printf("FAIL unknown case %s\n", which);
    return 1;
  }
  if (failures) return 1;
  printf("PASS %s\n", which);
  return 0;
}
