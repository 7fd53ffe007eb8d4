// Attached to veth interfaces in the host tests so that veth's per-queue XDP counters move:
// veth counts rx_queue_N_xdp_packets only for frames that pass through an XDP program.
#include <linux/bpf.h>

#define SEC(name) __attribute__((section(name), used))

SEC("xdp") int xdp_pass(struct xdp_md* ctx) { return XDP_PASS; }

char LICENSE[] SEC("license") = "GPL";
