// SPDX-License-Identifier: GPL-2.0
/* Memory-region registrations of RDMA applications, from uprobes on libibverbs.
 *
 * Entry probes stash the call per thread; return probes of the outermost call record the
 * region (keyed by the struct ibv_mr * the application got) and per-process totals. Regions
 * leave on a successful ibv_dereg_mr, or with their process (sched_process_exit -> ring buffer
 * -> user space). Everything is aggregated here; user space reads maps at scrape time. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "mr.h"

char LICENSE[] SEC("license") = "GPL";

/* Sizes are set by user space before load (bpf_map__set_max_entries). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64); /* pid_tgid */
  __type(value, struct mr_call);
} calls SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 262144);
  __type(key, struct mr_region_key);
  __type(value, struct mr_region);
} regions SEC(".maps");

/* User stacks of registrations, for leak-suspect call sites. */
struct {
  __uint(type, BPF_MAP_TYPE_STACK_TRACE);
  __uint(max_entries, 16384);
  __uint(key_size, sizeof(__u32));
  __uint(value_size, MR_MAX_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32); /* tgid */
  __type(value, struct mr_proc);
} procs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct mr_globals);
} globals SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 64 * 1024);
} exits SEC(".maps");

/* The ibv_mr fields we read, at their offsets in <infiniband/verbs.h> (identical in the
 * IBVERBS_1.0 compat struct): context, pd, addr, length, handle, lkey, rkey. */
struct user_ibv_mr {
  __u64 context;
  __u64 pd;
  __u64 addr;
  __u64 length;
  __u32 handle;
  __u32 lkey;
  __u32 rkey;
};

/* floor(log2(v)) for v > 0, 0 for 0; branchy but verifier-friendly. */
static __always_inline __u32 log2_u64(__u64 v) {
  __u32 r = 0;
  if (v >> 32) {
    v >>= 32;
    r += 32;
  }
  if (v >> 16) {
    v >>= 16;
    r += 16;
  }
  if (v >> 8) {
    v >>= 8;
    r += 8;
  }
  if (v >> 4) {
    v >>= 4;
    r += 4;
  }
  if (v >> 2) {
    v >>= 2;
    r += 2;
  }
  if (v >> 1) {
    r += 1;
  }
  return r;
}

/* The histogram bucket of v: ceil(log2(v)), see mr.h. */
static __always_inline __u32 bucket_of(__u64 v, __u32 buckets) {
  __u32 b = v <= 1 ? 0 : log2_u64(v - 1) + 1;
  return b >= buckets ? buckets - 1 : b;
}

static __always_inline struct mr_globals* global_counters(void) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(&globals, &zero);
}

static __always_inline __u64 leader_start_ns(void) {
  struct task_struct* task = (struct task_struct*)bpf_get_current_task();
  return BPF_CORE_READ(task, group_leader, start_time);
}

/* A zeroed template in .rodata: struct mr_proc is too large for the 512-byte BPF stack. */
static const struct mr_proc zero_proc;

/* The process's totals, created (or reset, if the pid was reused) on first use. Threads of
 * a new process race here on their first registrations: creation is BPF_NOEXIST (one thread
 * wins, the others find its entry) and the start time is claimed with compare-and-swap, so
 * no thread ever replaces an entry another thread already counts into. */
static __always_inline struct mr_proc* proc_stats(__u32 tgid, __u64 start_ns) {
  struct mr_proc* proc = bpf_map_lookup_elem(&procs, &tgid);
  if (proc && proc->start_ns == start_ns) return proc;
  if (!proc) {
    bpf_map_update_elem(&procs, &tgid, &zero_proc, BPF_NOEXIST); /* -EEXIST: a sibling won */
    proc = bpf_map_lookup_elem(&procs, &tgid);
    if (!proc) {
      struct mr_globals* g = global_counters();
      if (g) __sync_fetch_and_add(&g->lost_procs, 1);
      return NULL;
    }
    if (__sync_val_compare_and_swap(&proc->start_ns, 0, start_ns) == 0) {
      bpf_get_current_comm(proc->comm, sizeof(proc->comm));
    }
    return proc->start_ns == start_ns ? proc : NULL;
  }
  /* A reused pid: the thread that swaps the start time in resets the counters in place. */
  __u64 old = proc->start_ns;
  if (__sync_val_compare_and_swap(&proc->start_ns, old, start_ns) == old) {
    __builtin_memset((char*)proc + sizeof(proc->start_ns), 0,
                     sizeof(*proc) - sizeof(proc->start_ns));
    bpf_get_current_comm(proc->comm, sizeof(proc->comm));
  }
  return proc->start_ns == start_ns ? proc : NULL;
}

static __always_inline int enter(enum mr_call_kind kind, __u64 mr, __u32 access) {
  __u64 id = bpf_get_current_pid_tgid();
  struct mr_call* call = bpf_map_lookup_elem(&calls, &id);
  if (call) {
    call->depth++; /* a wrapper calling the real entry point: counted once, outside */
    return 0;
  }
  struct mr_call fresh = {
      .start_ns = bpf_ktime_get_ns(), .mr = mr, .access = access, .depth = 1, .kind = kind};
  if (bpf_map_update_elem(&calls, &id, &fresh, BPF_NOEXIST) != 0) {
    struct mr_globals* g = global_counters();
    if (g) __sync_fetch_and_add(&g->lost_calls, 1);
  }
  return 0;
}

/* Returns the outermost call when this return ends it, else NULL (and keeps counting). */
static __always_inline struct mr_call* leave(__u64 id, enum mr_call_kind kind) {
  struct mr_call* call = bpf_map_lookup_elem(&calls, &id);
  if (!call || call->kind != kind) return NULL;
  if (call->depth > 1) {
    call->depth--;
    return NULL;
  }
  return call;
}

SEC("uprobe")
int BPF_KPROBE(reg_mr_entry, void* pd, void* addr, __u64 length, int access) {
  return enter(MR_CALL_REG, 0, (__u32)access);
}

/* ibv_reg_mr_iova and ibv_reg_mr_iova2: (pd, addr, length, iova, access) */
SEC("uprobe")
int BPF_KPROBE(reg_mr_iova_entry, void* pd, void* addr, __u64 length, __u64 iova, int access) {
  return enter(MR_CALL_REG, 0, (__u32)access);
}

/* ibv_reg_dmabuf_mr: (pd, offset, length, iova, fd, access): access is the sixth argument. */
SEC("uprobe")
int BPF_KPROBE(reg_dmabuf_mr_entry) { return enter(MR_CALL_REG, 0, (__u32)ctx->r9); }

SEC("uretprobe")
int BPF_KRETPROBE(reg_mr_return, void* mr) {
  __u64 id = bpf_get_current_pid_tgid();
  struct mr_call* call = leave(id, MR_CALL_REG);
  if (!call) return 0;
  __u32 tgid = id >> 32;
  __u64 start_ns = leader_start_ns();
  __u32 access = call->access;
  __u64 latency_ns = bpf_ktime_get_ns() - call->start_ns;
  bpf_map_delete_elem(&calls, &id);

  struct mr_proc* proc = proc_stats(tgid, start_ns);
  if (!proc) return 0;
  if (!mr) {
    __sync_fetch_and_add(&proc->failures, 1);
    return 0;
  }
  struct user_ibv_mr user_mr = {};
  if (bpf_probe_read_user(&user_mr, sizeof(user_mr), mr) != 0) return 0;
  struct mr_region_key key = {.tgid = tgid, .mr = (__u64)mr};
  struct mr_region region = {
      .addr = user_mr.addr,
      .length = user_mr.length,
      .registered_ns = bpf_ktime_get_ns(),
      .proc_start_ns = start_ns,
      .lkey = user_mr.lkey,
      .access = access,
      /* In the return probe the user registers are the caller's: the stack starts at the
       * function that called ibv_reg_mr (frame pointers needed beyond it). */
      .stack_id = (__s32)bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK),
  };
  __sync_fetch_and_add(&proc->registrations, 1);
  __sync_fetch_and_or(&proc->access_seen, (__u64)access);
  if ((user_mr.addr | user_mr.length) & (MR_HUGE_PAGE_BYTES - 1)) {
    __sync_fetch_and_add(&proc->not_huge_aligned_bytes, user_mr.length);
  }
  if (user_mr.length & (MR_PAGE_BYTES - 1)) {
    __sync_fetch_and_add(&proc->length_not_page_multiple, 1);
  }
  __u32 bucket = bucket_of(latency_ns, MR_LATENCY_BUCKETS);
  __sync_fetch_and_add(&proc->latency[bucket & (MR_LATENCY_BUCKETS - 1)], 1);
  __sync_fetch_and_add(&proc->latency_sum_ns, latency_ns);
  bucket = bucket_of(user_mr.length, MR_SIZE_BUCKETS);
  if (bucket < MR_SIZE_BUCKETS) __sync_fetch_and_add(&proc->size[bucket], 1);
  __sync_fetch_and_add(&proc->size_sum_bytes, user_mr.length);
  if (bpf_map_update_elem(&regions, &key, &region, BPF_ANY) != 0) {
    __sync_fetch_and_add(&proc->lost_regions, 1);
    return 0;
  }
  __sync_fetch_and_add(&proc->outstanding_regions, 1);
  __sync_fetch_and_add(&proc->outstanding_bytes, (__s64)user_mr.length);
  return 0;
}

/* A region leaves: deregistered, or an imported MR unimported. */
static __always_inline void release_region(struct mr_region_key* key) {
  struct mr_region* region = bpf_map_lookup_elem(&regions, key);
  if (!region) return; /* registered before we attached, or not tracked */
  __u64 length = region->length;
  __u64 start_ns = region->proc_start_ns;
  bpf_map_delete_elem(&regions, key);
  struct mr_proc* proc = bpf_map_lookup_elem(&procs, &key->tgid);
  if (!proc || proc->start_ns != start_ns) return;
  __sync_fetch_and_add(&proc->deregistrations, 1);
  __sync_fetch_and_add(&proc->outstanding_regions, -1);
  __sync_fetch_and_add(&proc->outstanding_bytes, -(__s64)length);
}

SEC("uprobe")
int BPF_KPROBE(dereg_mr_entry, void* mr) { return enter(MR_CALL_DEREG, (__u64)mr, 0); }

SEC("uretprobe")
int BPF_KRETPROBE(dereg_mr_return, int rc) {
  __u64 id = bpf_get_current_pid_tgid();
  struct mr_call* call = leave(id, MR_CALL_DEREG);
  if (!call) return 0;
  struct mr_region_key key = {.tgid = id >> 32, .mr = call->mr};
  bpf_map_delete_elem(&calls, &id);
  if (rc != 0) return 0; /* still registered (e.g. EBUSY: memory windows bound) */
  release_region(&key);
  return 0;
}

/* ibv_import_mr(pd, handle) and ibv_reg_mr_ex(pd, attr) return an ibv_mr like a
 * registration: reg_mr_return records it (access flags unknown here). */
SEC("uprobe")
int BPF_KPROBE(import_mr_entry) { return enter(MR_CALL_REG, 0, 0); }

/* ibv_unimport_mr(mr) returns nothing and cannot fail. */
SEC("uprobe")
int BPF_KPROBE(unimport_mr_entry, void* mr) {
  struct mr_region_key key = {.tgid = bpf_get_current_pid_tgid() >> 32, .mr = (__u64)mr};
  release_region(&key);
  return 0;
}

/* ibv_rereg_mr(mr, flags, pd, addr, length, access): with CHANGE_TRANSLATION the region
 * moves in place; rdma-core updates mr->addr and mr->length on success. */
SEC("uprobe")
int BPF_KPROBE(rereg_mr_entry, void* mr, int flags) {
  return enter(MR_CALL_REREG, (__u64)mr, (__u32)flags);
}

SEC("uretprobe")
int BPF_KRETPROBE(rereg_mr_return, int rc) {
  __u64 id = bpf_get_current_pid_tgid();
  struct mr_call* call = leave(id, MR_CALL_REREG);
  if (!call) return 0;
  struct mr_region_key key = {.tgid = id >> 32, .mr = call->mr};
  __u32 flags = call->access;
  bpf_map_delete_elem(&calls, &id);
  if (rc != 0 || !(flags & MR_REREG_CHANGE_TRANSLATION)) return 0;
  struct mr_region* region = bpf_map_lookup_elem(&regions, &key);
  if (!region) return 0;
  struct user_ibv_mr user_mr = {};
  if (bpf_probe_read_user(&user_mr, sizeof(user_mr), (void*)key.mr) != 0) return 0;
  __s64 delta = (__s64)user_mr.length - (__s64)region->length;
  region->addr = user_mr.addr;
  region->length = user_mr.length;
  struct mr_proc* proc = bpf_map_lookup_elem(&procs, &key.tgid);
  if (proc && proc->start_ns == region->proc_start_ns) {
    __sync_fetch_and_add(&proc->outstanding_bytes, delta);
  }
  return 0;
}

/* BTF-enabled tracepoint: needs no tracefs mount, and hands us the exiting task. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_exit, struct task_struct* task) {
  __u32 pid = BPF_CORE_READ(task, pid);
  __u32 tgid = BPF_CORE_READ(task, tgid);
  __u64 id = ((__u64)tgid << 32) | pid;
  bpf_map_delete_elem(&calls, &id); /* a thread that died inside a call */
  if (pid != tgid) return 0;        /* only the leader's exit ends the process */
  if (!bpf_map_lookup_elem(&procs, &tgid)) return 0;
  struct mr_exit_event* event = bpf_ringbuf_reserve(&exits, sizeof(*event), 0);
  if (!event) {
    struct mr_globals* g = global_counters();
    if (g) __sync_fetch_and_add(&g->lost_exits, 1);
    return 0;
  }
  event->tgid = tgid;
  event->pad = 0;
  event->start_ns = BPF_CORE_READ(task, group_leader, start_time);
  BPF_CORE_READ_STR_INTO(&event->comm, task, comm);
  bpf_ringbuf_submit(event, 0);
  return 0;
}
