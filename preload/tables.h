/* The preload library's state: the mapped stats file with its CQ and SRQ slots, and
 * open-addressing tables from verbs objects to them, read without locks on the data path. */
#ifndef RDMASCOPE_PRELOAD_TABLES_H
#define RDMASCOPE_PRELOAD_TABLES_H

#include <stdint.h>

#include "stats_file.h"

#define OCC_TABLE_BITS 13 /* 8192 entries: 4 x 128 KiB, touched only as used */

struct occ_table_entry {
  uint64_t key; /* 0: empty, UINT64_MAX: removed */
  void* value;
};

struct occ_table {
  struct occ_table_entry entries[1u << OCC_TABLE_BITS];
};

/* Lookups are lock-free; inserts and removes must be serialised by the caller. */
static inline uint32_t occ_table_slot(uint64_t key) {
  return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - OCC_TABLE_BITS));
}

static inline void* occ_table_find(const struct occ_table* table, uint64_t key) {
  const uint32_t mask = (1u << OCC_TABLE_BITS) - 1;
  for (uint32_t i = occ_table_slot(key), n = 0; n <= mask; i = (i + 1) & mask, n++) {
    uint64_t k = __atomic_load_n(&table->entries[i].key, __ATOMIC_ACQUIRE);
    if (k == key) return table->entries[i].value;
    if (k == 0) return 0;
  }
  return 0;
}

int occ_table_insert(struct occ_table* table, uint64_t key, void* value);
void* occ_table_remove(struct occ_table* table, uint64_t key);

/* Creates and maps this process's stats file once; 0 if that failed (then nothing is
 * counted and the application runs as without the library). */
struct occ_file* occ_file_open(void);

struct occ_cq* occ_cq_alloc(void);
void occ_cq_free(struct occ_cq* slot);
struct occ_srq* occ_srq_alloc(void);
void occ_srq_free(struct occ_srq* slot);

#endif /* RDMASCOPE_PRELOAD_TABLES_H */
