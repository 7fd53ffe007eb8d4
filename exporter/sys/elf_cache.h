// ELF files shared between the DWARF unwinder's libdwfl sessions (sys/dwarf_unwinder.h): the
// ranks of an MPI or NCCL job are dozens of processes of one program on a host, mapping the
// same program and libraries. Each file is mapped once, read-only, and every session that has
// it as a module gets its own libelf descriptor over those bytes (ElfImage::NewElf).
//
// A file is identified as the process sees it, through /proc/PID/root/<path>: device, inode,
// size and modification time. A process in another mount namespace (a container) gets its own
// file, and a file replaced under its path (a library upgraded) is a new entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>

struct Elf;

namespace rdmascope::sys {

// One file's bytes, mapped read-only for as long as a session uses it or the cache keeps it.
class ElfImage {
 public:
  ElfImage(void* address, size_t size) : address_(address), size_(size) {}
  ~ElfImage();
  ElfImage(const ElfImage&) = delete;
  ElfImage& operator=(const ElfImage&) = delete;

  std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(address_), size_};
  }
  // A new descriptor over the shared bytes (elf_memory), owned by the caller: elf_end() never
  // unmaps them. nullptr if libelf cannot make one.
  Elf* NewElf() const;

 private:
  void* const address_;
  const size_t size_;
};

struct ElfCacheStats {
  uint64_t entries = 0;   // files mapped: in use by a session, or kept unused
  uint64_t unused = 0;    // of `entries`, those no session holds (the LRU)
  uint64_t bytes = 0;     // the sizes of those files (mapped, mostly not resident)
  uint64_t hits = 0;      // opens served by a mapped file
  uint64_t misses = 0;    // opens that read a file
  uint64_t declined = 0;  // opens of files the cache does not share (see Open)
};

// Thread-safe.
class ElfCache {
 public:
  // Files no session uses stay mapped, the `max_unused` most recently released of them, for
  // the next process of the same program; the older ones are unmapped.
  explicit ElfCache(size_t max_unused = 256);
  ~ElfCache();
  ElfCache(const ElfCache&) = delete;
  ElfCache& operator=(const ElfCache&) = delete;

  // The file at `path` (/proc/PID/root/<module path>), held until the returned pointer and
  // its copies are gone. nullptr ("declined": the caller opens the file as it did without a
  // cache) for anything but a regular file, a file that cannot be read or mapped, and files
  // libelf or libdw would write to (see elf_cache.cc).
  std::shared_ptr<const ElfImage> Open(const std::filesystem::path& path);

  ElfCacheStats stats() const;

 private:
  struct State;
  // Shared with the pointers Open() returns: each one's release reaches the state.
  std::shared_ptr<State> state_;
};

}  // namespace rdmascope::sys
