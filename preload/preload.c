/* librdmascope_preload.so: exact CQ and SRQ occupancy of one application, opt-in with
 * LD_PRELOAD. It interposes the libibverbs control path (ibv_open_device, ibv_close_device,
 * create/destroy of CQs, QPs and SRQs) and, in each device context the application opens,
 * replaces the data path operations (poll_cq, post_send, post_recv, post_srq_recv:
 * <infiniband/verbs.h> calls them through context->ops) with wrappers that count into a
 * shared stats file (stats_file.h): per CQ and SRQ, their occupancy; per process, the sizes
 * of the work requests posted and the post-to-poll time of a sample of signalled sends (what
 * `rdmascope profile` reports, issue #14).
 *
 * Hot path: a pointer compare to find the context's original operations, one bounded probe of
 * an open-addressing table to find the CQ's slot, then the counters: exact when several
 * threads post to QPs sharing a CQ or poll one CQ (which the verbs API allows), with plain
 * stores by each counter group's owner thread and atomic adds by the others (stats_file.h);
 * no locks, no allocation. The control path takes one mutex, never across a call into
 * libibverbs. See docs/preload.md for coverage. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stats_file.h"
#include "tables.h"

#define EXPORT __attribute__((visibility("default")))
#define VERSION "IBVERBS_1.1"

/* The data path operations of one opened context, as the provider set them. */
struct context_ops {
  struct ibv_context* context; /* NULL: free entry (closed context); published last */
  int (*poll_cq)(struct ibv_cq*, int, struct ibv_wc*);
  int (*post_send)(struct ibv_qp*, struct ibv_send_wr*, struct ibv_send_wr**);
  int (*post_recv)(struct ibv_qp*, struct ibv_recv_wr*, struct ibv_recv_wr**);
  int (*post_srq_recv)(struct ibv_srq*, struct ibv_recv_wr*, struct ibv_recv_wr**);
};

/* Entries of closed contexts are reused; the data path scans [0, context_high). Contexts
 * beyond MAX_CONTEXTS open at once are not tracked, and their queues are counted in the
 * stats file's lost_* counters (rdma_preload_untracked_queues_total). */
#define MAX_CONTEXTS 256
static struct context_ops contexts[MAX_CONTEXTS];
static int context_high;
static pthread_mutex_t control_lock = PTHREAD_MUTEX_INITIALIZER;

/* What the data path needs to know about a QP. Never freed: a poller may still hold one after
 * its QP is destroyed (a few bytes per destroyed QP). */
struct qp_info {
  struct occ_cq* send_cq;
  struct occ_cq* recv_cq; /* NULL-safe: receives from an SRQ are counted on the SRQ */
  struct occ_srq* srq;
  int sq_sig_all;
};

/* ibv_cq* -> struct occ_cq*: at most OCC_MAX_CQS live, a quarter of the table. */
OCC_TABLE_DEFINE(cq_slots, 12);
/* ibv_srq* -> struct occ_srq* */
OCC_TABLE_DEFINE(srq_slots, 10);
/* ibv_qp* -> struct qp_info*, and (context, qp_num) -> struct qp_info*: 65,536 entries each
 * (1 MiB, touched only as used); beyond what fits, QPs are counted in lost_qps. */
OCC_TABLE_DEFINE(qps, 16);
OCC_TABLE_DEFINE(qp_nums, 16);

static __attribute__((always_inline)) inline const struct context_ops* ops_of(
    struct ibv_context* context) {
  int n = __atomic_load_n(&context_high, __ATOMIC_ACQUIRE);
  if (!context) return NULL; /* a free entry's context is NULL */
  for (int i = 0; i < n; i++) {
    if (__atomic_load_n(&contexts[i].context, __ATOMIC_ACQUIRE) == context) return &contexts[i];
  }
  return NULL;
}

/* Both fields, without collisions: the context's entry index (unique among open contexts) in
 * the high half, the QP number (24 bits) in the low half. Never 0 nor UINT64_MAX. */
static uint64_t qp_num_key(const struct context_ops* ops, uint32_t qp_num) {
  return ((uint64_t)(ops - contexts + 1) << 32) | qp_num;
}

static void device_name(struct ibv_context* context, char* out) {
  if (context && context->device) {
    snprintf(out, OCC_DEVICE_LEN, "%.*s", OCC_DEVICE_LEN - 1, context->device->name);
  }
}

/* Counts an object the library could not track in the stats file header, if there is one. */
#define COUNT_LOST(field)                                  \
  do {                                                     \
    struct occ_file* lost_file_ = occ_file_current();      \
    if (lost_file_) occ_add(&lost_file_->header.field, 1); \
  } while (0)

/* --- Finding the real libibverbs ------------------------------------------------------------
 * RTLD_NEXT finds libibverbs when it is in the global scope (linked by the program, or
 * dlopen'ed RTLD_GLOBAL). A plugin that links libibverbs and is loaded RTLD_LOCAL still binds
 * its ibv_* references to us (we are global), but its libibverbs is invisible to RTLD_NEXT:
 * then every loaded object's own scope is searched (dlopen RTLD_NOLOAD of it, which also keeps
 * the library loaded while we hold its functions). If nothing defines the function, the
 * wrapper fails the call cleanly instead of calling NULL. */

#define MAX_OBJECTS 256
#define OBJECT_NAME 512
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;
static char object_names[MAX_OBJECTS][OBJECT_NAME]; /* under resolve_lock */

static int collect_object_name(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  int* count = data;
  if (info->dlpi_name && info->dlpi_name[0] && *count < MAX_OBJECTS) {
    snprintf(object_names[(*count)++], OBJECT_NAME, "%s", info->dlpi_name);
  }
  return 0;
}

static void* in_loaded_objects(const char* name, void* self) {
  /* dl_iterate_phdr holds the loader's lock: collect the names, dlopen them afterwards. */
  int count = 0;
  dl_iterate_phdr(collect_object_name, &count);
  for (int i = 0; i < count; i++) {
    void* handle = dlopen(object_names[i], RTLD_NOLOAD | RTLD_LAZY);
    if (!handle) continue;
    void* fn = dlvsym(handle, name, VERSION);
    if (fn && fn != self) return fn; /* handle kept: the library must stay loaded */
    dlclose(handle);
  }
  return NULL;
}

static void* real(const char* name, void* self) {
  void* fn = dlvsym(RTLD_NEXT, name, VERSION);
  if (!fn) fn = dlsym(RTLD_NEXT, name); /* a libibverbs built without symbol versions */
  if (fn && fn != self) return fn;
  pthread_mutex_lock(&resolve_lock);
  fn = in_loaded_objects(name, self);
  pthread_mutex_unlock(&resolve_lock);
  if (!fn) {
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
      fprintf(stderr,
              "librdmascope_preload: no libibverbs defines %s@%s; failing the call (ENOSYS)\n",
              name, VERSION);
    }
  }
  return fn;
}

/* The real definition of `name`, resolved on first use (racing first calls all store the
 * same pointer); a missing one is looked up again next time (a library may be loaded later).
 * Returns `fail` with errno ENOSYS if there is none. */
#define REAL_OR(name, fail)                                                                \
  static __typeof__(&name) real_##name##_cache;                                            \
  __typeof__(&name) real_##name = __atomic_load_n(&real_##name##_cache, __ATOMIC_RELAXED); \
  if (!real_##name) {                                                                      \
    real_##name = (__typeof__(&name))real(#name, (void*)&name);                            \
    if (!real_##name) {                                                                    \
      errno = ENOSYS;                                                                      \
      return fail;                                                                         \
    }                                                                                      \
    __atomic_store_n(&real_##name##_cache, real_##name, __ATOMIC_RELAXED);                 \
  }

/* --- Data path wrappers ------------------------------------------------------------------- */

/* Only installed in contexts we track, so the operations are found unless the application
 * uses a context it closed: then fail the call rather than guess. */
static int no_operations(void) {
  errno = ENOSYS;
  return ENOSYS;
}

/* This thread's number for the owner scheme of stats_file.h: 1, 2, ... in order of first
 * use, never reused (a 32-bit count of threads that ever updated a counter); UNNUMBERED until
 * then, a value no owner word ever holds (0: unowned), so that the owner check is one TLS
 * load and one compare. Initial-exec TLS: the library is preloaded, so its TLS is in the
 * static block. */
#define UNNUMBERED UINT32_MAX
static __thread uint32_t thread_number __attribute__((tls_model("initial-exec"))) = UNNUMBERED;
static uint32_t threads_numbered;

static __attribute__((noinline)) uint32_t number_this_thread(void) {
  thread_number = __atomic_add_fetch(&threads_numbered, 1, __ATOMIC_RELAXED);
  return thread_number;
}

static inline __attribute__((always_inline)) uint32_t my_number(void) {
  uint32_t me = thread_number;
  return __builtin_expect(me == UNNUMBERED, 0) ? number_this_thread() : me;
}

/* The first update of a group by this thread: claims it if unowned. */
static __attribute__((noinline)) int claim(uint32_t* owner) {
  uint32_t me = my_number();
  uint32_t current = __atomic_load_n(owner, __ATOMIC_RELAXED);
  if (current == me) return 1;
  return current == 0 &&
         __atomic_compare_exchange_n(owner, &current, me, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* 1 if this thread owns the group whose owner word is `owner` (claiming it if unowned). */
static inline __attribute__((always_inline)) int owns(uint32_t* owner) {
  if (__builtin_expect(__atomic_load_n(owner, __ATOMIC_RELAXED) == thread_number, 1)) return 1;
  return claim(owner);
}

static inline uint64_t load(const uint64_t* word) {
  return __atomic_load_n(word, __ATOMIC_RELAXED);
}

/* A counter of a group: the owner's word with a plain store, another thread's atomically. */
static inline __attribute__((always_inline)) void add_to(uint64_t* word, uint64_t n, int own) {
  if (own) {
    occ_add_own(word, n);
  } else {
    occ_add(word, n);
  }
}

/* This thread's profile shard in the stats file (stats_file.h), NULL if there is no file;
 * *own: whether the thread owns it (else it is the shared shard). */
static inline __attribute__((always_inline)) struct occ_shard* my_shard(int* own) {
  struct occ_file* file = __atomic_load_n(&occ_mapped_file, __ATOMIC_RELAXED);
  if (!file) return NULL;
  uint32_t me = my_number();
  *own = me <= OCC_THREAD_SHARDS;
  return *own ? &file->shards[me - 1] : &file->shard_shared;
}

static inline unsigned ceil_log2(uint64_t x) {
  return x <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(x - 1);
}

/* --- Message sizes ------------------------------------------------------------------------
 * Counted only when asked (RDMASCOPE_PRELOAD_MESSAGE_SIZES=1, which `rdmascope profile` sets):
 * about 3 ns of a post + poll pair that plain occupancy users would otherwise pay. Off, the
 * post path does no size work: one predictable branch on a word written once, at load. */
static int count_sizes;

static inline uint64_t wr_size(const struct ibv_sge* sg, int num_sge) {
  uint64_t size = 0;
  for (int i = 0; i < num_sge; i++) size += sg[i].length;
  return size;
}

static inline __attribute__((always_inline)) void count_size(struct occ_sizes* sizes, uint64_t size,
                                                             int own) {
  unsigned b = ceil_log2(size);
  add_to(&sizes->bytes, size, own);
  add_to(&sizes->buckets[b < OCC_SIZE_BUCKETS - 1 ? b : OCC_SIZE_BUCKETS - 1], 1, own);
}

/* --- Completion latency, sampled ----------------------------------------------------------
 * 1 in sample_period signalled sends of each thread (the first one included) is timed: its
 * (context, QP number, wr_id) and post time go to a small direct-mapped table; a successful
 * send completion that ibv_poll_cq returns with the same key and wr_id gives the post-to-poll
 * time. Polls look at the table only when they return completions and samples are pending,
 * one entry per completion. A sample whose completion never matches (its QP destroyed, an
 * error completion, or polled by another thread before the post call registered it) stays
 * until another sample hashes to its entry and evicts it (header.samples_dropped). An
 * application that reuses one wr_id for several sends in flight on a QP gets the time of the
 * first of them to complete. */
#define SAMPLE_SLOTS 64
#define SAMPLE_FREE 0ull       /* keys are qp_num_key()s: never 0 */
#define SAMPLE_BUSY UINT64_MAX /* nor UINT64_MAX: an entry being written or taken */
struct sample {
  uint64_t key; /* published last (release) */
  uint64_t wr_id;
  uint64_t posted_ns;
};
static struct sample samples[SAMPLE_SLOTS];
static uint32_t samples_pending; /* entries not free: polls skip the table when 0 */
#define DEFAULT_SAMPLE_PERIOD 64
static uint32_t sample_period = DEFAULT_SAMPLE_PERIOD; /* 0: off; set once, at load */
/* Signalled sends of this thread until the next timed one: the first one is timed. */
static __thread uint32_t sample_countdown __attribute__((tls_model("initial-exec"))) = 1;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline struct sample* sample_entry(uint64_t key, uint64_t wr_id) {
  return &samples[((key ^ wr_id) * 0x9E3779B97F4A7C15ull) >> (64 - 6)];
}

static void count_dropped_sample(void) {
  struct occ_file* file = occ_file_current();
  if (file) occ_add(&file->header.samples_dropped, 1);
}

static void record_sample(uint64_t key, uint64_t wr_id, uint64_t posted_ns) {
  struct sample* s = sample_entry(key, wr_id);
  uint64_t old = __atomic_load_n(&s->key, __ATOMIC_RELAXED);
  if (old == SAMPLE_BUSY || !__atomic_compare_exchange_n(&s->key, &old, SAMPLE_BUSY, 0,
                                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    count_dropped_sample(); /* another thread is on this entry: this one is not timed */
    return;
  }
  if (old == SAMPLE_FREE) {
    /* Before the key is published: a poll that sees the key sees a non-zero count. */
    __atomic_add_fetch(&samples_pending, 1, __ATOMIC_RELAXED);
  } else {
    count_dropped_sample(); /* evicted: its completion never came, or has not yet */
  }
  __atomic_store_n(&s->wr_id, wr_id, __ATOMIC_RELAXED);
  __atomic_store_n(&s->posted_ns, posted_ns, __ATOMIC_RELAXED);
  __atomic_store_n(&s->key, key, __ATOMIC_RELEASE);
}

/* Frees the entries whose key matches (key & mask) == want: a destroyed QP's or a closed
 * context's, whose QP numbers may come back. Control path. */
static void forget_samples(uint64_t mask, uint64_t want) {
  for (int i = 0; i < SAMPLE_SLOTS; i++) {
    uint64_t k = __atomic_load_n(&samples[i].key, __ATOMIC_ACQUIRE);
    if (k == SAMPLE_FREE || k == SAMPLE_BUSY || (k & mask) != want) continue;
    if (__atomic_compare_exchange_n(&samples[i].key, &k, SAMPLE_FREE, 0, __ATOMIC_RELEASE,
                                    __ATOMIC_RELAXED)) {
      __atomic_sub_fetch(&samples_pending, 1, __ATOMIC_RELAXED);
    }
  }
}

static void record_latency(uint64_t ns) {
  int own;
  struct occ_shard* shard = my_shard(&own);
  if (!shard) return;
  unsigned b = ceil_log2(ns);
  unsigned i = b <= OCC_LATENCY_MIN_LOG2 ? 0 : b - OCC_LATENCY_MIN_LOG2;
  add_to(&shard->latency_sum_ns, ns, own);
  add_to(&shard->latency_buckets[i < OCC_LATENCY_BUCKETS - 1 ? i : OCC_LATENCY_BUCKETS - 1], 1,
         own);
}

static void note_posted(struct occ_cq* cq, uint64_t count) {
  if (!cq || count == 0) return;
  if (owns(&cq->post_owner)) {
    occ_add_own(&cq->expected, count);
  } else {
    occ_add(&cq->expected_shared, count);
  }
  uint64_t expected = load(&cq->expected) + load(&cq->expected_shared);
  uint64_t completed = load(&cq->polled.completed) + load(&cq->polled_shared.completed);
  uint64_t outstanding = expected - completed;
  if (outstanding > expected) return; /* completed read ahead of expected: no peak */
  uint64_t peak = load(&cq->peak);
  while (outstanding > peak && !__atomic_compare_exchange_n(&cq->peak, &peak, outstanding, 1,
                                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

/* Receives of QPs on an SRQ were posted to the SRQ, not to this CQ: count them there. An
 * error completion's opcode is undefined (only wr_id, status, qp_num and vendor_err are
 * valid): it is counted on the SRQ only when its QP receives from an SRQ into this CQ and
 * sends elsewhere, so that it cannot be a send; otherwise on the CQ. */
static __attribute__((noinline)) uint64_t count_srq_receives(struct ibv_cq* cq,
                                                             const struct context_ops* ops,
                                                             const struct ibv_wc* wc, int n) {
  uint64_t direct = 0;
  for (int i = 0; i < n; i++) {
    struct qp_info* qp = occ_table_find(&qp_nums, qp_num_key(ops, wc[i].qp_num));
    if (qp && qp->srq) {
      int receive = wc[i].status == IBV_WC_SUCCESS
                        ? (wc[i].opcode & IBV_WC_RECV) != 0
                        : qp->send_cq != qp->recv_cq && qp->recv_cq &&
                              qp->recv_cq == occ_table_find(&cq_slots, (uintptr_t)cq);
      if (receive) {
        if (owns(&qp->srq->consume_owner)) {
          occ_add_own(&qp->srq->consumed, 1);
        } else {
          occ_add(&qp->srq->consumed_shared, 1);
        }
        continue;
      }
    }
    direct++;
  }
  return direct;
}

/* The sampled sends among the n completions a poll returned (samples_pending != 0). */
static __attribute__((noinline)) void match_samples(const struct context_ops* ops,
                                                    const struct ibv_wc* wc, int n) {
  uint64_t now = 0;
  for (int i = 0; i < n; i++) {
    /* A send's completion: only successful ones have a defined opcode. */
    if (wc[i].status != IBV_WC_SUCCESS || (wc[i].opcode & IBV_WC_RECV)) continue;
    uint64_t key = qp_num_key(ops, wc[i].qp_num);
    struct sample* s = sample_entry(key, wc[i].wr_id);
    uint64_t k = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
    if (k != key || __atomic_load_n(&s->wr_id, __ATOMIC_RELAXED) != wc[i].wr_id) continue;
    if (!__atomic_compare_exchange_n(&s->key, &k, SAMPLE_BUSY, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED)) {
      continue;
    }
    /* Taken: nobody writes it now. Another sample of the QP may have replaced it meanwhile. */
    if (__atomic_load_n(&s->wr_id, __ATOMIC_RELAXED) != wc[i].wr_id) {
      __atomic_store_n(&s->key, key, __ATOMIC_RELEASE);
      continue;
    }
    uint64_t posted = __atomic_load_n(&s->posted_ns, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&samples_pending, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&s->key, SAMPLE_FREE, __ATOMIC_RELEASE);
    if (!now) now = now_ns();
    record_latency(now > posted ? now - posted : 0);
  }
}

/* A poll that returned n > 0 completions. */
static inline __attribute__((always_inline)) void count_completions(
    struct ibv_cq* cq, const struct context_ops* ops, struct occ_cq* slot, int num_entries,
    const struct ibv_wc* wc, int n) {
  uint64_t direct = __atomic_load_n(&slot->srq_fed, __ATOMIC_RELAXED)
                        ? count_srq_receives(cq, ops, wc, n)
                        : (uint64_t)n;
  if (__atomic_load_n(&samples_pending, __ATOMIC_RELAXED)) match_samples(ops, wc, n);
  int own = owns(&slot->poll_owner);
  struct occ_poll_counters* c = own ? &slot->polled : &slot->polled_shared;
  add_to(&c->nonempty_polls, 1, own);
  add_to(&c->requested_entries, (uint64_t)num_entries, own);
  add_to(&c->polled_entries, (uint64_t)n, own);
  add_to(&c->completed, direct, own);
}

/* The hot path of a busy-polling application is the empty poll: one counter word. */
static int wrap_poll_cq(struct ibv_cq* cq, int num_entries, struct ibv_wc* wc) {
  const struct context_ops* ops = ops_of(cq->context);
  if (!ops) return -no_operations();
  int n = ops->poll_cq(cq, num_entries, wc);
  struct occ_cq* slot = occ_table_find(&cq_slots, (uintptr_t)cq);
  if (!slot) return n;
  if (__builtin_expect(n > 0, 0)) {
    count_completions(cq, ops, slot, num_entries, wc, n);
  } else if (__builtin_expect(owns(&slot->poll_owner), 1)) {
    occ_add_own(&slot->polled.empty_polls, 1);
  } else {
    occ_add(&slot->polled_shared.empty_polls, 1);
  }
  return n;
}

/* The countdown reached 0 at a signalled send: time it (from before the post call when the
 * countdown said so then, `*posted_ns` != 0) and restart the countdown. */
static __attribute__((noinline)) void sample_send(const struct context_ops* ops,
                                                  const struct ibv_qp* qp,
                                                  const struct ibv_send_wr* w,
                                                  uint64_t* posted_ns) {
  uint32_t period = sample_period;
  sample_countdown = period ? period : UINT32_MAX;
  if (!period) return;
  if (!*posted_ns) *posted_ns = now_ns();
  record_sample(qp_num_key(ops, qp->qp_num), w->wr_id, *posted_ns);
}

static int wrap_post_send(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad) {
  const struct context_ops* ops = ops_of(qp->context);
  if (!ops) {
    *bad = wr;
    return no_operations();
  }
  /* The next signalled send is timed: from before the call, so that a completion polled at
   * once by another thread is not earlier than its post. */
  uint64_t posted_ns = sample_countdown == 1 && sample_period ? now_ns() : 0;
  int rc = ops->post_send(qp, wr, bad);
  struct qp_info* info = occ_table_find(&qps, (uintptr_t)qp);
  if (!info) return rc;
  int own = 0;
  struct occ_shard* shard = count_sizes ? my_shard(&own) : NULL;
  uint64_t signalled = 0;
  for (struct ibv_send_wr* w = wr; w && !(rc && w == *bad); w = w->next) {
    if (shard) count_size(&shard->send, wr_size(w->sg_list, w->num_sge), own);
    if (info->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED)) {
      signalled++;
      if (__builtin_expect(--sample_countdown == 0, 0)) sample_send(ops, qp, w, &posted_ns);
    }
  }
  note_posted(info->send_cq, signalled);
  return rc;
}

/* Counts the receive work requests that were posted (all of them, or those before *bad),
 * and their sizes. */
static uint64_t count_receives(struct ibv_recv_wr* wr, int rc, struct ibv_recv_wr** bad) {
  int own = 0;
  struct occ_shard* shard = count_sizes ? my_shard(&own) : NULL;
  uint64_t posted = 0;
  for (struct ibv_recv_wr* w = wr; w && !(rc && w == *bad); w = w->next) {
    if (shard) count_size(&shard->recv, wr_size(w->sg_list, w->num_sge), own);
    posted++;
  }
  return posted;
}

static int wrap_post_recv(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad) {
  const struct context_ops* ops = ops_of(qp->context);
  if (!ops) {
    *bad = wr;
    return no_operations();
  }
  int rc = ops->post_recv(qp, wr, bad);
  struct qp_info* info = occ_table_find(&qps, (uintptr_t)qp);
  if (!info) return rc;
  note_posted(info->recv_cq, count_receives(wr, rc, bad));
  return rc;
}

static int wrap_post_srq_recv(struct ibv_srq* srq, struct ibv_recv_wr* wr,
                              struct ibv_recv_wr** bad) {
  const struct context_ops* ops = ops_of(srq->context);
  if (!ops) {
    *bad = wr;
    return no_operations();
  }
  int rc = ops->post_srq_recv(srq, wr, bad);
  struct occ_srq* slot = occ_table_find(&srq_slots, (uintptr_t)srq);
  if (!slot) return rc;
  uint64_t posted = count_receives(wr, rc, bad);
  if (owns(&slot->post_owner)) {
    occ_add_own(&slot->posted, posted);
  } else {
    occ_add(&slot->posted_shared, posted);
  }
  return rc;
}

/* --- Control path interposers ------------------------------------------------------------- */

/* fork() while another thread holds one of the library's locks would leave the child's copy
 * locked for good: fork waits until none is held. */
static void lock_for_fork(void) {
  pthread_mutex_lock(&resolve_lock);
  pthread_mutex_lock(&control_lock);
}
static void unlock_after_fork(void) {
  pthread_mutex_unlock(&control_lock);
  pthread_mutex_unlock(&resolve_lock);
}
/* RDMASCOPE_PRELOAD_SAMPLE: time 1 in N signalled sends (0: none). A bad value keeps the
 * default, with one line on stderr. */
static void read_sample_period(void) {
  const char* text = getenv("RDMASCOPE_PRELOAD_SAMPLE");
  if (!text || !*text) return;
  char* end;
  errno = 0;
  unsigned long value = strtoul(text, &end, 10);
  if (errno || *end || text[0] == '-' || value > UINT32_MAX) {
    fprintf(stderr,
            "librdmascope_preload: RDMASCOPE_PRELOAD_SAMPLE=%s is not a count; timing 1 in %d "
            "signalled sends\n",
            text, DEFAULT_SAMPLE_PERIOD);
    return;
  }
  sample_period = (uint32_t)value;
}

/* RDMASCOPE_PRELOAD_MESSAGE_SIZES=1: count message sizes (off otherwise, and the stats file
 * says so: the exporter then shows no size series rather than zeros). */
static void read_message_sizes(void) {
  const char* text = getenv("RDMASCOPE_PRELOAD_MESSAGE_SIZES");
  count_sizes = text && text[0] == '1' && text[1] == 0;
}

__attribute__((constructor)) static void initialise(void) {
  pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork);
  read_sample_period();
  read_message_sizes();
}

EXPORT struct ibv_context* ibv_open_device(struct ibv_device* device) {
  REAL_OR(ibv_open_device, NULL);
  struct ibv_context* context = real_ibv_open_device(device);
  if (!context) return context;
  pthread_mutex_lock(&control_lock);
  struct occ_file* file = occ_file_open();
  if (!file) goto out;
  file->header.sample_period = sample_period;
  file->header.sizes_off = !count_sizes;
  struct context_ops* ops = NULL;
  for (int i = 0; i < context_high && !ops; i++) {
    if (!contexts[i].context) ops = &contexts[i];
  }
  if (!ops && context_high < MAX_CONTEXTS) ops = &contexts[context_high];
  if (!ops) goto out; /* not tracked: its queues are counted as lost when created */
  ops->poll_cq = context->ops.poll_cq;
  ops->post_send = context->ops.post_send;
  ops->post_recv = context->ops.post_recv;
  ops->post_srq_recv = context->ops.post_srq_recv;
  __atomic_store_n(&ops->context, context, __ATOMIC_RELEASE);
  if (ops == &contexts[context_high]) {
    __atomic_store_n(&context_high, context_high + 1, __ATOMIC_RELEASE);
  }
  if (ops->poll_cq) context->ops.poll_cq = wrap_poll_cq;
  if (ops->post_send) context->ops.post_send = wrap_post_send;
  if (ops->post_recv) context->ops.post_recv = wrap_post_recv;
  if (ops->post_srq_recv) context->ops.post_srq_recv = wrap_post_srq_recv;
out:
  pthread_mutex_unlock(&control_lock);
  return context;
}

/* Forgets a context's (context, qp_num) keys, whose index a later context may reuse: QPs an
 * application did not destroy before closing their context. */
static void forget_qp_nums(const struct context_ops* ops) {
  const uint64_t high = (uint64_t)(ops - contexts + 1) << 32;
  for (uint32_t i = 0; i < (1u << qp_nums.bits); i++) {
    uint64_t key = qp_nums.entries[i].key;
    if (key != OCC_KEY_REMOVED && (key & ~0xffffffffull) == high) {
      occ_table_remove(&qp_nums, key);
    }
  }
}

/* The context's entry goes before the provider frees it: a context opened later at the same
 * address gets its own provider's operations, never these. */
EXPORT int ibv_close_device(struct ibv_context* context) {
  REAL_OR(ibv_close_device, -1);
  struct context_ops saved = {0};
  pthread_mutex_lock(&control_lock);
  struct context_ops* ops = (struct context_ops*)ops_of(context);
  if (ops) {
    saved = *ops;
    /* Calls racing with the close go straight to the provider. */
    if (saved.poll_cq) context->ops.poll_cq = saved.poll_cq;
    if (saved.post_send) context->ops.post_send = saved.post_send;
    if (saved.post_recv) context->ops.post_recv = saved.post_recv;
    if (saved.post_srq_recv) context->ops.post_srq_recv = saved.post_srq_recv;
    __atomic_store_n(&ops->context, NULL, __ATOMIC_RELEASE);
    forget_qp_nums(ops);
    forget_samples(~0xffffffffull, qp_num_key(ops, 0));
  }
  pthread_mutex_unlock(&control_lock);
  int rc = real_ibv_close_device(context);
  if (rc != 0 && ops) { /* still open: track it again, in the same entry */
    pthread_mutex_lock(&control_lock);
    if (!ops->context) {
      __atomic_store_n(&ops->context, context, __ATOMIC_RELEASE);
      if (saved.poll_cq) context->ops.poll_cq = wrap_poll_cq;
      if (saved.post_send) context->ops.post_send = wrap_post_send;
      if (saved.post_recv) context->ops.post_recv = wrap_post_recv;
      if (saved.post_srq_recv) context->ops.post_srq_recv = wrap_post_srq_recv;
    }
    pthread_mutex_unlock(&control_lock);
  }
  return rc;
}

EXPORT struct ibv_cq* ibv_create_cq(struct ibv_context* context, int cqe, void* cq_context,
                                    struct ibv_comp_channel* channel, int comp_vector) {
  REAL_OR(ibv_create_cq, NULL);
  struct ibv_cq* cq = real_ibv_create_cq(context, cqe, cq_context, channel, comp_vector);
  if (!cq) return cq;
  pthread_mutex_lock(&control_lock);
  if (!ops_of(context)) {
    COUNT_LOST(lost_cqs);
  } else {
    struct occ_cq* slot = occ_cq_alloc();
    if (slot) {
      slot->handle = cq->handle;
      slot->entries = (uint32_t)cq->cqe;
      device_name(context, slot->device);
      __atomic_store_n(&slot->in_use, 1, __ATOMIC_RELEASE);
      if (!occ_table_insert(&cq_slots, (uintptr_t)cq, slot)) { /* cannot happen: 4x room */
        occ_cq_free(slot);
        COUNT_LOST(lost_cqs);
      }
    }
  }
  pthread_mutex_unlock(&control_lock);
  return cq;
}

EXPORT int ibv_resize_cq(struct ibv_cq* cq, int cqe) {
  REAL_OR(ibv_resize_cq, ENOSYS);
  int rc = real_ibv_resize_cq(cq, cqe);
  struct occ_cq* slot = occ_table_find(&cq_slots, (uintptr_t)cq);
  if (rc == 0 && slot) slot->entries = (uint32_t)cq->cqe;
  return rc;
}

/* Destroy: the entry is removed before the real destroy (under the lock), so that an object
 * created at the same address as soon as the provider frees this one keeps its own entry; it
 * is put back if the destroy fails. */
EXPORT int ibv_destroy_cq(struct ibv_cq* cq) {
  REAL_OR(ibv_destroy_cq, ENOSYS);
  pthread_mutex_lock(&control_lock);
  struct occ_cq* slot = occ_table_remove(&cq_slots, (uintptr_t)cq);
  pthread_mutex_unlock(&control_lock);
  int rc = real_ibv_destroy_cq(cq);
  if (!slot) return rc;
  pthread_mutex_lock(&control_lock);
  if (rc == 0) {
    occ_cq_free(slot);
  } else if (!occ_table_insert(&cq_slots, (uintptr_t)cq, slot)) {
    occ_cq_free(slot);
  }
  pthread_mutex_unlock(&control_lock);
  return rc;
}

static int track_qp(struct ibv_qp* qp, const struct context_ops* ops, struct qp_info* info) {
  if (!occ_table_insert(&qps, (uintptr_t)qp, info)) return 0;
  if (occ_table_insert(&qp_nums, qp_num_key(ops, qp->qp_num), info)) return 1;
  occ_table_remove(&qps, (uintptr_t)qp);
  return 0;
}

EXPORT struct ibv_qp* ibv_create_qp(struct ibv_pd* pd, struct ibv_qp_init_attr* attr) {
  REAL_OR(ibv_create_qp, NULL);
  struct ibv_qp* qp = real_ibv_create_qp(pd, attr);
  if (!qp) return qp;
  struct qp_info* info = calloc(1, sizeof(*info));
  pthread_mutex_lock(&control_lock);
  const struct context_ops* ops = ops_of(qp->context);
  struct occ_file* file = occ_file_current();
  if (!file) {
    free(info);
  } else if (!ops || !info) { /* an untracked context (see MAX_CONTEXTS), or no memory */
    free(info);
    COUNT_LOST(lost_qps);
  } else {
    info->send_cq = occ_table_find(&cq_slots, (uintptr_t)attr->send_cq);
    info->recv_cq = occ_table_find(&cq_slots, (uintptr_t)attr->recv_cq);
    info->srq = attr->srq ? occ_table_find(&srq_slots, (uintptr_t)attr->srq) : NULL;
    info->sq_sig_all = attr->sq_sig_all;
    if (track_qp(qp, ops, info)) {
      if (info->srq && info->recv_cq)
        __atomic_store_n(&info->recv_cq->srq_fed, 1, __ATOMIC_RELAXED);
    } else {
      free(info); /* never published */
      COUNT_LOST(lost_qps);
    }
  }
  pthread_mutex_unlock(&control_lock);
  return qp;
}

EXPORT int ibv_destroy_qp(struct ibv_qp* qp) {
  REAL_OR(ibv_destroy_qp, ENOSYS);
  pthread_mutex_lock(&control_lock);
  const struct context_ops* ops = ops_of(qp->context);
  uint64_t num_key = ops ? qp_num_key(ops, qp->qp_num) : 0;
  /* Kept allocated: a poller may still hold it. */
  struct qp_info* info = occ_table_remove(&qps, (uintptr_t)qp);
  if (info && num_key) occ_table_remove(&qp_nums, num_key);
  if (num_key) forget_samples(UINT64_MAX, num_key); /* its number may come back */
  pthread_mutex_unlock(&control_lock);
  int rc = real_ibv_destroy_qp(qp);
  if (rc != 0 && info && ops) {
    pthread_mutex_lock(&control_lock);
    if (!track_qp(qp, ops, info)) COUNT_LOST(lost_qps);
    pthread_mutex_unlock(&control_lock);
  }
  return rc;
}

EXPORT struct ibv_srq* ibv_create_srq(struct ibv_pd* pd, struct ibv_srq_init_attr* attr) {
  REAL_OR(ibv_create_srq, NULL);
  struct ibv_srq* srq = real_ibv_create_srq(pd, attr);
  if (!srq) return srq;
  pthread_mutex_lock(&control_lock);
  if (!ops_of(pd->context)) {
    COUNT_LOST(lost_srqs);
  } else {
    struct occ_srq* slot = occ_srq_alloc();
    if (slot) {
      slot->handle = srq->handle;
      slot->max_wr = attr->attr.max_wr;
      slot->limit = 0; /* ibv_create_srq ignores the limit: armed by ibv_modify_srq */
      device_name(pd->context, slot->device);
      __atomic_store_n(&slot->in_use, 1, __ATOMIC_RELEASE);
      if (!occ_table_insert(&srq_slots, (uintptr_t)srq, slot)) {
        occ_srq_free(slot);
        COUNT_LOST(lost_srqs);
      }
    }
  }
  pthread_mutex_unlock(&control_lock);
  return srq;
}

EXPORT int ibv_modify_srq(struct ibv_srq* srq, struct ibv_srq_attr* attr, int mask) {
  REAL_OR(ibv_modify_srq, ENOSYS);
  int rc = real_ibv_modify_srq(srq, attr, mask);
  struct occ_srq* slot = occ_table_find(&srq_slots, (uintptr_t)srq);
  if (rc == 0 && slot) {
    if (mask & IBV_SRQ_LIMIT) slot->limit = attr->srq_limit;
    if (mask & IBV_SRQ_MAX_WR) slot->max_wr = attr->max_wr;
  }
  return rc;
}

EXPORT int ibv_destroy_srq(struct ibv_srq* srq) {
  REAL_OR(ibv_destroy_srq, ENOSYS);
  pthread_mutex_lock(&control_lock);
  struct occ_srq* slot = occ_table_remove(&srq_slots, (uintptr_t)srq);
  pthread_mutex_unlock(&control_lock);
  int rc = real_ibv_destroy_srq(srq);
  if (!slot) return rc;
  pthread_mutex_lock(&control_lock);
  if (rc == 0) {
    occ_srq_free(slot);
  } else if (!occ_table_insert(&srq_slots, (uintptr_t)srq, slot)) {
    occ_srq_free(slot);
  }
  pthread_mutex_unlock(&control_lock);
  return rc;
}

/* The device disarms an SRQ's limit when SRQ_LIMIT_REACHED fires. */
EXPORT int ibv_get_async_event(struct ibv_context* context, struct ibv_async_event* event) {
  REAL_OR(ibv_get_async_event, -1);
  int rc = real_ibv_get_async_event(context, event);
  if (rc == 0 && event->event_type == IBV_EVENT_SRQ_LIMIT_REACHED) {
    struct occ_srq* slot = occ_table_find(&srq_slots, (uintptr_t)event->element.srq);
    if (slot) slot->limit = 0;
  }
  return rc;
}
