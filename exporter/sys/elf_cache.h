// ELF files shared between the DWARF unwinder's libdwfl sessions (sys/dwarf_unwinder.h): the
// ranks of an MPI or NCCL job are dozens of processes of one program on a host, mapping the
// same program and libraries. Each file is mapped once, read-only, and every session that has
// it as a module gets its own libelf descriptor over those bytes (ElfImage::NewElf).
//
// A file is opened by the caller (sys/untrusted_files.h: through the kernel's handle of the
// mapping or inside the process's root, never by path in the exporter's namespace) and
// identified by device, inode, size and modification time: a process in another mount
// namespace (a container) gets its own file, and a file replaced under its path (a library
// upgraded) is a new entry. Every file is checked (sys/elf_checks.h) before libelf parses more
// than its headers; a refused one is never handed to libdwfl.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sys/elf_checks.h"
#include "sys/untrusted_files.h"

struct Elf;

namespace rdmascope::sys {

// One file's bytes, mapped read-only for as long as a session uses it or the cache keeps it.
class ElfImage {
 public:
  // `writable`: a private copy-on-write mapping that libelf may write (decompressing a
  // section rewrites its header in place), for one session only.
  ElfImage(void* address, size_t size, bool writable = false)
      : address_(address), size_(size), writable_(writable) {}
  ~ElfImage();
  ElfImage(const ElfImage&) = delete;
  ElfImage& operator=(const ElfImage&) = delete;

  std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(address_), size_};
  }
  // A new descriptor over the shared bytes (elf_memory), owned by the caller: elf_end() never
  // unmaps them. nullptr if libelf cannot make one.
  Elf* NewElf() const;
  bool writable() const { return writable_; }

 private:
  void* const address_;
  const size_t size_;
  const bool writable_;
};

struct ElfCacheStats {
  uint64_t entries = 0;   // files mapped: in use by a session, or kept unused
  uint64_t unused = 0;    // of `entries`, those no session holds (the LRU)
  uint64_t bytes = 0;     // the sizes of those files (mapped, mostly not resident)
  uint64_t hits = 0;      // opens served by a mapped file
  uint64_t misses = 0;    // opens that read a file
  uint64_t declined = 0;  // opens of files the cache does not share (see Open)
  uint64_t refused = 0;   // files not handed to libdwfl at all (ElfOpened::refused)
};

struct ElfOpened {
  std::shared_ptr<const ElfImage> image;  // null when refused
  std::string refused;                    // why (sys/elf_checks.h), "" otherwise
  std::vector<uint8_t> alt_build_id;      // the file's .gnu_debugaltlink build id, if any
  std::string alt_name;                   // and its name
};

// Thread-safe.
// A file others than root can write (OpenedFile::only_root_can_write false) is copied into
// memory before it is parsed (its owner could rewrite it meanwhile), at most this many bytes:
// in the exporter, 256 MiB. The sandboxed unwind worker, whose address space RLIMIT_AS bounds
// (unwind_sandbox.h; a failed copy is a refusal there), raises the bound to that of mapped
// files (untrusted_files.h kMaxElfFileBytes): a user's own libtorch_cuda.so of a GiB in a
// virtualenv is copied there, not refused. Files only root can write are mapped in both.
inline constexpr uint64_t kDefaultMaxCopiedElfBytes = 256ULL << 20;
void SetMaxCopiedElfBytes(uint64_t bytes);

class ElfCache {
 public:
  // Files no session uses stay mapped, the `max_unused` most recently released of them, for
  // the next process of the same program; the older ones are unmapped.
  explicit ElfCache(size_t max_unused = 256);
  ~ElfCache();
  ElfCache(const ElfCache&) = delete;
  ElfCache& operator=(const ElfCache&) = delete;

  // The image of `file` (opened and checked by sys/untrusted_files.h), held until the returned
  // pointer and its copies are gone. Files libelf or libdw would write to (compressed
  // sections, anything but ET_EXEC and ET_DYN: see elf_cache.cc) get a private writable
  // mapping of their own ("declined": not shared). Refused (no image) when CheckElf refuses
  // it or it cannot be mapped.
  ElfOpened Open(OpenedFile file, const ElfLimits& limits = {});

  ElfCacheStats stats() const;

 private:
  struct State;
  // Shared with the pointers Open() returns: each one's release reaches the state.
  std::shared_ptr<State> state_;
};

}  // namespace rdmascope::sys
