/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared between probes/verbs.bpf.c and the exporter: the verbs control path (CQ, QP and SRQ
 * lifecycle, asynchronous events). Fixed-width types only; the layout is the ABI between
 * kernel and user space. */
#ifndef RDMASCOPE_PROBES_VERBS_H
#define RDMASCOPE_PROBES_VERBS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define VERBS_COMM_LEN 16
#define VERBS_DEVICE_NAME_LEN 64   /* IBV_SYSFS_NAME_MAX */
#define VERBS_ASYNC_EVENT_TYPES 32 /* enum ibv_event_type has 20 today */

/* Offsets of the fields read from libibverbs' structs in the application's memory, from
 * <infiniband/verbs.h> (x86-64, LP64). The exporter static_asserts each one against the
 * header it is built with (exporter/bpf/verbs_probe.cc). */
#define VERBS_CONTEXT_DEVICE 0        /* struct ibv_context: device */
#define VERBS_DEVICE_NAME 24          /* struct ibv_device: name[64] */
#define VERBS_CQ_CONTEXT 0            /* struct ibv_cq: context */
#define VERBS_CQ_HANDLE 24            /* struct ibv_cq: handle */
#define VERBS_CQ_CQE 28               /* struct ibv_cq: cqe */
#define VERBS_QP_CONTEXT 0            /* struct ibv_qp: context */
#define VERBS_QP_HANDLE 48            /* struct ibv_qp: handle */
#define VERBS_QP_NUM 52               /* struct ibv_qp: qp_num */
#define VERBS_QP_INIT_SEND_CQ 8       /* struct ibv_qp_init_attr: send_cq */
#define VERBS_QP_INIT_RECV_CQ 16      /* struct ibv_qp_init_attr: recv_cq */
#define VERBS_QP_INIT_SRQ 24          /* struct ibv_qp_init_attr: srq */
#define VERBS_QP_INIT_MAX_SEND_WR 32  /* struct ibv_qp_init_attr: cap.max_send_wr */
#define VERBS_QP_INIT_MAX_RECV_WR 36  /* struct ibv_qp_init_attr: cap.max_recv_wr */
#define VERBS_QP_INIT_MAX_SEND_SGE 40 /* struct ibv_qp_init_attr: cap.max_send_sge */
#define VERBS_QP_INIT_MAX_RECV_SGE 44 /* struct ibv_qp_init_attr: cap.max_recv_sge */
#define VERBS_QP_INIT_QP_TYPE 52      /* struct ibv_qp_init_attr: qp_type */
#define VERBS_QP_ATTR_STATE 0         /* struct ibv_qp_attr: qp_state */
#define VERBS_SRQ_CONTEXT 0           /* struct ibv_srq: context */
#define VERBS_SRQ_HANDLE 24           /* struct ibv_srq: handle */
#define VERBS_SRQ_INIT_MAX_WR 8       /* struct ibv_srq_init_attr: attr.max_wr */
#define VERBS_SRQ_ATTR_MAX_WR 0       /* struct ibv_srq_attr: max_wr */
#define VERBS_SRQ_ATTR_LIMIT 8        /* struct ibv_srq_attr: srq_limit */
#define VERBS_ASYNC_EVENT_ELEMENT 0   /* struct ibv_async_event: element (cq, qp, srq...) */
#define VERBS_ASYNC_EVENT_TYPE 8      /* struct ibv_async_event: event_type */

/* enum ibv_qp_attr_mask, enum ibv_srq_attr_mask, enum ibv_event_type values we act on. */
#define VERBS_QP_STATE_MASK 1
#define VERBS_SRQ_MAX_WR_MASK 1
#define VERBS_SRQ_LIMIT_MASK 2
#define VERBS_EVENT_SRQ_LIMIT_REACHED 15

enum verbs_call_kind {
  VERBS_CALL_CREATE_CQ = 1,
  VERBS_CALL_RESIZE_CQ,
  VERBS_CALL_DESTROY_CQ,
  VERBS_CALL_CREATE_QP,
  VERBS_CALL_MODIFY_QP,
  VERBS_CALL_DESTROY_QP,
  VERBS_CALL_CREATE_SRQ,
  VERBS_CALL_MODIFY_SRQ,
  VERBS_CALL_DESTROY_SRQ,
  VERBS_CALL_GET_ASYNC_EVENT,
};

/* Per-thread state between entry and return. */
struct verbs_call {
  __u64 object; /* the cq, qp or srq passed in; for create calls, the context or pd */
  __u64 attr;   /* the attribute struct passed in (init attr, qp attr, srq attr, event) */
  __u32 kind;   /* enum verbs_call_kind */
  __u32 value;  /* create_cq: requested entries; modify: the attribute mask */
};

/* Every object is keyed by its owner (tgid and exec generation) and the pointer the
 * application holds. */
struct verbs_key {
  __u32 tgid;
  __u32 exec_id; /* the owner image's exec generation, as in verbs_proc_key */
  __u64 object;
};

struct verbs_cq {
  __u64 proc_start; /* start_boottime of the owner: tells a reused pid apart */
  __u32 requested_entries;
  __u32 entries; /* actual capacity (ibv_cq.cqe), after ibv_resize_cq too */
  __u32 handle;
  __u32 pad;
  char device[VERBS_DEVICE_NAME_LEN];
};

struct verbs_qp {
  __u64 proc_start;
  __u64 send_cq; /* ibv_cq pointers: keys into the cqs map */
  __u64 recv_cq;
  __u64 srq;
  __u32 max_send_wr; /* actual, as the provider wrote back into the init attributes */
  __u32 max_recv_wr;
  __u32 qp_num;
  __u32 handle;
  __u32 type;         /* enum ibv_qp_type */
  __u32 state;        /* enum ibv_qp_state, from ibv_modify_qp */
  __u32 max_send_sge; /* actual, as written back like max_send_wr */
  __u32 max_recv_sge;
};

struct verbs_srq {
  __u64 proc_start;
  __u32 max_wr;
  __u32 limit; /* 0: not armed (at creation, and after SRQ_LIMIT_REACHED until re-armed) */
  __u32 handle;
  __u32 limit_events;
  char device[VERBS_DEVICE_NAME_LEN];
};

/* A process image: a reused pid is another key (see owner() in verbs.bpf.c), and so is an
 * exec, which destroys every object of the old image in the kernel (the uverbs fd is
 * O_CLOEXEC) while tgid and start time survive it. exec_id is task->self_exec_id, incremented
 * by begin_new_exec() (fs/exec.c) and inherited by threads, truncated to 32 bits. */
struct verbs_proc_key {
  __u32 tgid;
  __u32 exec_id;
  __u64 proc_start;
};

struct verbs_proc {
  __u64 proc_start;
  __u64 async_events[VERBS_ASYNC_EVENT_TYPES];
  char comm[VERBS_COMM_LEN];
};

struct verbs_globals {
  __u64 lost_calls;   /* calls map full */
  __u64 lost_objects; /* cqs, qps or srqs map full */
  __u64 lost_procs;
  /* Entries added to procs, cqs, qps and srqs. User space skips the walk of maps it found
   * empty while this stands still: a walk scans every bucket (151,552 at the default sizes)
   * even when there is nothing in them. */
  __u64 inserts;
};

#endif /* RDMASCOPE_PROBES_VERBS_H */
