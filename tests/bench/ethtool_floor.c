// Benchmark helper (issue #17): the kernel's share of an `ethtool -S` scrape, for any exporter.
// Reading one interface's driver statistics takes at least three SIOCETHTOOL calls: the count
// (ETHTOOL_GSSET_INFO), the names (ETHTOOL_GSTRINGS) and the values (ETHTOOL_GSTATS); node_exporter
// and rdmascope both make them (rdmascope asks SIOCGIFMTU and SIOCGIFINDEX too, and reads the
// names twice at an interface's first scrape). This times those three calls alone, for every
// interface of the current network namespace that has statistics, ROUNDS times, and prints the
// median of a round (all interfaces) in milliseconds: no exporter can collect the same statistics
// for less.
//
// Usage: ethtool_floor [ROUNDS]   (default 200). Output: "interfaces N median_ms X p10_ms Y".
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int ethtool(int fd, const char* name, void* command) {
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
  ifr.ifr_data = command;
  return ioctl(fd, SIOCETHTOOL, &ifr);
}

// The three calls for one interface; 0 if it has statistics, -1 otherwise.
static int read_stats(int fd, const char* name) {
  // ethtool_sset_info ends in a flexible array that receives one u32 per requested set.
  union {
    struct ethtool_sset_info info;
    __u8 bytes[sizeof(struct ethtool_sset_info) + sizeof(__u32)];
  } sset = {.info = {.cmd = ETHTOOL_GSSET_INFO, .sset_mask = 1ULL << ETH_SS_STATS}};
  __u32 count;
  if (ethtool(fd, name, &sset) != 0 || sset.info.sset_mask == 0) return -1;
  memcpy(&count, sset.bytes + sizeof(struct ethtool_sset_info), sizeof count);
  if (count == 0) return -1;
  struct ethtool_gstrings* strings = calloc(1, sizeof *strings + count * ETH_GSTRING_LEN);
  struct ethtool_stats* stats = calloc(1, sizeof *stats + count * sizeof(__u64));
  int ret = -1;
  if (strings != NULL && stats != NULL) {
    *strings = (struct ethtool_gstrings){
        .cmd = ETHTOOL_GSTRINGS, .string_set = ETH_SS_STATS, .len = count};
    *stats = (struct ethtool_stats){.cmd = ETHTOOL_GSTATS, .n_stats = count};
    ret = ethtool(fd, name, strings) == 0 && ethtool(fd, name, stats) == 0 ? 0 : -1;
  }
  free(strings);
  free(stats);
  return ret;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int compare(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 200;
  if (rounds <= 0) {
    fprintf(stderr, "usage: ethtool_floor [ROUNDS > 0]\n");
    return 2;
  }
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct if_nameindex* names = if_nameindex();
  double* times = calloc((size_t)rounds, sizeof *times);
  if (fd < 0 || names == NULL || times == NULL) {
    perror("ethtool_floor");
    return 1;
  }
  int interfaces = 0;
  for (const struct if_nameindex* n = names; n->if_name != NULL; ++n) {
    interfaces += read_stats(fd, n->if_name) == 0;
  }
  for (int r = 0; r < rounds; ++r) {
    const double start = now_ms();
    for (const struct if_nameindex* n = names; n->if_name != NULL; ++n) read_stats(fd, n->if_name);
    times[r] = now_ms() - start;
  }
  qsort(times, (size_t)rounds, sizeof *times, compare);
  printf("interfaces %d median_ms %.4f p10_ms %.4f\n", interfaces, times[rounds / 2],
         times[rounds / 10]);
  return 0;
}
