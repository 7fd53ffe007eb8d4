/* SPDX-License-Identifier: GPL-2.0 */
/* What probes/mr.bpf.c (uprobes on libibverbs) and probes/mr_kernel.bpf.c (fentry/fexit on
 * uverbs and ib_core) share: the maps user space reads (the kernel path reuses mr.bpf.c's
 * fds for the first four), process state, and the accounting of a registration and of a
 * release, so that both paths mean exactly the same by every counter. Included once by
 * each BPF object, after vmlinux.h and the libbpf headers. */
#ifndef RDMASCOPE_PROBES_MR_COMMON_BPF_H
#define RDMASCOPE_PROBES_MR_COMMON_BPF_H

#include "mr.h"

/* Sizes are set by user space before load (bpf_map__set_max_entries). */
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
  __type(key, struct mr_proc_key);
  __type(value, struct mr_proc);
} procs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct mr_globals);
} globals SEC(".maps");

/* Where a new process's entry is built before it is inserted whole (struct mr_proc is too
 * large for the 512-byte BPF stack): slot 0. Slot 1 is never written: all zeroes. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, struct mr_proc);
} proc_scratch SEC(".maps");

/* Ranges deregistered recently, for churn (mr_range_key in mr.h). An LRU: bounded whatever
 * the application does, the oldest ranges are forgotten first, and nothing has to be
 * cleaned up at exit (the key holds the process's start time, so a reused pid never
 * matches). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, MR_RELEASED_RANGES);
  __type(key, struct mr_range_key);
  __type(value, __u8);
} released_ranges SEC(".maps");

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
  if (v >> 1) r += 1;
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

/* The thread-group leader's start in the clock of /proc/PID/stat's starttime, so that user
 * space can tell a reused pid apart (and it survives an exec by a non-leader thread, which
 * takes over the leader's start times in de_thread()). */
static __always_inline __u64 leader_start_ns(void) {
  struct task_struct* task = (struct task_struct*)bpf_get_current_task();
  return BPF_CORE_READ(task, group_leader, start_boottime);
}

/* The exec generation of the current image (see mr_proc_key in mr.h). */
static __always_inline __u32 current_exec_id(void) {
  struct task_struct* task = (struct task_struct*)bpf_get_current_task();
  return (__u32)BPF_CORE_READ(task, self_exec_id);
}

/* The process's totals, created on first use. Threads of a new process race here on their
 * first registrations: the entry is built whole in per-CPU scratch and inserted with
 * BPF_NOEXIST, so one thread's entry wins and every thread counts into it. A reused pid has
 * another start time, hence another key: nothing is ever reset in place. */
static __always_inline struct mr_proc* proc_stats(__u32 tgid, __u32 exec_id, __u64 start_ns) {
  struct mr_proc_key key = {.tgid = tgid, .exec_id = exec_id, .start_ns = start_ns};
  struct mr_proc* proc = bpf_map_lookup_elem(&procs, &key);
  if (proc) return proc;
  __u32 work_slot = 0;
  struct mr_proc* fresh = bpf_map_lookup_elem(&proc_scratch, &work_slot);
  if (!fresh) return NULL;
  /* Cleared by a copy from the slot nobody writes: clang's BPF backend inlines a memset of
   * at most 128 stores, and struct mr_proc is larger than 1 KiB. */
  __u32 zero_slot = 1;
  const struct mr_proc* zeroes = bpf_map_lookup_elem(&proc_scratch, &zero_slot);
  if (!zeroes || bpf_probe_read_kernel(fresh, sizeof(*fresh), zeroes) != 0) return NULL;
  fresh->start_ns = start_ns;
  bpf_get_current_comm(fresh->comm, sizeof(fresh->comm));
  bpf_map_update_elem(&procs, &key, fresh, BPF_NOEXIST); /* -EEXIST: a sibling won */
  proc = bpf_map_lookup_elem(&procs, &key);
  if (!proc) {
    struct mr_globals* g = global_counters();
    if (g) __sync_fetch_and_add(&g->lost_procs, 1);
  }
  return proc;
}

/* Bytes a region adds to the byte sums: none for implicit ODP (see mr.h). */
static __always_inline __u64 region_bytes(const struct mr_region* region) {
  return (region->flags & MR_REGION_IMPLICIT_ODP) ? 0 : region->length;
}

/* A region entered the regions map: it is outstanding until its release. */
static __always_inline void count_outstanding(struct mr_proc* proc,
                                              const struct mr_region* region) {
  __sync_fetch_and_add(&proc->outstanding_regions, 1);
  __sync_fetch_and_add(&proc->outstanding_bytes, (__s64)region_bytes(region));
  if (region->flags & MR_REGION_IMPLICIT_ODP) {
    __sync_fetch_and_add(&proc->outstanding_implicit_odp, 1);
  }
}

/* Counts one successful registration of [addr, addr + length) with `access` (IBV_ACCESS_*,
 * the same bits as the kernel's IB_ACCESS_*) into its process: totals, histograms,
 * alignment, per-flag counts, and churn (the range was deregistered before by this image).
 * Implicit ODP registrations have no range: they count in no size or alignment figure.
 * `latency_known` 0: a call whose entry was not seen, left out of the latency histogram. */
static __always_inline void count_registration(struct mr_proc* proc, __u32 tgid, __u32 exec_id,
                                               __u64 addr, __u64 length, __u32 access,
                                               int implicit_odp, __u64 latency_ns,
                                               int latency_known) {
  __sync_fetch_and_add(&proc->registrations, 1);
  __sync_fetch_and_or(&proc->access_seen, (__u64)access);
#pragma unroll
  for (int bit = 0; bit < MR_ACCESS_BITS; bit++) {
    if (access & (1U << bit)) __sync_fetch_and_add(&proc->access_registrations[bit], 1);
  }
  __u32 bucket = bucket_of(latency_ns, MR_LATENCY_BUCKETS);
  if (latency_known) {
    __sync_fetch_and_add(&proc->latency[bucket & (MR_LATENCY_BUCKETS - 1)], 1);
    __sync_fetch_and_add(&proc->latency_sum_ns, latency_ns);
  }
  if (implicit_odp) return;
  if (((addr | length) & (MR_HUGE_PAGE_BYTES - 1)) == 0) {
    __sync_fetch_and_add(&proc->aligned_huge, 1);
  } else {
    __sync_fetch_and_add(&proc->not_huge_aligned_bytes, length);
    if (((addr | length) & (MR_PAGE_BYTES - 1)) == 0) {
      __sync_fetch_and_add(&proc->aligned_page, 1);
    } else {
      __sync_fetch_and_add(&proc->unaligned, 1);
    }
  }
  if (length & (MR_PAGE_BYTES - 1)) __sync_fetch_and_add(&proc->length_not_page_multiple, 1);
  bucket = bucket_of(length, MR_SIZE_BUCKETS);
  if (bucket < MR_SIZE_BUCKETS) __sync_fetch_and_add(&proc->size[bucket], 1);
  __sync_fetch_and_add(&proc->size_sum_bytes, length);
  /* Deleting is the lookup: of two threads registering the range again at once, only the
   * one whose delete succeeds counts it. */
  struct mr_range_key range = {
      .tgid = tgid, .exec_id = exec_id, .start_ns = proc->start_ns, .addr = addr, .length = length};
  if (bpf_map_delete_elem(&released_ranges, &range) == 0) {
    __sync_fetch_and_add(&proc->reregistrations, 1);
    __sync_fetch_and_add(&proc->reregistered_bytes, length);
  }
}

/* A region is gone (deregistered, unimported, its pointer handed out again by the library,
 * or replaced by the driver in a rereg): counted out of its process. `remember`: the range
 * was given up by the application, so registering it again is churn (not for a rereg, which
 * moves the region rather than ending it). */
static __always_inline void count_release(__u32 tgid, __u32 exec_id, const struct mr_region* region,
                                          int remember) {
  struct mr_proc_key key = {.tgid = tgid, .exec_id = exec_id, .start_ns = region->proc_start_ns};
  struct mr_proc* proc = bpf_map_lookup_elem(&procs, &key);
  if (!proc) return;
  __sync_fetch_and_add(&proc->deregistrations, 1);
  __sync_fetch_and_add(&proc->outstanding_regions, -1);
  __sync_fetch_and_add(&proc->outstanding_bytes, -(__s64)region_bytes(region));
  if (region->flags & MR_REGION_IMPLICIT_ODP) {
    __sync_fetch_and_add(&proc->outstanding_implicit_odp, -1);
    return;
  }
  if (!remember) return;
  struct mr_range_key range = {.tgid = tgid,
                               .exec_id = exec_id,
                               .start_ns = region->proc_start_ns,
                               .addr = region->addr,
                               .length = region->length};
  __u8 one = 1;
  bpf_map_update_elem(&released_ranges, &range, &one, BPF_ANY);
}

/* --- user stacks for DWARF unwinding (mr.h, "user stacks") --- */

/* Bytes of user stack copied per registration (--collector.mr.stack-bytes; 0: none), set by
 * user space before load, at most MR_STACK_COPY_MAX. */
const volatile __u32 stack_copy_bytes = 0;

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 4 * 1024 * 1024); /* sized by user space */
} stack_samples SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096); /* sized like procs by user space */
  __type(key, struct mr_proc_key);
  __type(value, struct mr_code_ranges);
} code_ranges SEC(".maps");

/* Sites sent: a registration whose site is here costs no copy in the ring. Bounded (LRU): a
 * site forgotten is sent again. User space deletes the entries of sites it drops. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, struct mr_site_key);
  __type(value, __u8);
} sites_seen SEC(".maps");

/* The sample is built here (16 KiB: far above the 512-byte BPF stack). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct mr_stack_sample);
} sample_scratch SEC(".maps");

/* Whether `word` points into one of the image's code ranges (sorted by start).
 * Branch-free halvings: with a branch per halving the verifier follows every path of every
 * walk step (2^7 per word inside bpf_loop's callback), and kernels that verify a callback until
 * its states converge (6.7+) refused the program at the 1M-instruction limit (E2BIG). User
 * addresses are below 2^47, so the sign of word - start says which side of it word lies. */
static __always_inline int in_code(const struct mr_code_ranges* ranges, __u64 word) {
  __u32 count = ranges->count;
  if (count == 0 || count > MR_CODE_RANGES) return 0;
  if (word < ranges->start[0] || word >= (1ULL << 47)) return 0;
  /* The last range starting at or below `word`: log2(64) + 1 halvings, lo < hi throughout
   * (when hi = lo + 1, mid = lo and start[lo] <= word: nothing moves). */
  __u64 lo = 0, hi = count;
#pragma unroll
  for (int i = 0; i < 7; i++) {
    __u64 mid = ((lo + hi) / 2) & (MR_CODE_RANGES - 1);
    /* All ones when word < start[mid]: keep lo and take mid as hi; else the other way. The
     * empty asm hides that it is 0 or ~0, or clang turns the masks back into branches. */
    __u64 below = -(((word - ranges->start[mid]) >> 63) & 1);
    asm volatile("" : "+r"(below));
    lo = (lo & below) | (mid & ~below);
    hi = (mid & below) | (hi & ~below);
  }
  return word < ranges->end[lo & (MR_CODE_RANGES - 1)];
}

/* One word of the stack copy into the site hash, if it points into the code (bpf_loop). */
struct hash_walk {
  const struct mr_stack_sample* sample;
  const struct mr_code_ranges* ranges;
  __u32 words;
  __u64 hash;
};

static long hash_code_word(__u32 index, void* data) {
  struct hash_walk* walk = data;
  if (index >= walk->words || index >= MR_STACK_COPY_MAX / 8) return 1;
  __u64 word = *(const __u64*)&walk->sample->data[(index * 8) & (MR_STACK_COPY_MAX - 1)];
  if (in_code(walk->ranges, word)) walk->hash = (walk->hash ^ word) * 0x100000001b3ULL;
  return 0;
}

/* The end of the mapping holding the user stack pointer (bpf_find_vma). */
static long stack_mapping_end(struct task_struct* task, struct vm_area_struct* vma, void* data) {
  *(__u64*)data = vma->vm_end; /* a trusted BTF pointer: a plain load, no stack */
  return 0;
}

/* Copies the registers and the user stack of `regs` (user mode registers: a uprobe's context,
 * or bpf_task_pt_regs() in a system call) and returns the site key for the region, 0 when
 * nothing could be captured. Sends the sample unless the image sent that site before. */
static __always_inline __u64 capture_stack(const struct pt_regs* regs, __u32 tgid, __u32 exec_id,
                                           __u64 start_ns, __s32 stack_id) {
  if (stack_copy_bytes == 0) return 0;
  struct mr_globals* g = global_counters();
  __u32 zero = 0;
  struct mr_stack_sample* sample = bpf_map_lookup_elem(&sample_scratch, &zero);
  if (!sample || !g) return 0;
  /* The registers go through the copy's space first: 168 bytes of pt_regs on the BPF stack
   * would leave no room for bpf_find_vma's callback frame under the 512-byte limit (6.1
   * counts the caller's and the callback's frames together). */
  struct pt_regs* r = (struct pt_regs*)sample->data;
  if (bpf_probe_read_kernel(r, sizeof(*r), regs) != 0) return 0;
  sample->regs[0] = r->ax;
  sample->regs[1] = r->dx;
  sample->regs[2] = r->cx;
  sample->regs[3] = r->bx;
  sample->regs[4] = r->si;
  sample->regs[5] = r->di;
  sample->regs[6] = r->bp;
  sample->regs[7] = r->sp;
  sample->regs[8] = r->r8;
  sample->regs[9] = r->r9;
  sample->regs[10] = r->r10;
  sample->regs[11] = r->r11;
  sample->regs[12] = r->r12;
  sample->regs[13] = r->r13;
  sample->regs[14] = r->r14;
  sample->regs[15] = r->r15;
  sample->regs[16] = r->ip;
  const __u64 sp = r->sp;
  const __u64 ip = r->ip;
  /* The copy ends where the stack mapping does: a read crossing its end fails whole (and a
   * failed read costs a fault, 5-8 us on this VM). The mapping's end bounds it when
   * bpf_find_vma() (5.17) can tell; otherwise, or when the mm's lock is contended, a shorter
   * read is tried after a failed one (a shallow stack near the top of the main thread's). */
  __u32 size = stack_copy_bytes > MR_STACK_COPY_MAX ? MR_STACK_COPY_MAX : stack_copy_bytes;
  if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_find_vma)) {
    __u64 end = 0;
    if (bpf_find_vma(bpf_get_current_task_btf(), sp, stack_mapping_end, &end, 0) == 0 && end > sp &&
        end - sp < size) {
      size = end - sp;
    }
  }
  size &= ~7U;
  int copied = 0;
  for (int attempt = 0; attempt < 8; attempt++) {
    if (size < 64 || size > MR_STACK_COPY_MAX) break;
    if (bpf_probe_read_user(sample->data, size, (const void*)sp) == 0) {
      copied = 1;
      break;
    }
    size = (size / 2) & ~7U;
  }
  if (!copied) {
    __sync_fetch_and_add(&g->stack_copy_failed, 1);
    return 0;
  }
  sample->tgid = tgid;
  sample->exec_id = exec_id;
  sample->proc_start_ns = start_ns;
  sample->size = size;
  sample->stack_id = stack_id;
  struct mr_proc_key image = {.tgid = tgid, .exec_id = exec_id, .start_ns = start_ns};
  const struct mr_code_ranges* ranges = bpf_map_lookup_elem(&code_ranges, &image);
  __u64 site;
  struct mr_site_key seen = {.tgid = tgid, .exec_id = exec_id, .start_ns = start_ns};
  /* bpf_loop() (5.17) walks the copy: an open-coded loop over 2,048 words is past the
   * verifier's limits. Without it every sample is a site of its own (no deduplication). */
  int hashed = ranges && bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_loop);
  if (hashed) {
    /* FNV-1a over 64-bit words: the IP, the ranges' generation, the code pointers. */
    struct hash_walk walk = {
        .sample = sample, .ranges = ranges, .words = size / 8, .hash = 0xcbf29ce484222325ULL};
    walk.hash = (walk.hash ^ ip) * 0x100000001b3ULL;
    walk.hash = (walk.hash ^ ranges->generation) * 0x100000001b3ULL;
    bpf_loop(walk.words, hash_code_word, &walk, 0);
    site = walk.hash & ~MR_SITE_UNIQUE;
    if (site == 0) site = 1;
    seen.site = site;
    if (bpf_map_lookup_elem(&sites_seen, &seen)) {
      __sync_fetch_and_add(&g->stack_samples_deduplicated, 1);
      return site;
    }
  } else {
    site = MR_SITE_UNIQUE | __sync_fetch_and_add(&g->next_site, 1);
  }
  sample->site = site;
  /* The bound the read loop checked, again where the verifier sees it: the compiler knows
   * it holds and would drop a plain check (hence the empty asm). */
  __u32 bytes = size;
  asm volatile("" : "+r"(bytes));
  if (bytes > MR_STACK_COPY_MAX) return 0;
  if (bpf_ringbuf_output(&stack_samples, sample, offsetof(struct mr_stack_sample, data) + bytes,
                         0) != 0) {
    __sync_fetch_and_add(&g->lost_stack_samples, 1);
    return 0;
  }
  if (hashed) {
    __u8 one = 1;
    bpf_map_update_elem(&sites_seen, &seen, &one, BPF_ANY);
  }
  __sync_fetch_and_add(&g->stack_samples, 1);
  return site;
}

#endif /* RDMASCOPE_PROBES_MR_COMMON_BPF_H */
