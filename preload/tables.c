#define _GNU_SOURCE
#include "tables.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Guarded by the library's control lock (preload.c), which callers hold. */
static struct occ_file* file;
struct occ_file* occ_mapped_file; /* = file, read by the data path (tables.h) */
static int file_tried; /* this process image (or forked child) already tried to open one */
static int file_fd = -1;
static char file_path[4096];
static char readers_path[4096 + sizeof OCC_READERS_FILE]; /* <dir>/.readers (stats_file.h) */
static pid_t file_owner;

int occ_table_insert(const struct occ_table* table, uint64_t key, void* value) {
  const uint32_t mask = (1u << table->bits) - 1;
  const uint32_t home = occ_table_slot(table, key);
  struct occ_table_entry* free_entry = 0;
  uint32_t i = home;
  for (uint32_t n = 0; n < OCC_TABLE_MAX_PROBE; i = (i + 1) & mask, n++) {
    uint64_t k = table->entries[i].key;
    if (k == key) { /* a stale entry (destroyed through a path we do not see): replaced */
      __atomic_store_n(&table->entries[i].value, value, __ATOMIC_RELEASE);
      return 1;
    }
    if (k == OCC_KEY_REMOVED && !free_entry) free_entry = &table->entries[i];
    if (k == OCC_KEY_EMPTY) {
      if (!free_entry) {
        if (*table->used + 1 >= (1u << table->bits)) return 0; /* keep one empty */
        free_entry = &table->entries[i];
        ++*table->used;
      }
      break;
    }
  }
  if (!free_entry) return 0;
  /* Every slot between home and this one is occupied (live or tombstone): a lookup of `key`
   * reaches it. The value is published before the key. */
  __atomic_store_n(&free_entry->value, value, __ATOMIC_RELAXED);
  __atomic_store_n(&free_entry->key, key, __ATOMIC_RELEASE);
  return 1;
}

void* occ_table_remove(const struct occ_table* table, uint64_t key) {
  const uint32_t mask = (1u << table->bits) - 1;
  uint32_t i = occ_table_slot(table, key);
  for (uint32_t n = 0; n < OCC_TABLE_MAX_PROBE; i = (i + 1) & mask, n++) {
    uint64_t k = table->entries[i].key;
    if (k == OCC_KEY_EMPTY) return 0;
    if (k != key) continue;
    void* value = table->entries[i].value;
    /* A tombstone keeps the probe runs of later keys that pass through this slot intact. If
     * the next slot is empty no run passes through (runs are contiguous), so this slot and
     * the tombstones just before it can become empty again: that is how tombstones are
     * reclaimed without moving live keys under lock-free readers. */
    if (table->entries[(i + 1) & mask].key != OCC_KEY_EMPTY) {
      __atomic_store_n(&table->entries[i].key, OCC_KEY_REMOVED, __ATOMIC_RELEASE);
      return value;
    }
    __atomic_store_n(&table->entries[i].key, OCC_KEY_EMPTY, __ATOMIC_RELEASE);
    --*table->used;
    for (uint32_t j = (i - 1) & mask; j != i && table->entries[j].key == OCC_KEY_REMOVED;
         j = (j - 1) & mask) {
      __atomic_store_n(&table->entries[j].key, OCC_KEY_EMPTY, __ATOMIC_RELEASE);
      --*table->used;
    }
    return value;
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

/* The inode of this process's pid namespace: the same pid in two namespaces sharing the
 * directory gives two names. 0 if /proc is not mounted (then pid and start time alone). */
static uint64_t pid_namespace(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* A forked child must not count into its parent's file, nor keep its liveness lock: the
 * mapping becomes private (pointers into it stay valid, counts go nowhere), the inherited
 * descriptor is closed (the lock stays with the parent's), and the child opens a file of its
 * own the next time it opens a device. Runs in the child right after fork, single-threaded. */
static void after_fork_in_child(void) {
  if (file) {
    mmap(file, sizeof(*file), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
         0);
  }
  if (file_fd >= 0) close(file_fd);
  file_fd = -1;
  file = 0;
  __atomic_store_n(&occ_mapped_file, 0, __ATOMIC_RELAXED);
  file_tried = 0;
}

/* At exit: the file goes unless a reader holds <dir>/.readers, which then serves its final
 * figures once and deletes it. Non-blocking calls only (F_OFD_GETLK never waits), errno kept.
 * A process killed or ending in _exit skips this: its file stays stale until a reader runs. */
static void remove_at_exit(void) {
  if (!file || getpid() != file_owner) return;
  const int saved = errno;
  int read_by_someone = 0;
  /* Anyone can put something else there (the directory is world-writable): O_NONBLOCK so that
   * a FIFO never blocks the application's exit (open(2) of a FIFO for reading waits for a
   * writer), O_NOCTTY so that a terminal never becomes its controlling one, and only a regular
   * file's lock counts. */
  const int fd = open(readers_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd >= 0) {
    struct stat st;
    struct flock probe = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    read_by_someone = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                      fcntl(fd, F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
    close(fd);
  }
  if (!read_by_someone) unlink(file_path);
  errno = saved;
}

/* Creates <dir>/<ns>-<pid>-<start>-<n>.occ exclusively, trying n = 0, 1, ...: an earlier image
 * of this process (before an exec) may have left its file, never another live process. */
static int create_exclusive(const char* dir, uint64_t ns, uint64_t ticks) {
  for (int n = 0; n < 64; n++) {
    if (snprintf(file_path, sizeof file_path, "%s/%" PRIu64 "-%d-%" PRIu64 "-%d.occ", dir, ns,
                 (int)getpid(), ticks, n) >= (int)sizeof file_path) {
      return -1;
    }
    int fd = open(file_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

static void warn(const char* what, int err) {
  fprintf(stderr, "librdmascope_preload: %s %s: %s; queue occupancy not tracked\n", what, file_path,
          strerror(err));
}

static void open_file(void) {
  const char* dir = getenv("RDMASCOPE_PRELOAD_DIR");
  if (!dir || !*dir) dir = "/run/rdmascope";
  mkdir(dir, 0755); /* EEXIST is fine */
  const uint64_t ticks = start_ticks();
  const uint64_t ns = pid_namespace();
  int fd = create_exclusive(dir, ns, ticks);
  if (fd < 0) return; /* no directory or not allowed: quietly off, as before */
  /* Locked before it is sized: a file of full size without a lock is stale. */
  struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  if (fcntl(fd, F_OFD_SETLK, &lock) != 0) {
    warn("cannot lock", errno);
    goto fail;
  }
  /* Backed now, not sparse: a full filesystem fails here instead of raising SIGBUS in the
   * application at its first store to an unbacked page. */
  int err = posix_fallocate(fd, 0, sizeof(struct occ_file));
  if (err != 0) {
    warn("cannot allocate", err);
    goto fail;
  }
  void* map = mmap(NULL, sizeof(struct occ_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    warn("cannot map", errno);
    goto fail;
  }
  struct occ_file* f = map;
  f->header.version = OCC_VERSION;
  f->header.pid = (uint32_t)getpid();
  f->header.start_ticks = ticks;
  f->header.pid_ns = ns;
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
  file_fd = fd; /* kept open for life: it holds the liveness lock */
  snprintf(readers_path, sizeof readers_path, "%s/%s", dir, OCC_READERS_FILE);
  file_owner = getpid();
  file = f;
  __atomic_store_n(&occ_mapped_file, f, __ATOMIC_RELEASE);
  return;
fail:
  unlink(file_path);
  close(fd);
}

struct occ_file* occ_file_open(void) {
  static int registered;
  if (!file_tried) {
    file_tried = 1;
    if (!registered) {
      registered = 1;
      pthread_atfork(NULL, NULL, after_fork_in_child);
      atexit(remove_at_exit);
    }
    open_file();
  }
  return file;
}

struct occ_file* occ_file_current(void) {
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
  occ_add(&file->header.lost_cqs, 1);
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
  occ_add(&file->header.lost_srqs, 1);
  return 0;
}

void occ_srq_free(struct occ_srq* slot) { __atomic_store_n(&slot->in_use, 0, __ATOMIC_RELEASE); }
