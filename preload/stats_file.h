/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The stats file of librdmascope_preload.so, shared with the exporter: one file per process
 * image, mapped shared by the application and read by the exporter. Fixed-width types only;
 * the layout is the ABI between them (the exporter reads its own OCC_VERSION only).
 *
 * Name: <dir>/<pid namespace inode>-<pid>-<start ticks>-<n>.occ in /run/rdmascope (or
 * $RDMASCOPE_PRELOAD_DIR), created with O_EXCL: unique across pid namespaces sharing the
 * directory; n (0, 1, ...) tells apart the images of one process across exec.
 * Liveness: the application holds an OFD write lock (F_OFD_SETLK) on the whole file for its
 * life, through a close-on-exec descriptor that forked children close. A file nobody holds
 * locked is stale (its process exited, was killed or exec'd): the exporter deletes it. The
 * lock is taken before the file is sized, so a file of the right size is always locked while
 * its process lives.
 *
 * Counters are read without synchronisation by the exporter: a read may be a few operations
 * stale, never torn (aligned 64-bit words written whole). */
#ifndef RDMASCOPE_PRELOAD_STATS_FILE_H
#define RDMASCOPE_PRELOAD_STATS_FILE_H

#include <stdint.h>

#define OCC_MAGIC 0x31434f4353414d52ULL /* "RMASCOC1" little-endian */
/* 2: owner/shared counter words, pid_ns, lost_qps; file naming and OFD-lock liveness
 * 3: empty and non-empty polls counted apart (polls = their sum; requested entries summed over
 *    non-empty polls only), per-thread shards of message sizes and completion latency */
#define OCC_VERSION 3
/* In the stats directory, beside the files: readers (the exporter's occupancy collector, and
 * `rdmascope profile`'s) hold an OFD read lock on it while they run. A library exiting while
 * one does leaves its file (stale: its lock gone) for them to serve once and delete; with none,
 * it deletes the file itself, so files of exited processes do not pile up in /run. */
#define OCC_READERS_FILE ".readers"
#define OCC_MAX_CQS 1024
#define OCC_MAX_SRQS 256
#define OCC_DEVICE_LEN 64
#define OCC_COMM_LEN 16

struct occ_header {
  uint64_t magic;
  uint32_t version;
  uint32_t pid;         /* in the application's pid namespace (pid_ns) */
  uint64_t start_ticks; /* field 22 of /proc/self/stat: tells a reused pid apart */
  char comm[OCC_COMM_LEN];
  uint32_t max_cqs;
  uint32_t max_srqs;
  uint64_t lost_cqs; /* CQs not tracked: every slot taken, or their context untracked */
  uint64_t lost_srqs;
  uint64_t pid_ns;        /* inode of /proc/self/ns/pid */
  uint64_t lost_qps;      /* QPs the library could not track (its QP tables were full) */
  uint32_t sample_period; /* 1 in this many signalled sends is timed; 0: sampling off */
  /* 1: message sizes not counted (the library's default since the post path stopped paying for
   * them unasked; RDMASCOPE_PRELOAD_MESSAGE_SIZES=1 or `rdmascope profile` turn them on): the
   * exporter then exports no size series. 0 in files of earlier v3 libraries, which counted
   * them always: the word was reserved (0) there, so this stays version 3. */
  uint32_t sizes_off;
  uint64_t samples_dropped; /* timed sends whose sample was evicted before its completion */
};

/* Counters updated by several threads are exact without a lock prefix on the common path:
 * each group has an owner, the first thread to update it (owner: a small per-thread number,
 * never an address), which updates the `own` words with plain loads and stores (it is their
 * only writer); any other thread adds to the `shared` words with atomic read-modify-write.
 * A reader sums both. */
struct occ_poll_counters {
  uint64_t completed; /* completions polled that were expected (post side) */
  /* ibv_poll_cq calls = empty_polls + nonempty_polls: an empty poll, the most frequent call of
   * a busy-polling application, writes one word. */
  uint64_t empty_polls;       /* calls that returned nothing (0, or an error) */
  uint64_t nonempty_polls;    /* calls that returned completions */
  uint64_t polled_entries;    /* completions returned, all kinds */
  uint64_t requested_entries; /* num_entries summed over the non-empty calls: their fullness */
};

/* One completion queue; 64-byte aligned so that two CQs never share a cache line. The post
 * side, the owning poller and the other pollers are on separate cache lines too. */
struct occ_cq {
  /* Control path: written by create/resize/destroy. in_use is written last on creation. */
  uint32_t in_use;
  uint32_t handle;  /* ibv_cq.handle: the `cq` label, as in the verbs probes */
  uint32_t entries; /* capacity */
  uint32_t srq_fed; /* a QP receiving from an SRQ completes here */
  char device[OCC_DEVICE_LEN];
  uint8_t pad0[48];
  /* Post side: completions expected (signalled sends, receives posted to QPs without SRQ). */
  uint64_t expected;        /* by post_owner */
  uint64_t expected_shared; /* by other posting threads */
  uint64_t peak;            /* highest expected - completed seen by a poster */
  uint32_t post_owner;
  uint8_t pad1[36];
  /* Poll side. */
  struct occ_poll_counters polled; /* by poll_owner */
  uint32_t poll_owner;
  uint8_t pad2[20];
  struct occ_poll_counters polled_shared; /* by other polling threads */
  uint8_t pad3[24];
};

struct occ_srq {
  uint32_t in_use;
  uint32_t handle;
  uint32_t max_wr;
  uint32_t limit;
  char device[OCC_DEVICE_LEN];
  uint8_t pad0[48];
  uint64_t posted; /* receive WRs posted with ibv_post_srq_recv, by post_owner */
  uint64_t posted_shared;
  uint32_t post_owner;
  uint8_t pad1[44];
  uint64_t consumed; /* receive completions polled for QPs on this SRQ, by consume_owner */
  uint64_t consumed_shared;
  uint32_t consume_owner;
  uint8_t pad2[44];
};

/* Per-process profile counters (message sizes, completion latency), in shards: thread number
 * t (1, 2, ... in order of first use, never reused; preload.c) owns shards[t - 1] and writes
 * it with plain loads and stores; threads numbered beyond OCC_THREAD_SHARDS share
 * `shard_shared` with atomic adds. A reader sums all of them. Counts are the bucket sums, so
 * that a histogram read while it is updated stays consistent (count = sum of its buckets). */
#define OCC_THREAD_SHARDS 64
/* Bucket b counts sizes in (2^(b-1), 2^b] bytes (b = 0: 0 and 1 byte), b = 0..31; bucket 32
 * counts sizes above 2^31. A work request's size is the sum of its scatter-gather lengths. */
#define OCC_SIZE_BUCKETS 33
/* Bucket i counts post-to-poll times in (2^(i+6), 2^(i+7)] ns (i = 0: up to 128 ns),
 * i = 0..23 (up to 2^30 ns); bucket 24 counts longer ones. */
#define OCC_LATENCY_MIN_LOG2 7
#define OCC_LATENCY_BUCKETS 25

struct occ_sizes {
  uint64_t bytes; /* summed sizes */
  uint64_t buckets[OCC_SIZE_BUCKETS];
};

struct occ_shard {
  struct occ_sizes send; /* ibv_post_send work requests */
  struct occ_sizes recv; /* ibv_post_recv and ibv_post_srq_recv work requests */
  uint64_t latency_sum_ns;
  uint64_t latency_buckets[OCC_LATENCY_BUCKETS];
  uint8_t pad[16];
};

struct occ_file {
  struct occ_header header;
  uint8_t pad[128 - sizeof(struct occ_header)];
  struct occ_cq cqs[OCC_MAX_CQS];
  struct occ_srq srqs[OCC_MAX_SRQS];
  struct occ_shard shards[OCC_THREAD_SHARDS];
  struct occ_shard shard_shared;
};

#ifdef __cplusplus
static_assert(sizeof(struct occ_cq) == 320, "occ_cq: 5 cache lines");
static_assert(sizeof(struct occ_srq) == 256, "occ_srq: 4 cache lines");
static_assert(sizeof(struct occ_shard) == 768, "occ_shard: 12 cache lines");
#else
_Static_assert(sizeof(struct occ_cq) == 320, "occ_cq: 5 cache lines");
_Static_assert(sizeof(struct occ_srq) == 256, "occ_srq: 4 cache lines");
_Static_assert(sizeof(struct occ_shard) == 768, "occ_shard: 12 cache lines");
#endif

#endif /* RDMASCOPE_PRELOAD_STATS_FILE_H */
