#include "sys/elf_cache.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <compare>
#include <list>
#include <map>
#include <mutex>
#include <optional>
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
//   anything but ET_EXEC or ET_DYN, are declined: libdwfl opens them per session as before.
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

bool Mappable(const struct stat& status) { return S_ISREG(status.st_mode) && status.st_size > 0; }

void InitLibelf() {
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });
}

// See the top of the file: what libelf and libdw only ever read.
bool Shareable(const ElfImage& image) {
  Elf* elf = image.NewElf();
  if (elf == nullptr) return false;
  GElf_Ehdr header{};
  bool ok = elf_kind(elf) == ELF_K_ELF && gelf_getehdr(elf, &header) != nullptr &&
            (header.e_type == ET_EXEC || header.e_type == ET_DYN);
  size_t names = 0;
  const bool named = elf_getshdrstrndx(elf, &names) == 0;
  for (Elf_Scn* section = nullptr; ok && (section = elf_nextscn(elf, section)) != nullptr;) {
    GElf_Shdr section_header{};
    if (gelf_getshdr(section, &section_header) == nullptr) {
      ok = false;
    } else if ((section_header.sh_flags & SHF_COMPRESSED) != 0) {
      ok = false;
    } else if (const char* name =
                   named ? elf_strptr(elf, names, section_header.sh_name) : nullptr) {
      ok = !std::string_view(name).starts_with(".zdebug");
    }
  }
  elf_end(elf);
  return ok;
}

struct Loaded {
  FileKey key;
  std::unique_ptr<ElfImage> image;
};

// Maps the file; nullopt when it is not one to share. O_NONBLOCK: a FIFO put in place of the
// file since the caller's stat() must not block the open.
std::optional<Loaded> Load(const std::filesystem::path& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat status {};
  void* address = MAP_FAILED;
  if (fstat(fd, &status) == 0 && Mappable(status)) {
    address = mmap(nullptr, static_cast<size_t>(status.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  }
  close(fd);
  if (address == MAP_FAILED) return std::nullopt;
  auto image = std::make_unique<ElfImage>(address, static_cast<size_t>(status.st_size));
  if (!Shareable(*image)) return std::nullopt;
  return Loaded{.key = KeyOf(status), .image = std::move(image)};
}

}  // namespace

ElfImage::~ElfImage() { munmap(address_, size_); }

Elf* ElfImage::NewElf() const { return elf_memory(static_cast<char*>(address_), size_); }

struct ElfCache::State {
  struct Entry {
    std::unique_ptr<ElfImage> image;
    size_t users = 0;
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
};

ElfCache::ElfCache(size_t max_unused) : state_(std::make_shared<State>(max_unused)) {
  InitLibelf();
}

ElfCache::~ElfCache() = default;

std::shared_ptr<const ElfImage> ElfCache::Open(const std::filesystem::path& path) {
  // A lease of the entry: its release reaches the state even after the cache is gone.
  const auto lease = [this](const FileKey& key, const ElfImage* image) {
    return std::shared_ptr<const ElfImage>(
        image, [state = state_, key](const ElfImage*) { state->Release(key); });
  };
  // stat() first, as dwfl_linux_proc_find_elf does: opening a device file mapped by the
  // process (/dev/infiniband/uverbs0, a GPU's) may block or do something.
  struct stat status {};
  if (stat(path.c_str(), &status) != 0 || !Mappable(status)) {
    std::lock_guard lock(state_->mutex);
    ++state_->declined;
    return nullptr;
  }
  const FileKey key = KeyOf(status);
  const ElfImage* image = nullptr;
  {
    std::lock_guard lock(state_->mutex);
    if (const auto it = state_->entries.find(key); it != state_->entries.end()) {
      ++state_->hits;
      image = state_->Acquire(it->second);
    }
  }
  if (image != nullptr) return lease(key, image);

  // Mapping and checking a file takes a while: not under the lock. Two threads may map the
  // same file at once; the second to finish uses the first's entry.
  std::optional<Loaded> loaded = Load(path);
  std::unique_ptr<ElfImage> duplicate;
  {
    std::lock_guard lock(state_->mutex);
    if (!loaded) {
      ++state_->declined;
      return nullptr;
    }
    ++state_->misses;
    auto [it, inserted] = state_->entries.try_emplace(loaded->key);
    if (inserted) {
      it->second.image = std::move(loaded->image);
      it->second.unused = state_->unused.end();
      state_->bytes += it->second.image->bytes().size();
    } else {
      duplicate = std::move(loaded->image);  // unmapped outside the lock
    }
    image = state_->Acquire(it->second);
  }
  // The file's key as opened (it may have been replaced since the stat()).
  return lease(loaded->key, image);
}

ElfCacheStats ElfCache::stats() const {
  std::lock_guard lock(state_->mutex);
  return {.entries = state_->entries.size(),
          .unused = state_->unused.size(),
          .bytes = state_->bytes,
          .hits = state_->hits,
          .misses = state_->misses,
          .declined = state_->declined};
}

}  // namespace rdmascope::sys
