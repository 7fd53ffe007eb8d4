// sys::ElfCache on small ELF files written by the test (a header, and section headers when a
// case needs them) and on this test binary: one entry per file as identified by device, inode,
// size and modification time, the LRU of unused files, what is declined, and concurrent use.
#include "sys/elf_cache.h"

#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "unit/fixture_tree.h"

namespace rdmascope::sys {
namespace {

// An x86-64 ELF file of `type`, ending with `payload` (so that two versions differ). With
// `section`, section headers too: a null one, .shstrtab, and `section` with `flags`.
std::string TinyElf(uint16_t type, const std::string& payload, const std::string& section = "",
                    uint64_t flags = 0, const std::string& content = "") {
  Elf64_Ehdr header{};
  std::memcpy(header.e_ident, ELFMAG, SELFMAG);
  header.e_ident[EI_CLASS] = ELFCLASS64;
  header.e_ident[EI_DATA] = ELFDATA2LSB;
  header.e_ident[EI_VERSION] = EV_CURRENT;
  header.e_type = type;
  header.e_machine = EM_X86_64;
  header.e_version = EV_CURRENT;
  header.e_ehsize = sizeof header;
  std::string names;
  std::vector<Elf64_Shdr> sections;
  if (!section.empty()) {
    names = std::string("\0.shstrtab\0", 11) + section + '\0';
    sections.resize(3);
    sections[1] = {.sh_name = 1,
                   .sh_type = SHT_STRTAB,
                   .sh_flags = 0,
                   .sh_addr = 0,
                   .sh_offset = sizeof header,
                   .sh_size = names.size(),
                   .sh_link = 0,
                   .sh_info = 0,
                   .sh_addralign = 1,
                   .sh_entsize = 0};
    sections[2] = sections[1];
    sections[2].sh_name = 11;
    sections[2].sh_type = SHT_PROGBITS;
    sections[2].sh_flags = flags;
    sections[2].sh_size = content.size();
    names.resize((names.size() + 7) / 8 * 8, '\0');
    sections[2].sh_offset = sizeof header + names.size();
    names += content;
    names.resize((names.size() + 7) / 8 * 8, '\0');  // section headers 8-aligned
    header.e_shoff = sizeof header + names.size();
    header.e_shentsize = sizeof(Elf64_Shdr);
    header.e_shnum = static_cast<uint16_t>(sections.size());
    header.e_shstrndx = 1;
  }
  std::string out(reinterpret_cast<const char*>(&header), sizeof header);
  out += names;
  out.append(reinterpret_cast<const char*>(sections.data()), sections.size() * sizeof(Elf64_Shdr));
  return out + payload;
}

void Write(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A compression header (Elf64_Chdr, zlib) claiming `size` bytes once inflated, and no data.
std::string Chdr(uint64_t size) {
  Elf64_Chdr chdr{
      .ch_type = ELFCOMPRESS_ZLIB, .ch_reserved = 0, .ch_size = size, .ch_addralign = 1};
  return {reinterpret_cast<const char*>(&chdr), sizeof chdr};
}

// The file as the unwinder opens one (sys/untrusted_files.h), here below "/" of this process.
OpenedFile OpenChecked(const std::filesystem::path& path) {
  const UniqueFd root(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  auto file = OpenInRoot(root.get(), path.string());
  if (!file) ADD_FAILURE() << path << ": " << file.error();
  return file ? std::move(*file) : OpenedFile{};
}

std::shared_ptr<const ElfImage> Open(ElfCache& cache, const std::filesystem::path& path) {
  return cache.Open(OpenChecked(path)).image;
}

// Files only root can write are mapped from the file; others are copied (elf_cache.cc).
bool MappedFromTheFile(const std::filesystem::path& path) {
  struct stat status {};
  return stat(path.c_str(), &status) == 0 && OnlyRootCanWrite(status);
}

std::string Text(const ElfImage& image) {
  return {reinterpret_cast<const char*>(image.bytes().data()), image.bytes().size()};
}

// Whether this process maps `path` (/proc/self/maps).
bool Mapped(const std::filesystem::path& path) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find(std::filesystem::canonical(path).string() + "\n") != std::string::npos;
}

class ElfCacheTest : public ::testing::Test {
 protected:
  std::filesystem::path File(const std::string& name, const std::string& payload) {
    const std::filesystem::path path = dir_.path() / name;
    Write(path, TinyElf(ET_DYN, payload));
    return path;
  }

  testing::TempDir dir_;
};

TEST_F(ElfCacheTest, TheSameFileTwiceIsOneEntryAndAHit) {
  ElfCache cache;
  const std::filesystem::path path = File("libone.so", "one");
  std::shared_ptr<const ElfImage> first = Open(cache, path);
  std::shared_ptr<const ElfImage> second = Open(cache, path);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first.get(), second.get());
  ElfCacheStats stats = cache.stats();
  EXPECT_EQ(stats.entries, 1U);
  EXPECT_EQ(stats.misses, 1U);
  EXPECT_EQ(stats.hits, 1U);
  EXPECT_EQ(stats.bytes, std::filesystem::file_size(path));
  EXPECT_EQ(stats.unused, 0U);
  // Each descriptor is the caller's own, over the same bytes.
  Elf* one = first->NewElf();
  Elf* two = second->NewElf();
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  EXPECT_NE(one, two);
  GElf_Ehdr header{};
  ASSERT_NE(gelf_getehdr(two, &header), nullptr);
  EXPECT_EQ(header.e_type, ET_DYN);
  EXPECT_EQ(elf_end(one), 0);
  EXPECT_EQ(elf_end(two), 0);
  EXPECT_TRUE(Text(*first).ends_with("one"));  // elf_end left the bytes mapped

  first.reset();
  EXPECT_EQ(cache.stats().unused, 0U);  // still held
  second.reset();
  stats = cache.stats();
  EXPECT_EQ(stats.entries, 1U);  // kept for the next process of the program
  EXPECT_EQ(stats.unused, 1U);
  EXPECT_EQ(Mapped(path), MappedFromTheFile(path));
}

// This very program, opened inside a root as the unwinder opens a process's files.
TEST_F(ElfCacheTest, ARealProgramIsShared) {
  ElfCache cache;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::shared_ptr<const ElfImage> image = Open(cache, self);
  ASSERT_NE(image, nullptr) << "declined: " << cache.stats().declined;
  EXPECT_EQ(image->bytes().size(), std::filesystem::file_size(self));
  Elf* elf = image->NewElf();
  GElf_Ehdr header{};
  ASSERT_NE(gelf_getehdr(elf, &header), nullptr);
  EXPECT_TRUE(header.e_type == ET_DYN || header.e_type == ET_EXEC);
  elf_end(elf);
  EXPECT_NE(Open(cache, self), nullptr);  // again: the same entry

  EXPECT_EQ(cache.stats().entries, 1U);
  EXPECT_EQ(cache.stats().hits, 1U);
}

TEST_F(ElfCacheTest, AReplacedFileIsANewEntry) {
  ElfCache cache;
  const std::filesystem::path path = File("libtwo.so", "version one");
  const std::shared_ptr<const ElfImage> old_file = Open(cache, path);
  ASSERT_NE(old_file, nullptr);
  // Replaced by rename (a package upgrade): a new inode.
  Write(dir_.path() / "libtwo.so.new", TinyElf(ET_DYN, "version two"));
  std::filesystem::rename(dir_.path() / "libtwo.so.new", path);
  const std::shared_ptr<const ElfImage> new_file = Open(cache, path);
  ASSERT_NE(new_file, nullptr);
  EXPECT_NE(new_file.get(), old_file.get());
  EXPECT_TRUE(Text(*new_file).ends_with("version two"));
  EXPECT_TRUE(Text(*old_file).ends_with("version one"));  // its holders keep what they had
  EXPECT_EQ(cache.stats().entries, 2U);
  EXPECT_EQ(cache.stats().misses, 2U);
  // Written in place, the same size: only the modification time tells.
  const auto written = std::filesystem::last_write_time(path);
  Write(path, TinyElf(ET_DYN, "version 2!!"));
  std::filesystem::last_write_time(path, written + std::chrono::seconds(5));
  const std::shared_ptr<const ElfImage> rewritten = Open(cache, path);
  ASSERT_NE(rewritten, nullptr);
  EXPECT_NE(rewritten.get(), new_file.get());
  EXPECT_TRUE(Text(*rewritten).ends_with("version 2!!"));
  EXPECT_EQ(cache.stats().entries, 3U);
  EXPECT_EQ(cache.stats().hits, 0U);
}

TEST_F(ElfCacheTest, TheLruUnmapsTheOldestUnusedFiles) {
  ElfCache cache(2);
  std::vector<std::filesystem::path> paths;
  for (int i = 0; i < 4; ++i) {
    paths.push_back(File("lib" + std::to_string(i) + ".so", std::to_string(i)));
    ASSERT_NE(Open(cache, paths.back()), nullptr);  // released at once
  }
  ElfCacheStats stats = cache.stats();
  EXPECT_EQ(stats.entries, 2U);
  EXPECT_EQ(stats.unused, 2U);
  EXPECT_EQ(stats.bytes, 2 * std::filesystem::file_size(paths[0]));
  EXPECT_FALSE(Mapped(paths[0]));
  EXPECT_FALSE(Mapped(paths[1]));
  EXPECT_EQ(Mapped(paths[3]), MappedFromTheFile(paths[3]));
  EXPECT_NE(Open(cache, paths[3]), nullptr);
  EXPECT_EQ(cache.stats().hits, 1U);
  EXPECT_NE(Open(cache, paths[0]), nullptr);  // unmapped: read again
  EXPECT_EQ(cache.stats().misses, 5U);

  // Files in use are never unmapped, whatever the bound.
  ElfCache small(1);
  std::vector<std::shared_ptr<const ElfImage>> held;
  for (const auto& path : paths) held.push_back(Open(small, path));
  EXPECT_EQ(small.stats().entries, 4U);
  EXPECT_EQ(small.stats().unused, 0U);
  held.clear();
  EXPECT_EQ(small.stats().entries, 1U);
  EXPECT_EQ(small.stats().unused, 1U);
}

// Refused before the cache (sys/untrusted_files.h): what is not a regular file with bytes.
TEST_F(ElfCacheTest, OnlyRegularFilesAreOpened) {
  const std::filesystem::path fifo = dir_.path() / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::filesystem::path empty = dir_.path() / "empty";
  Write(empty, "");
  const UniqueFd root(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  for (const auto& path :
       {dir_.path(), fifo, std::filesystem::path("/dev/null"), dir_.path() / "missing", empty}) {
    EXPECT_FALSE(OpenInRoot(root.get(), path.string())) << path;
  }
}

// Refused: what is not ELF, and compressed sections inflating beyond the bounds. Declined
// (a private mapping for one session, not shared): anything but an executable or shared
// object, and files libdw would decompress in place.
TEST_F(ElfCacheTest, RefusesOrDeclinesWhatItMustNotShare) {
  ElfCache cache;
  const std::filesystem::path text = dir_.path() / "text";
  Write(text, "#!/bin/sh\necho not an ELF file\n");
  const std::filesystem::path unreadable = dir_.path() / "unreadable_chdr";
  Write(unreadable, TinyElf(ET_DYN, "", ".debug_info", SHF_COMPRESSED));
  const std::filesystem::path huge = dir_.path() / "huge";
  Write(huge, TinyElf(ET_DYN, "", ".debug_info", SHF_COMPRESSED, Chdr(1ULL << 40)));
  const std::filesystem::path gnu_huge = dir_.path() / "gnu_huge";
  Write(gnu_huge, TinyElf(ET_DYN, "", ".zdebug_info", 0,
                          std::string("ZLIB\x00\x00\x01\x00\x00\x00\x00\x00", 12)));
  for (const auto& path : {text, unreadable, huge, gnu_huge}) {
    const ElfOpened opened = cache.Open(OpenChecked(path));
    EXPECT_EQ(opened.image, nullptr) << path;
    EXPECT_FALSE(opened.refused.empty()) << path;
  }
  EXPECT_NE(cache.Open(OpenChecked(huge)).refused.find("inflates to more than"), std::string::npos);
  EXPECT_EQ(cache.stats().refused, 5U);

  const std::filesystem::path object = dir_.path() / "object.o";
  Write(object, TinyElf(ET_REL, "relocatable"));
  const std::filesystem::path compressed = dir_.path() / "compressed";
  Write(compressed, TinyElf(ET_DYN, "", ".debug_info", SHF_COMPRESSED, Chdr(4096)));
  for (const auto& path : {object, compressed}) {
    const std::shared_ptr<const ElfImage> image = Open(cache, path);
    ASSERT_NE(image, nullptr) << path;
    EXPECT_TRUE(image->writable()) << path;
  }
  ElfCacheStats stats = cache.stats();
  EXPECT_EQ(stats.declined, 2U);
  EXPECT_EQ(stats.entries, 0U);
  EXPECT_EQ(stats.misses, 0U);
  // The same builder's file with an uncompressed section is shared: the flag and the name
  // were the reasons.
  const std::filesystem::path plain = dir_.path() / "plain";
  Write(plain, TinyElf(ET_DYN, "", ".debug_info"));
  EXPECT_NE(Open(cache, plain), nullptr);
  EXPECT_EQ(cache.stats().entries, 1U);
}

// A write through a descriptor over the shared bytes faults rather than changing what
// another session reads (elf_cache.cc: none of libelf's writes is expected).
TEST_F(ElfCacheTest, TheBytesAreReadOnly) {
  ElfCache cache;
  const std::shared_ptr<const ElfImage> image = Open(cache, File("libro.so", "ro"));
  ASSERT_NE(image, nullptr);
  auto* bytes = const_cast<std::byte*>(image->bytes().data());
  EXPECT_DEATH(*static_cast<volatile std::byte*>(bytes) = std::byte{0}, "");
}

TEST_F(ElfCacheTest, AHeldFileOutlivesTheCache) {
  std::shared_ptr<const ElfImage> image;
  {
    ElfCache cache;
    image = Open(cache, File("libheld.so", "held"));
  }
  ASSERT_NE(image, nullptr);
  EXPECT_TRUE(Text(*image).ends_with("held"));
  image.reset();  // released into the gone cache's state, which goes with it
}

// Threads open, read and release the same files at once, with a bound that makes them unmap
// files too: every descriptor sees its own file's bytes, and the figures add up.
TEST_F(ElfCacheTest, ConcurrentOpens) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 200;
  std::vector<std::filesystem::path> paths;
  for (int i = 0; i < 4; ++i) {
    paths.push_back(File("lib" + std::to_string(i) + ".so", "#" + std::to_string(i)));
  }
  ElfCache cache(2);
  std::atomic<int> wrong = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        const size_t which = static_cast<size_t>(t + round) % paths.size();
        const std::shared_ptr<const ElfImage> image = Open(cache, paths[which]);
        Elf* elf = image ? image->NewElf() : nullptr;
        GElf_Ehdr header{};
        if (elf == nullptr || gelf_getehdr(elf, &header) == nullptr || header.e_type != ET_DYN ||
            !Text(*image).ends_with("#" + std::to_string(which))) {
          ++wrong;
        }
        if (elf != nullptr) elf_end(elf);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  const ElfCacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits + stats.misses, static_cast<uint64_t>(kThreads * kRounds));
  EXPECT_EQ(stats.declined, 0U);
  EXPECT_EQ(stats.entries, stats.unused);  // all released
  EXPECT_LE(stats.entries, 2U);
  EXPECT_EQ(stats.bytes, stats.entries * std::filesystem::file_size(paths[0]));
}

}  // namespace
}  // namespace rdmascope::sys
