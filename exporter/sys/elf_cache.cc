#include "sys/elf_cache.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <compare>
#include <cstring>
#include <expected>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// Why sessions share bytes rather than an Elf* (elfutils 0.188):
// - libdwfl owns the Elf* a find_elf callback hands it (libdwfl/dwfl_module_getdwarf.c
//   __libdwfl_getelf; dwfl_module.c free_file calls elf_end on it when the Dwfl ends or a
//   re-report drops the module), and a descriptor is not safe to use from two threads: libelf
//   converts section data and fills its section table lazily, and Debian builds it without
//   --enable-thread-safety. One Elf* can therefore belong to one session only. elf_clone
//   exists but makes an empty descriptor (libelf/elf_clone.c: only ELF_C_EMPTY), not a reader.
// - elf_memory over the file's bytes gives each session its own cheap descriptor: headers and
//   section data of a native-endian file point into the bytes (libelf/elf_begin.c
//   file_read_elf, elf_getdata.c convert_data), and elf_end never frees or unmaps a buffer it
//   did not allocate (elf_end.c: only ELF_F_MALLOCED or ELF_F_MMAPPED ones).
// - But those descriptors point into the bytes for writing too: decompressing a section
//   (elf_compress.c updates sh_flags and sh_size through the header in place) and relocating
//   one (libdwfl/relocate.c, ET_REL only). libdw decompresses SHF_COMPRESSED and .zdebug
//   sections when it opens DWARF (libdw/dwarf_begin_elf.c check_section), libdwfl a
//   compressed symbol table (dwfl_module_getdwarf.c find_symtab). Files with either, and
//   anything but ET_EXEC or ET_DYN, are declined: each session gets a private copy-on-write
//   mapping of its own, which libelf may write (the inflated sizes bounded by CheckElf).
//   The rest are never written; the mapping is PROT_READ all the same, so that a write missed
//   here faults instead of changing another session's view of the file.
// - The bytes are a read-only private mapping, not a read (elf_cntl(ELF_C_FDREAD) on a
//   non-mmapped descriptor copies the whole file to the heap): page-cache pages, shared with
//   the processes that run the file; no file descriptor stays open; nothing reads lazily.
// Parsed CFI is not shared: see dwarf_unwinder.cc.
namespace rdmascope::sys {
namespace {

struct FileKey {
  uint64_t device;
  uint64_t inode;
  int64_t size;
  int64_t mtime_sec;
  int64_t mtime_nsec;

  auto operator<=>(const FileKey&) const = default;
};

FileKey KeyOf(const struct stat& status) {
  return {.device = status.st_dev,
          .inode = status.st_ino,
          .size = status.st_size,
          .mtime_sec = status.st_mtim.tv_sec,
          .mtime_nsec = status.st_mtim.tv_nsec};
}

void InitLibelf() {
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });
}

// See the top of the file: what libelf and libdw only ever read (the compressed sections are
// found by CheckElf).
bool Shareable(const ElfImage& image, const ElfVerdict& verdict) {
  if (verdict.compressed) return false;
  Elf* elf = image.NewElf();
  if (elf == nullptr) return false;
  GElf_Ehdr header{};
  const bool ok = elf_kind(elf) == ELF_K_ELF && gelf_getehdr(elf, &header) != nullptr &&
                  (header.e_type == ET_EXEC || header.e_type == ET_DYN);
  elf_end(elf);
  return ok;
}

// Files others than root can write are copied into memory: a lower bound than the mapped ones
// (SetMaxCopiedElfBytes).
std::atomic<uint64_t> max_copied_bytes{kDefaultMaxCopiedElfBytes};

struct Loaded {
  FileKey key;
  std::unique_ptr<ElfImage> image;
  bool shareable = false;
  std::vector<uint8_t> alt_build_id;
  std::string alt_name;
};

// The file's bytes in anonymous memory (read, not mapped), writable until the caller seals it.
void* CopyFile(int fd, size_t size) {
  void* address = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (address == MAP_FAILED) return MAP_FAILED;
  auto* bytes = static_cast<char*>(address);
  for (size_t done = 0; done < size;) {
    const ssize_t got = pread(fd, bytes + done, size - done, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {  // truncated meanwhile, or unreadable
      munmap(address, size);
      errno = got == 0 ? EIO : errno;
      return MAP_FAILED;
    }
    done += static_cast<size_t>(got);
  }
  return address;
}

// Maps (or copies) and checks the file; the refusal's reason otherwise.
std::expected<Loaded, std::string> Load(const OpenedFile& file, const ElfLimits& limits) {
  const auto size = static_cast<size_t>(file.status.st_size);
  // Only root can change the bytes: they are mapped from the file (page cache, shared with the
  // processes that run it). Any other file is copied into private memory first: its owner
  // could rewrite it between the checks below and libelf's reading (a section made compressed
  // after the check would make libelf write into a read-only mapping, or inflate to any size).
  const bool copy = !file.only_root_can_write;
  const uint64_t max_copied = max_copied_bytes.load(std::memory_order_relaxed);
  if (copy && static_cast<uint64_t>(file.status.st_size) > max_copied) {
    return std::unexpected("a file others than root can write, larger than " +
                           std::to_string(max_copied >> 20) + " MiB");
  }
  void* address = copy ? CopyFile(file.fd.get(), size)
                       : mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd.get(), 0);
  if (address == MAP_FAILED) return std::unexpected(std::string("read: ") + std::strerror(errno));
  auto image = std::make_unique<ElfImage>(address, size, copy);
  Elf* elf = image->NewElf();
  // A copy is checked on its own bytes: no second reading of the file.
  ElfVerdict verdict = CheckElf(elf, copy ? -1 : file.fd.get(), limits);
  if (elf != nullptr) elf_end(elf);
  if (!verdict.refused.empty()) return std::unexpected(verdict.refused);
  Loaded loaded{.key = KeyOf(file.status),
                .image = nullptr,
                .shareable = Shareable(*image, verdict),
                .alt_build_id = std::move(verdict.alt_build_id),
                .alt_name = std::move(verdict.alt_name)};
  if (loaded.shareable && copy) {
    mprotect(address, size, PROT_READ);  // shared: a write missed here faults
  } else if (!loaded.shareable && !copy) {
    // A private copy-on-write mapping libelf may write into, for this session alone.
    image.reset();
    address = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd.get(), 0);
    if (address == MAP_FAILED) return std::unexpected(std::string("mmap: ") + std::strerror(errno));
    image = std::make_unique<ElfImage>(address, size, /*writable=*/true);
  }
  loaded.image = std::move(image);
  return loaded;
}

}  // namespace

ElfImage::~ElfImage() { munmap(address_, size_); }

Elf* ElfImage::NewElf() const { return elf_memory(static_cast<char*>(address_), size_); }

struct ElfCache::State {
  struct Entry {
    std::unique_ptr<ElfImage> image;
    size_t users = 0;
    std::vector<uint8_t> alt_build_id;
    std::string alt_name;
    // In `unused` exactly when no session holds the file (users == 0).
    std::list<FileKey>::iterator unused;
  };

  explicit State(size_t max) : max_unused(max) {}

  // Under `mutex`: one more user of the entry (out of the LRU if it was there).
  const ElfImage* Acquire(Entry& entry) {
    if (entry.users++ == 0 && entry.unused != unused.end()) {
      unused.erase(entry.unused);
      entry.unused = unused.end();
    }
    return entry.image.get();
  }

  // A session let go of `key`'s file: into the LRU when it was the last; the oldest files of
  // the LRU beyond max_unused are unmapped (outside the lock).
  void Release(const FileKey& key) {
    std::vector<std::unique_ptr<ElfImage>> evicted;
    std::lock_guard lock(mutex);
    const auto it = entries.find(key);
    if (it == entries.end() || it->second.users == 0 || --it->second.users > 0) return;
    unused.push_front(key);
    it->second.unused = unused.begin();
    while (unused.size() > max_unused) {
      const auto oldest = entries.find(unused.back());
      bytes -= oldest->second.image->bytes().size();
      evicted.push_back(std::move(oldest->second.image));
      entries.erase(oldest);
      unused.pop_back();
    }
    // `evicted`, declared before `lock`, is destroyed after the lock is released.
  }

  const size_t max_unused;
  mutable std::mutex mutex;
  std::map<FileKey, Entry> entries;
  std::list<FileKey> unused;  // the most recently released first
  uint64_t bytes = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t declined = 0;
  uint64_t refused = 0;
};

ElfCache::ElfCache(size_t max_unused) : state_(std::make_shared<State>(max_unused)) {
  InitLibelf();
}

ElfCache::~ElfCache() = default;

void SetMaxCopiedElfBytes(uint64_t bytes) {
  max_copied_bytes.store(bytes, std::memory_order_relaxed);
}

ElfOpened ElfCache::Open(OpenedFile file, const ElfLimits& limits) {
  // A lease of the entry: its release reaches the state even after the cache is gone.
  const auto lease = [this](const FileKey& key, const ElfImage* image) {
    return std::shared_ptr<const ElfImage>(
        image, [state = state_, key](const ElfImage*) { state->Release(key); });
  };
  const FileKey key = KeyOf(file.status);
  {
    std::lock_guard lock(state_->mutex);
    if (const auto it = state_->entries.find(key); it != state_->entries.end()) {
      ++state_->hits;
      const ElfImage* image = state_->Acquire(it->second);
      return {.image = lease(key, image),
              .refused = "",
              .alt_build_id = it->second.alt_build_id,
              .alt_name = it->second.alt_name};
    }
  }
  // Mapping and checking a file takes a while: not under the lock. Two threads may map the
  // same file at once; the second to finish uses the first's entry.
  std::expected<Loaded, std::string> loaded = Load(file, limits);
  std::unique_ptr<ElfImage> duplicate;
  std::lock_guard lock(state_->mutex);
  if (!loaded) {
    ++state_->refused;
    return {.image = nullptr, .refused = loaded.error(), .alt_build_id = {}, .alt_name = {}};
  }
  if (!loaded->shareable) {
    ++state_->declined;
    return {.image = std::shared_ptr<const ElfImage>(std::move(loaded->image)),
            .refused = "",
            .alt_build_id = std::move(loaded->alt_build_id),
            .alt_name = std::move(loaded->alt_name)};
  }
  ++state_->misses;
  auto [it, inserted] = state_->entries.try_emplace(loaded->key);
  if (inserted) {
    it->second.image = std::move(loaded->image);
    it->second.unused = state_->unused.end();
    it->second.alt_build_id = loaded->alt_build_id;
    it->second.alt_name = loaded->alt_name;
    state_->bytes += it->second.image->bytes().size();
  } else {
    duplicate = std::move(loaded->image);  // unmapped below, after the lock (declared first)
  }
  const ElfImage* image = state_->Acquire(it->second);
  return {.image = lease(loaded->key, image),
          .refused = "",
          .alt_build_id = std::move(loaded->alt_build_id),
          .alt_name = std::move(loaded->alt_name)};
}

ElfCacheStats ElfCache::stats() const {
  std::lock_guard lock(state_->mutex);
  return {.entries = state_->entries.size(),
          .unused = state_->unused.size(),
          .bytes = state_->bytes,
          .hits = state_->hits,
          .misses = state_->misses,
          .declined = state_->declined,
          .refused = state_->refused};
}

}  // namespace rdmascope::sys
