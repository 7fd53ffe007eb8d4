/* The preload library's state: the mapped stats file with its CQ and SRQ slots, and
 * open-addressing tables from verbs objects to them, read without locks on the data path. */
#ifndef RDMASCOPE_PRELOAD_TABLES_H
#define RDMASCOPE_PRELOAD_TABLES_H

#include <stdint.h>

#include "stats_file.h"

/* Linear probing with a bounded probe length: a key lives at most OCC_TABLE_MAX_PROBE slots
 * past its home slot, so a miss (an object the library does not track) costs at most that
 * many loads, however full the table. An insert that finds no free slot in that window fails
 * and the caller counts the object as untracked. Removal leaves a tombstone only where a
 * later key's probe run may pass through it; inserts reuse tombstones, and a removal followed
 * by an empty slot turns the trailing tombstones back into empty slots. */
#define OCC_TABLE_MAX_PROBE 32
#define OCC_KEY_EMPTY 0ull
#define OCC_KEY_REMOVED UINT64_MAX

struct occ_table_entry {
  uint64_t key; /* OCC_KEY_EMPTY, OCC_KEY_REMOVED or a key; published last (release) */
  void* value;
};

/* bits: log2 of the number of entries; entries: 1 << bits of them, zeroed; used: how many are
 * not empty (live or tombstones). At least one entry is always kept empty: every probe run
 * then ends at an empty slot, so once its keys are removed a run's tombstones all become
 * empty again. */
struct occ_table {
  uint32_t bits;
  struct occ_table_entry* entries;
  uint32_t* used;
};

#define OCC_TABLE_DEFINE(name, nbits)                          \
  static struct occ_table_entry name##_entries[1u << (nbits)]; \
  static uint32_t name##_used;                                 \
  static const struct occ_table name = {                       \
      .bits = (nbits), .entries = name##_entries, .used = &name##_used}

/* Lookups are lock-free; inserts and removes must be serialised by the caller. */
static inline uint32_t occ_table_slot(const struct occ_table* table, uint64_t key) {
  return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - table->bits));
}

static inline void* occ_table_find(const struct occ_table* table, uint64_t key) {
  const uint32_t mask = (1u << table->bits) - 1;
  uint32_t i = occ_table_slot(table, key);
  for (uint32_t n = 0; n < OCC_TABLE_MAX_PROBE; i = (i + 1) & mask, n++) {
    uint64_t k = __atomic_load_n(&table->entries[i].key, __ATOMIC_ACQUIRE);
    if (k == key) return __atomic_load_n(&table->entries[i].value, __ATOMIC_RELAXED);
    if (k == OCC_KEY_EMPTY) return 0;
  }
  return 0;
}

/* 1 if inserted (or replaced), 0 if no slot was free within the probe window. */
int occ_table_insert(const struct occ_table* table, uint64_t key, void* value);
/* The removed value, or 0 if the key was not there. */
void* occ_table_remove(const struct occ_table* table, uint64_t key);

/* Creates and maps this process's stats file once per process image (again in a forked
 * child); 0 if that failed (then nothing is counted and the application runs as without the
 * library). Call with the library's control lock held. */
struct occ_file* occ_file_open(void);
/* The file if open, without trying to open it. */
struct occ_file* occ_file_current(void);
/* The same, for the data path (no call): set once the file is mapped, 0 in a forked child
 * until it opens its own. */
extern struct occ_file* occ_mapped_file;

struct occ_cq* occ_cq_alloc(void);
void occ_cq_free(struct occ_cq* slot);
struct occ_srq* occ_srq_alloc(void);
void occ_srq_free(struct occ_srq* slot);

/* A counter several threads may update: relaxed atomic read-modify-write. */
static inline __attribute__((always_inline)) void occ_add(uint64_t* counter, uint64_t n) {
  __atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

/* A counter only one thread writes (an owner's word, stats_file.h): plain load and store,
 * whole aligned words so that a reader never sees a torn value. */
static inline __attribute__((always_inline)) void occ_add_own(uint64_t* counter, uint64_t n) {
  __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

#endif /* RDMASCOPE_PRELOAD_TABLES_H */
