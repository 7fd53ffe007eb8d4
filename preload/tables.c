#define _GNU_SOURCE
#include "tables.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static struct occ_file* file;
static pthread_once_t file_once = PTHREAD_ONCE_INIT;
static char file_path[4096];
static pid_t file_owner;

int occ_table_insert(struct occ_table* table, uint64_t key, void* value) {
  const uint32_t mask = (1u << OCC_TABLE_BITS) - 1;
  for (uint32_t i = occ_table_slot(key), n = 0; n <= mask; i = (i + 1) & mask, n++) {
    uint64_t k = table->entries[i].key;
    if (k == 0 || k == UINT64_MAX || k == key) {
      table->entries[i].value = value;
      __atomic_store_n(&table->entries[i].key, key, __ATOMIC_RELEASE);
      return 1;
    }
  }
  return 0;
}

void* occ_table_remove(struct occ_table* table, uint64_t key) {
  const uint32_t mask = (1u << OCC_TABLE_BITS) - 1;
  for (uint32_t i = occ_table_slot(key), n = 0; n <= mask; i = (i + 1) & mask, n++) {
    uint64_t k = table->entries[i].key;
    if (k == key) {
      __atomic_store_n(&table->entries[i].key, UINT64_MAX, __ATOMIC_RELEASE);
      return table->entries[i].value;
    }
    if (k == 0) return 0;
  }
  return 0;
}

/* Field 22 of /proc/self/stat, after the comm's last ')'. */
static uint64_t start_ticks(void) {
  char buf[1024];
  FILE* f = fopen("/proc/self/stat", "re");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char* p = strrchr(buf, ')');
  if (!p) return 0;
  for (int field = 2; field < 22 && p; field++) p = strchr(p + 1, ' ');
  return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* A forked child must not count into its parent's file: its mapping becomes private. */
static void after_fork_in_child(void) {
  if (file) {
    mmap(file, sizeof(*file), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
         0);
  }
}

static void remove_at_exit(void) {
  if (file && getpid() == file_owner) unlink(file_path);
}

static void open_once(void) {
  const char* dir = getenv("RDMASCOPE_PRELOAD_DIR");
  if (!dir || !*dir) dir = "/run/rdmascope";
  mkdir(dir, 0755); /* EEXIST is fine */
  if (snprintf(file_path, sizeof file_path, "%s/%d.occ", dir, (int)getpid()) >=
      (int)sizeof file_path) {
    return;
  }
  int fd = open(file_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (ftruncate(fd, sizeof(struct occ_file)) != 0) {
    close(fd);
    unlink(file_path);
    return;
  }
  void* map = mmap(NULL, sizeof(struct occ_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    unlink(file_path);
    return;
  }
  struct occ_file* f = map;
  f->header.version = OCC_VERSION;
  f->header.pid = (uint32_t)getpid();
  f->header.start_ticks = start_ticks();
  f->header.max_cqs = OCC_MAX_CQS;
  f->header.max_srqs = OCC_MAX_SRQS;
  FILE* comm = fopen("/proc/self/comm", "re");
  if (comm) {
    if (fgets(f->header.comm, OCC_COMM_LEN, comm))
      f->header.comm[strcspn(f->header.comm, "\n")] = 0;
    fclose(comm);
  }
  /* The magic last: a reader never takes a half-written header for a valid one. */
  __atomic_store_n(&f->header.magic, OCC_MAGIC, __ATOMIC_RELEASE);
  file_owner = getpid();
  file = f;
  pthread_atfork(NULL, NULL, after_fork_in_child);
  atexit(remove_at_exit);
}

struct occ_file* occ_file_open(void) {
  pthread_once(&file_once, open_once);
  return file;
}

struct occ_cq* occ_cq_alloc(void) {
  if (!file) return 0;
  for (int i = 0; i < OCC_MAX_CQS; i++) {
    if (!file->cqs[i].in_use) {
      struct occ_cq* slot = &file->cqs[i];
      memset(slot, 0, sizeof(*slot));
      return slot;
    }
  }
  file->header.lost_cqs++;
  return 0;
}

void occ_cq_free(struct occ_cq* slot) { __atomic_store_n(&slot->in_use, 0, __ATOMIC_RELEASE); }

struct occ_srq* occ_srq_alloc(void) {
  if (!file) return 0;
  for (int i = 0; i < OCC_MAX_SRQS; i++) {
    if (!file->srqs[i].in_use) {
      struct occ_srq* slot = &file->srqs[i];
      memset(slot, 0, sizeof(*slot));
      return slot;
    }
  }
  file->header.lost_srqs++;
  return 0;
}

void occ_srq_free(struct occ_srq* slot) { __atomic_store_n(&slot->in_use, 0, __ATOMIC_RELEASE); }
