/* The preload library's lock-free tables (preload/tables.{h,c}), in C as the library is:
 * - an insert that finds no free slot within OCC_TABLE_MAX_PROBE of the key's home fails (the
 *   caller counts the object as untracked), never silently; one slot always stays empty;
 * - every inserted key is found, removed keys are not;
 * - once every key is removed, no tombstone is left (each probe run ends at an empty slot);
 * - keys that differ in any bit are distinct (no folding of two fields into one).
 * Prints "FAIL ..." lines and exits 1 on a failure. */
#include <stdio.h>
#include <stdlib.h>

#include "tables.h"

OCC_TABLE_DEFINE(small, 8); /* 256 entries */

static int failures;
#define CHECK(cond, ...)            \
  do {                              \
    if (!(cond)) {                  \
      printf("FAIL: " __VA_ARGS__); \
      printf("\n");                 \
      failures++;                   \
    }                               \
  } while (0)

static uint64_t key_of(uint32_t i) { return 0x10000ull * (i + 1) + 7; }

int main(void) {
  const uint32_t size = 1u << small.bits;
  uint32_t inserted = 0, refused = 0;
  static int value[4096];
  /* Many more keys than entries: inserts fill the table, then fail. */
  uint8_t in[4096] = {0};
  for (uint32_t i = 0; i < 4096; i++) {
    if (occ_table_insert(&small, key_of(i), &value[i])) {
      in[i] = 1;
      inserted++;
    } else {
      refused++;
    }
  }
  CHECK(refused > 0, "no insert refused out of 4096 into %u entries", size);
  CHECK(inserted < size, "%u keys in %u entries: none kept empty", inserted, size);
  uint32_t empty = 0;
  for (uint32_t i = 0; i < size; i++) empty += small.entries[i].key == OCC_KEY_EMPTY;
  CHECK(empty >= 1, "no empty entry left");
  for (uint32_t i = 0; i < 4096; i++) {
    void* found = occ_table_find(&small, key_of(i));
    CHECK(found == (in[i] ? &value[i] : NULL), "key %u: found %p", i, found);
  }
  /* Remove in a scattered order, checking the others stay found. */
  for (uint32_t step = 0, i = 0; step < 4096; step++, i = (i + 1237) % 4096) {
    if (!in[i]) continue;
    CHECK(occ_table_remove(&small, key_of(i)) == &value[i], "remove %u", i);
    in[i] = 0;
    CHECK(occ_table_find(&small, key_of(i)) == NULL, "removed key %u still found", i);
    for (uint32_t j = 0; j < 4096; j += 97) {
      if (in[j]) CHECK(occ_table_find(&small, key_of(j)) == &value[j], "key %u lost", j);
    }
  }
  uint32_t left = 0;
  for (uint32_t i = 0; i < size; i++) left += small.entries[i].key != OCC_KEY_EMPTY;
  CHECK(left == 0, "%u tombstones left in an emptied table", left);
  CHECK(*small.used == 0, "used count %u in an emptied table", *small.used);
  /* Refilled after emptying: as many fit as the first time or more (no slot lost). */
  uint32_t again = 0;
  for (uint32_t i = 0; i < 4096; i++) again += occ_table_insert(&small, key_of(i), &value[i]);
  CHECK(again >= inserted * 9 / 10, "%u keys fit after emptying, %u before", again, inserted);
  /* (context index 1, qp 2) and (context index 2, qp 1) are different keys. */
  uint64_t a = (1ull << 32) | 2, b = (2ull << 32) | 1;
  for (uint32_t i = 0; i < 4096; i++) occ_table_remove(&small, key_of(i));
  CHECK(occ_table_insert(&small, a, &value[0]) && occ_table_insert(&small, b, &value[1]),
        "insert pair");
  CHECK(occ_table_find(&small, a) == &value[0] && occ_table_find(&small, b) == &value[1],
        "two fields' keys mixed up");
  printf(failures ? "FAILED\n" : "PASS: %u of 4096 keys in %u entries, %u refused\n", inserted,
         size, refused);
  return failures ? 1 : 0;
}
