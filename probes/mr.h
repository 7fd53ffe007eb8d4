/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared between probes/mr.bpf.c and the exporter: memory-region (MR) registration tracking.
 * Fixed-width types only; the layout is the ABI between kernel and user space. */
#ifndef RDMASCOPE_PROBES_MR_H
#define RDMASCOPE_PROBES_MR_H

/* The BPF side gets these types from vmlinux.h, user space from <linux/types.h>. */
#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define MR_COMM_LEN 16
/* log2 histograms: bucket b holds values in (2^(b-1), 2^b] (bucket 0: 0 and 1), so that
 * "le 2^b" is exact for the power-of-two sizes applications use; the last bucket also holds
 * everything above. Latency in ns, size in bytes. */
#define MR_LATENCY_BUCKETS 32
#define MR_SIZE_BUCKETS 48
#define MR_HUGE_PAGE_BYTES (2ULL << 20)
#define MR_PAGE_BYTES 4096ULL
/* IBV_ACCESS_* (rdma-core verbs.h) is an int: one registration counter per bit. */
#define MR_ACCESS_BITS 32
/* Recently deregistered ranges remembered for churn (struct mr_range_key), all processes. */
#define MR_RELEASED_RANGES 16384

/* Which entry point a thread is inside (outermost call only). */
enum mr_call_kind {
  MR_CALL_REG = 1,
  MR_CALL_DEREG = 2,
  MR_CALL_REREG = 3,
};

/* IBV_REREG_MR_CHANGE_TRANSLATION: ibv_rereg_mr moved the region (new address, length). */
#define MR_REREG_CHANGE_TRANSLATION 1

/* A region as recorded at registration. */
struct mr_region {
  __u64 addr;
  __u64 length;        /* 0 for an implicit ODP registration (MR_REGION_IMPLICIT_ODP) */
  __u64 registered_ns; /* bpf_ktime_get_ns() */
  __u64 proc_start_ns; /* start_boottime of the owning process: tells reused pids apart */
  __u32 lkey;
  __u32 access;
  __s32 stack_id; /* user stack at registration in the stacks map, or < 0 */
  __u32 flags;    /* MR_REGION_* */
  /* The kernel path only (MR_REGION_RESTRACK_ID): the MR's restrack id (the MRN `rdma res
   * show mr` lists) and its device's index, so that user space can tell a region it tracks
   * from one a restrack dump taken while the probes attached lists too. */
  __u32 restrack_id;
  __u32 device_index;
  /* The registration's user stack as captured for DWARF unwinding (struct mr_stack_sample):
   * the site key user space knows it by, 0 when none was captured. */
  __u64 site;
};

/* ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND): the whole address space, paged in on
 * demand (rdma-core's "implicit ODP"). Counted as a region, never added to byte sums: its
 * length (SIZE_MAX) would wrap them and it pins nothing up front. */
#define MR_REGION_IMPLICIT_ODP 1
/* restrack_id and device_index are set (kernel path). */
#define MR_REGION_RESTRACK_ID 2
#define MR_ACCESS_ON_DEMAND (1U << 6) /* IBV_ACCESS_ON_DEMAND */

/* Per-thread state between the entry and the return of the outermost call. Wrappers calling
 * wrappers (the IBVERBS_1.0 ABI calls the 1.1 one) enter again on a deeper stack and are not
 * recorded: the return whose frame is the recorded one ends the call. `sp` also makes a
 * record whose return was never seen (lost uretprobe, longjmp out of the call, exporter
 * attached mid-call) detectable: a new entry at or above that frame replaces it. */
struct mr_call {
  __u64 start_ns;
  __u64 sp;     /* user stack pointer at the outermost entry (points at the return address) */
  __u64 mr;     /* dereg, rereg: the ibv_mr pointer passed in */
  __u32 access; /* reg: IBV_ACCESS_* flags; rereg: the flags argument */
  __u32 kind;   /* enum mr_call_kind */
  /* dereg: the region, taken out of the regions map at entry (so that a registration
   * reusing the freed pointer before the return cannot be mistaken for it), committed or put
   * back at the return by the return value. */
  __u32 pending;
  __u32 exec_id; /* the process's exec generation at entry (see mr_proc_key) */
  struct mr_region region;
};

struct mr_region_key {
  __u32 tgid;
  __u32 exec_id; /* exec generation of the registering image (see mr_proc_key) */
  __u64 mr;      /* the struct ibv_mr * the application holds */
};

/* The key of a process's totals: a reused pid is another process, never a reset in place
 * (a reset would race with the new process's other threads counting into the entry).
 * An exec is another image too: the uverbs fd is O_CLOEXEC, so the kernel releases every
 * region of the old image (ib_uverbs_close -> uverbs_destroy_ufile_hw), while tgid and start
 * time survive the exec. The exec generation tells the images apart: task->self_exec_id, which
 * begin_new_exec() (fs/exec.c) increments on every exec and every thread inherits at clone,
 * truncated to 32 bits. */
struct mr_proc_key {
  __u32 tgid;
  __u32 exec_id;
  __u64 start_ns; /* start_boottime of the thread-group leader (/proc/PID/stat field 22) */
};

#define MR_MAX_STACK_DEPTH 127

/* Per-process totals, updated atomically by every thread of the process. */
struct mr_proc {
  __u64 start_ns; /* as in the key */
  /* Set by the sched_process_exec program: this image is gone, its regions were released by
   * the kernel; user space reaps the entry and its regions at the next scrape. */
  __u32 exec_ended;
  __u32 pad;
  __u64 registrations;
  __u64 deregistrations;
  __u64 failures; /* registration calls that returned NULL */
  __s64 outstanding_regions;
  __s64 outstanding_bytes;
  __s64 outstanding_implicit_odp; /* of outstanding_regions: implicit ODP, not in the bytes */
  __u64 lost_regions;             /* registrations not tracked: the regions map was full */
  __u64 access_seen;              /* OR of the IBV_ACCESS_* flags of all registrations */
  __u64 not_huge_aligned_bytes;   /* bytes registered with address or length not 2 MiB-aligned */
  __u64 length_not_page_multiple; /* registrations whose length is not a multiple of 4 KiB */
  /* Registrations by the alignment of both address and length (implicit ODP in none):
   * huge: multiples of 2 MiB (can be backed by huge pages); page: of 4 KiB but not both of
   * 2 MiB; unaligned: address or length not a multiple of 4 KiB (the pages at both ends are
   * shared with other data). */
  __u64 aligned_huge;
  __u64 aligned_page;
  __u64 unaligned;
  /* Churn: registrations of an (address, length) this image had deregistered before (and
   * still in the bounded released_ranges map), and their bytes. */
  __u64 reregistrations;
  __u64 reregistered_bytes;
  __u64 access_registrations[MR_ACCESS_BITS]; /* registrations with IBV_ACCESS_* bit b set */
  __u64 latency_sum_ns;
  __u64 size_sum_bytes;
  __u64 latency[MR_LATENCY_BUCKETS];
  __u64 size[MR_SIZE_BUCKETS];
  char comm[MR_COMM_LEN];
};

/* A range deregistered by a process image (the released_ranges LRU map). */
struct mr_range_key {
  __u32 tgid;
  __u32 exec_id;
  __u64 start_ns; /* as in mr_proc_key: a reused pid never matches */
  __u64 addr;
  __u64 length;
};

/* Global counters, one array slot. */
struct mr_globals {
  __u64 lost_calls;         /* calls map full */
  __u64 lost_procs;         /* procs map full */
  __u64 lost_exits;         /* exit ring buffer full */
  __u64 stale_calls;        /* call records whose return was never seen, replaced by a new entry */
  __u64 lost_stack_samples; /* stack samples ring buffer full: the region has no DWARF stack */
  __u64 stack_copy_failed;  /* the user stack could not be read at all */
  __u64 stack_samples;      /* stack samples sent */
  __u64 stack_samples_deduplicated; /* registrations whose site was sent before */
  __u64 next_site;                  /* unique site keys of samples that cannot be deduplicated */
};

/* --- user stacks for DWARF unwinding (perf's --call-graph dwarf, per registration) ---
 * At each registration BPF copies the user registers and up to stack_copy_bytes of the user
 * stack from SP upwards; user space unwinds the copy with the CFI of the process's modules
 * (exporter/sys/dwarf_unwinder). A site is sent once: its key hashes the instruction pointer
 * and the words of the copy that point into the process's code (the return addresses, as
 * far as the copy reaches), which user space lists per image (struct mr_code_ranges) after
 * its first sample; two registrations with the same key unwind to the same stack. Until the
 * ranges are known each sample is its own site. */
#define MR_STACK_REGS 17 /* x86-64 DWARF numbering: 0 rax ... 7 rsp, 8-15 r8-r15, 16 rip */
#define MR_STACK_COPY_MAX 16384
#define MR_CODE_RANGES 64
/* Sites keyed without code ranges: their key has this bit (never a hash, which has it clear). */
#define MR_SITE_UNIQUE (1ULL << 63)

struct mr_stack_sample {
  __u32 tgid;
  __u32 exec_id;
  __u64 proc_start_ns;
  __u64 site;
  __u64 regs[MR_STACK_REGS];
  __u32 size;     /* bytes of data: the user stack from regs[7] upwards */
  __s32 stack_id; /* the frame-pointer stack of the same registration, or < 0 */
  __u8 data[MR_STACK_COPY_MAX];
};

/* Executable mappings of one image (key: struct mr_proc_key), sorted, merged down to
 * MR_CODE_RANGES by user space. `generation` changes when user space rewrites them (a
 * dlopen() mapped more code), so that keys hashed with older ranges never match newer ones. */
struct mr_code_ranges {
  __u32 count;
  __u32 generation;
  __u64 start[MR_CODE_RANGES];
  __u64 end[MR_CODE_RANGES];
};

/* A site sent already (sites_seen map). */
struct mr_site_key {
  __u32 tgid;
  __u32 exec_id;
  __u64 start_ns;
  __u64 site;
};

/* Sent when the last thread of a process exits: user space drops the process's state. */
struct mr_exit_event {
  __u32 tgid;
  __u32 exec_id;
  __u64 start_ns;
  char comm[MR_COMM_LEN]; /* the process's per-process entry may already be reused */
};

#endif /* RDMASCOPE_PROBES_MR_H */
