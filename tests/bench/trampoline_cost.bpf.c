// SPDX-License-Identifier: GPL-2.0
/* The two attach mechanisms of MR tracking, with the same do-nothing program body: BPF
 * trampolines (fentry/fexit, the kernel path on uverbs/ib_core) on ksys_lseek, and uprobes
 * (uprobe/uretprobe, the libibverbs path) on a function of the bench program. Each program
 * counts its runs, so that the bench can check every call was traced. */
// vmlinux.h must come before the libbpf headers (as probes/.clang-format keeps them).
// clang-format off
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
// clang-format on

char LICENSE[] SEC("license") = "GPL";

__u64 runs = 0;

SEC("fentry/ksys_lseek")
int BPF_PROG(kernel_entry) {
  __sync_fetch_and_add(&runs, 1);
  return 0;
}

SEC("fexit/ksys_lseek")
int BPF_PROG(kernel_exit) {
  __sync_fetch_and_add(&runs, 1);
  return 0;
}

SEC("uprobe")
int BPF_KPROBE(user_entry) {
  __sync_fetch_and_add(&runs, 1);
  return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(user_exit) {
  __sync_fetch_and_add(&runs, 1);
  return 0;
}
