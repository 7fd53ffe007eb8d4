/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The stats file of librdmascope_preload.so, shared with the exporter: one file per process,
 * /run/rdmascope/<pid>.occ (or $RDMASCOPE_PRELOAD_DIR), mapped shared by the application and
 * read by the exporter. Fixed-width types only; the layout is the ABI between them.
 *
 * Counters are written with plain stores by the application's threads (the post side by the
 * posting threads, the poll side by the polling threads) and read without synchronisation by
 * the exporter: a read may be a few operations stale, never torn (aligned 64-bit words). */
#ifndef RDMASCOPE_PRELOAD_STATS_FILE_H
#define RDMASCOPE_PRELOAD_STATS_FILE_H

#include <stdint.h>

#define OCC_MAGIC 0x31434f4353414d52ULL /* "RMASCOC1" little-endian */
#define OCC_VERSION 1
#define OCC_MAX_CQS 1024
#define OCC_MAX_SRQS 256
#define OCC_DEVICE_LEN 64
#define OCC_COMM_LEN 16

struct occ_header {
  uint64_t magic;
  uint32_t version;
  uint32_t pid;
  uint64_t start_ticks; /* field 22 of /proc/self/stat: tells a reused pid apart */
  char comm[OCC_COMM_LEN];
  uint32_t max_cqs;
  uint32_t max_srqs;
  uint64_t lost_cqs; /* CQs created when every slot was taken: not tracked */
  uint64_t lost_srqs;
  uint64_t reserved[2];
};

/* One completion queue; 64-byte aligned so that two CQs never share a cache line. The post
 * side and the poll side are on separate cache lines too. */
struct occ_cq {
  /* Control path: written by create/resize/destroy. in_use is written last on creation. */
  uint32_t in_use;
  uint32_t handle;  /* ibv_cq.handle: the `cq` label, as in the verbs probes */
  uint32_t entries; /* capacity */
  uint32_t srq_fed; /* a QP receiving from an SRQ completes here */
  char device[OCC_DEVICE_LEN];
  uint8_t pad0[48];
  /* Post side: completions expected (signalled sends, receives posted to QPs without SRQ). */
  uint64_t expected;
  uint64_t peak; /* highest expected - completed seen by a poster */
  uint8_t pad1[48];
  /* Poll side. */
  uint64_t completed;         /* completions polled that were expected above */
  uint64_t polls;             /* ibv_poll_cq calls */
  uint64_t empty_polls;       /* calls that returned nothing */
  uint64_t polled_entries;    /* completions returned, all kinds */
  uint64_t requested_entries; /* summed num_entries asked for: fullness = polled / requested */
  uint8_t pad2[24];
};

struct occ_srq {
  uint32_t in_use;
  uint32_t handle;
  uint32_t max_wr;
  uint32_t limit;
  char device[OCC_DEVICE_LEN];
  uint8_t pad0[48];
  uint64_t posted; /* receive WRs posted with ibv_post_srq_recv */
  uint8_t pad1[56];
  uint64_t consumed; /* receive completions polled for QPs on this SRQ */
  uint8_t pad2[56];
};

struct occ_file {
  struct occ_header header;
  uint8_t pad[128 - sizeof(struct occ_header)];
  struct occ_cq cqs[OCC_MAX_CQS];
  struct occ_srq srqs[OCC_MAX_SRQS];
};

#endif /* RDMASCOPE_PRELOAD_STATS_FILE_H */
