// SPDX-License-Identifier: GPL-2.0
/* Memory-region registrations of RDMA applications, from uprobes on libibverbs.
 *
 * Entry probes stash the call per thread; return probes of the outermost call record the
 * region (keyed by the struct ibv_mr * the application got) and per-process totals. Regions
 * leave on a successful ibv_dereg_mr, or with their process (sched_process_exit -> ring buffer
 * -> user space), or with their image (sched_process_exec marks the old image's entry, user
 * space reaps it). Everything is aggregated here; user space reads maps at scrape time. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "mr_common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Sizes are set by user space before load (bpf_map__set_max_entries). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64); /* pid_tgid */
  __type(value, struct mr_call);
} calls SEC(".maps");

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

/* On x86-64 a call pushes the return address: at a return probe the stack pointer is one slot
 * above the one the entry probe saw. */
#define RETURN_ADDRESS_BYTES 8

/* Removes a region from the map and counts it out; nothing if it is not tracked. */
static __always_inline void release_region(struct mr_region_key* key) {
  struct mr_region* found = bpf_map_lookup_elem(&regions, key);
  if (!found) return; /* registered before we attached, or not tracked */
  struct mr_region region = *found;
  /* Only the caller whose delete succeeds counts: two racing releases count once. */
  if (bpf_map_delete_elem(&regions, key) != 0) return;
  count_release(key->tgid, key->exec_id, &region, 1);
}

/* A deregistration ends: on success its region (taken out at entry) is counted out, on
 * failure, or when we never learn the outcome, it is put back. Putting back fails only if the
 * library already handed the pointer to a new registration: then the old one is gone. */
static __always_inline void settle_pending(__u32 tgid, struct mr_call* call, int succeeded) {
  if (!call->pending) return;
  struct mr_region_key key = {.tgid = tgid, .exec_id = call->exec_id, .mr = call->mr};
  struct mr_region region = call->region;
  call->pending = 0;
  if (!succeeded && bpf_map_update_elem(&regions, &key, &region, BPF_NOEXIST) == 0) return;
  count_release(tgid, call->exec_id, &region, 1);
}

/* A call record whose return was never seen (lost uretprobe, longjmp out of the call, probes
 * attached while the thread was inside): dropped so that the thread is counted again. */
static __always_inline void abandon(__u64 id, struct mr_call* call) {
  settle_pending(id >> 32, call, 0);
  struct mr_globals* g = global_counters();
  if (g) __sync_fetch_and_add(&g->stale_calls, 1);
}

static __always_inline int enter(struct pt_regs* ctx, enum mr_call_kind kind, __u64 mr,
                                 __u32 access) {
  __u64 id = bpf_get_current_pid_tgid();
  __u64 sp = PT_REGS_SP(ctx);
  struct mr_call* call = bpf_map_lookup_elem(&calls, &id);
  if (call) {
    /* Deeper than the recorded call: a wrapper calling on, counted once, outside. */
    if (sp < call->sp) return 0;
    /* At or above the recorded frame: that call is over. (A tail call the forwarder check
     * did not recognise also lands here; it is then counted from the inner entry point.) */
    abandon(id, call);
  }
  struct mr_call fresh = {.start_ns = bpf_ktime_get_ns(),
                          .sp = sp,
                          .mr = mr,
                          .access = access,
                          .kind = kind,
                          .exec_id = current_exec_id()};
  struct mr_region_key key = {.tgid = id >> 32, .exec_id = fresh.exec_id, .mr = mr};
  if (kind == MR_CALL_DEREG) {
    struct mr_region* region = bpf_map_lookup_elem(&regions, &key);
    if (region) {
      fresh.region = *region;
      fresh.pending = 1;
    }
  }
  if (bpf_map_update_elem(&calls, &id, &fresh, BPF_ANY) != 0) {
    struct mr_globals* g = global_counters();
    if (g) __sync_fetch_and_add(&g->lost_calls, 1);
    return 0;
  }
  /* The region leaves the map now, before ibv_dereg_mr frees the struct: a registration on
   * another thread that gets the same pointer back can then never be taken for it. */
  if (fresh.pending && bpf_map_delete_elem(&regions, &key) != 0) {
    call = bpf_map_lookup_elem(&calls, &id);
    if (call) call->pending = 0; /* released concurrently (the application raced itself) */
  }
  return 0;
}

/* The outermost call this return ends, else NULL. The record is kept (the caller reads it,
 * then deletes it). */
static __always_inline struct mr_call* leave(struct pt_regs* ctx, __u64 id,
                                             enum mr_call_kind kind) {
  struct mr_call* call = bpf_map_lookup_elem(&calls, &id);
  if (!call) return NULL;
  __u64 frame = PT_REGS_SP(ctx) - RETURN_ADDRESS_BYTES;
  if (frame < call->sp) return NULL; /* a nested call returns: the outermost one counts */
  if (frame > call->sp || call->kind != kind) {
    /* A frame above the recorded one returns: the recorded call ended unseen. */
    abandon(id, call);
    bpf_map_delete_elem(&calls, &id);
    return NULL;
  }
  return call;
}

SEC("uprobe")
int BPF_KPROBE(reg_mr_entry, void* pd, void* addr, __u64 length, int access) {
  return enter(ctx, MR_CALL_REG, 0, (__u32)access);
}

/* ibv_reg_mr_iova and ibv_reg_mr_iova2: (pd, addr, length, iova, access) */
SEC("uprobe")
int BPF_KPROBE(reg_mr_iova_entry, void* pd, void* addr, __u64 length, __u64 iova, int access) {
  return enter(ctx, MR_CALL_REG, 0, (__u32)access);
}

/* ibv_reg_dmabuf_mr: (pd, offset, length, iova, fd, access): access is the sixth argument. */
SEC("uprobe")
int BPF_KPROBE(reg_dmabuf_mr_entry) { return enter(ctx, MR_CALL_REG, 0, (__u32)ctx->r9); }

SEC("uretprobe")
int BPF_KRETPROBE(reg_mr_return, void* mr) {
  __u64 id = bpf_get_current_pid_tgid();
  struct mr_call* call = leave(ctx, id, MR_CALL_REG);
  if (!call) return 0;
  __u32 tgid = id >> 32;
  __u64 start_ns = leader_start_ns();
  __u32 exec_id = call->exec_id;
  __u32 access = call->access;
  __u64 latency_ns = bpf_ktime_get_ns() - call->start_ns;
  bpf_map_delete_elem(&calls, &id);

  struct mr_proc* proc = proc_stats(tgid, exec_id, start_ns);
  if (!proc) return 0;
  if (!mr) {
    __sync_fetch_and_add(&proc->failures, 1);
    return 0;
  }
  struct user_ibv_mr user_mr = {};
  if (bpf_probe_read_user(&user_mr, sizeof(user_mr), mr) != 0) return 0;
  /* rdma-core stores the length asked for: SIZE_MAX for an implicit ODP registration. */
  int implicit_odp = user_mr.length == ~0ULL;
  struct mr_region_key key = {.tgid = tgid, .exec_id = exec_id, .mr = (__u64)mr};
  struct mr_region region = {
      .addr = user_mr.addr,
      .length = implicit_odp ? 0 : user_mr.length,
      .registered_ns = bpf_ktime_get_ns(),
      .proc_start_ns = start_ns,
      .lkey = user_mr.lkey,
      .access = access,
      /* In the return probe the user registers are the caller's: the stack starts at the
       * function that called ibv_reg_mr (frame pointers needed beyond it). */
      .stack_id = (__s32)bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK),
      .flags = implicit_odp ? MR_REGION_IMPLICIT_ODP : 0,
  };
  /* The same registers and the stack above them, for DWARF unwinding in user space: the
   * walk then goes on through callers built without frame pointers. */
  region.site = capture_stack(ctx, tgid, exec_id, start_ns, region.stack_id);
  count_registration(proc, tgid, exec_id, user_mr.addr, user_mr.length, access, implicit_odp,
                     latency_ns, 1);
  /* The library hands out a pointer only once it is free: a region still recorded under it
   * was released unseen (its deregistration's return was lost). */
  release_region(&key);
  if (bpf_map_update_elem(&regions, &key, &region, BPF_NOEXIST) != 0) {
    __sync_fetch_and_add(&proc->lost_regions, 1);
    return 0;
  }
  count_outstanding(proc, &region);
  return 0;
}

SEC("uprobe")
int BPF_KPROBE(dereg_mr_entry, void* mr) { return enter(ctx, MR_CALL_DEREG, (__u64)mr, 0); }

SEC("uretprobe")
int BPF_KRETPROBE(dereg_mr_return, int rc) {
  __u64 id = bpf_get_current_pid_tgid();
  struct mr_call* call = leave(ctx, id, MR_CALL_DEREG);
  if (!call) return 0;
  /* rc != 0: still registered (e.g. EBUSY: memory windows bound), the region goes back. */
  settle_pending(id >> 32, call, rc == 0);
  bpf_map_delete_elem(&calls, &id);
  return 0;
}

/* ibv_import_mr(pd, handle) and ibv_reg_mr_ex(pd, attr) return an ibv_mr like a
 * registration: reg_mr_return records it (access flags unknown here). */
SEC("uprobe")
int BPF_KPROBE(import_mr_entry) { return enter(ctx, MR_CALL_REG, 0, 0); }

/* ibv_unimport_mr(mr) returns nothing and cannot fail; removed at entry, before the free. */
SEC("uprobe")
int BPF_KPROBE(unimport_mr_entry, void* mr) {
  struct mr_region_key key = {
      .tgid = bpf_get_current_pid_tgid() >> 32, .exec_id = current_exec_id(), .mr = (__u64)mr};
  release_region(&key);
  return 0;
}

/* ibv_rereg_mr(mr, flags, pd, addr, length, access): with CHANGE_TRANSLATION the region
 * moves in place; rdma-core updates mr->addr and mr->length on success. */
SEC("uprobe")
int BPF_KPROBE(rereg_mr_entry, void* mr, int flags) {
  return enter(ctx, MR_CALL_REREG, (__u64)mr, (__u32)flags);
}

SEC("uretprobe")
int BPF_KRETPROBE(rereg_mr_return, int rc) {
  __u64 id = bpf_get_current_pid_tgid();
  struct mr_call* call = leave(ctx, id, MR_CALL_REREG);
  if (!call) return 0;
  struct mr_region_key key = {.tgid = id >> 32, .exec_id = call->exec_id, .mr = call->mr};
  __u32 flags = call->access;
  bpf_map_delete_elem(&calls, &id);
  if (rc != 0 || !(flags & MR_REREG_CHANGE_TRANSLATION)) return 0;
  struct mr_region* region = bpf_map_lookup_elem(&regions, &key);
  if (!region || (region->flags & MR_REGION_IMPLICIT_ODP)) return 0;
  struct user_ibv_mr user_mr = {};
  if (bpf_probe_read_user(&user_mr, sizeof(user_mr), (void*)key.mr) != 0) return 0;
  if (user_mr.length == ~0ULL) return 0; /* not a move rdma-core accepts */
  __s64 delta = (__s64)user_mr.length - (__s64)region->length;
  region->addr = user_mr.addr;
  region->length = user_mr.length;
  struct mr_proc_key proc_key = {
      .tgid = key.tgid, .exec_id = key.exec_id, .start_ns = region->proc_start_ns};
  struct mr_proc* proc = bpf_map_lookup_elem(&procs, &proc_key);
  if (proc) __sync_fetch_and_add(&proc->outstanding_bytes, delta);
  return 0;
}

/* BTF-enabled tracepoint: needs no tracefs mount, and hands us the exiting task. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_exit, struct task_struct* task) {
  __u32 pid = BPF_CORE_READ(task, pid);
  __u32 tgid = BPF_CORE_READ(task, tgid);
  __u64 id = ((__u64)tgid << 32) | pid;
  struct mr_call* call = bpf_map_lookup_elem(&calls, &id);
  if (call) {
    /* A thread that died inside a call: a deregistration it had begun is put back. */
    settle_pending(tgid, call, 0);
    bpf_map_delete_elem(&calls, &id);
  }
  /* Only the last thread's exit ends the process: not the leader's (pthread_exit in main, or
   * killed by an exec in another thread). do_exit() (kernel/exit.c) decrements
   * signal->live before trace_sched_process_exit(), and the thread that takes it to 0 is the
   * one with group_dead set. Threads exiting together may both read 0: user space drops a
   * process once. */
  if (BPF_CORE_READ(task, signal, live.counter) != 0) return 0;
  /* Every thread has the current image's generation (the exec killed the others). */
  struct mr_proc_key key = {.tgid = tgid,
                            .exec_id = (__u32)BPF_CORE_READ(task, self_exec_id),
                            .start_ns = BPF_CORE_READ(task, group_leader, start_boottime)};
  if (!bpf_map_lookup_elem(&procs, &key)) return 0;
  struct mr_exit_event* event = bpf_ringbuf_reserve(&exits, sizeof(*event), 0);
  if (!event) {
    struct mr_globals* g = global_counters();
    if (g) __sync_fetch_and_add(&g->lost_exits, 1);
    return 0;
  }
  event->tgid = tgid;
  event->exec_id = key.exec_id;
  event->start_ns = key.start_ns;
  BPF_CORE_READ_STR_INTO(&event->comm, task, comm);
  bpf_ringbuf_submit(event, 0);
  return 0;
}

/* An exec ends the old image's registrations: its uverbs fds are O_CLOEXEC, so the kernel
 * destroys every region they hold (ib_uverbs_close -> uverbs_destroy_ufile_hw). tgid and
 * start time survive the exec (de_thread() gives a non-leader thread the leader's pid and
 * start times), the exec generation does not: the old image's entry is marked here and user
 * space reaps it and its regions at the next scrape, as for an exit, with no walk here.
 *
 * fs/exec.c (6.1): exec_binprm() fires sched_process_exec(current, old_pid, bprm) after
 * load_binary -> begin_new_exec(), which has run de_thread() (the other threads are dead),
 * do_close_on_exec(), __set_task_comm() (comm is already the new image's: the old one is the
 * comm kept in the entry) and self_exec_id + 1. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct* task, pid_t old_pid) {
  __u32 tgid = BPF_CORE_READ(task, tgid);
  /* The exec'ing thread's call record is under its pid before the exec (a non-leader thread
   * takes the leader's pid): a deregistration it had begun is put back under the old image,
   * whose regions user space reaps. */
  __u64 old_id = ((__u64)tgid << 32) | (__u32)old_pid;
  struct mr_call* call = bpf_map_lookup_elem(&calls, &old_id);
  if (call) {
    settle_pending(tgid, call, 0);
    bpf_map_delete_elem(&calls, &old_id);
  }
  struct mr_proc_key key = {.tgid = tgid,
                            .exec_id = (__u32)(BPF_CORE_READ(task, self_exec_id) - 1),
                            .start_ns = BPF_CORE_READ(task, group_leader, start_boottime)};
  struct mr_proc* proc = bpf_map_lookup_elem(&procs, &key);
  if (proc) proc->exec_ended = 1;
  return 0;
}
