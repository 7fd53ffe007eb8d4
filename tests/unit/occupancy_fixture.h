// Stats files as the preload library leaves them, and a /proc of fixture processes that the
// occupancy collector's anchor reads (uids, start time, the files each maps): shared by the
// collector's tests against hostile files and under capture and replay.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "stats_file.h"
#include "unit/fixture_tree.h"

namespace rdmascope::testing {

inline constexpr uint64_t kOwnNs = 4026531836;

inline std::unique_ptr<occ_file> StatsFile(uint32_t pid) {
  auto file = std::make_unique<occ_file>();
  std::memset(file.get(), 0, sizeof(occ_file));
  file->header.magic = OCC_MAGIC;
  file->header.version = OCC_VERSION;
  file->header.pid = pid;
  file->header.pid_ns = kOwnNs;
  std::strcpy(file->header.comm, "trainer");
  file->cqs[0].in_use = 1;
  file->cqs[0].handle = 1;
  file->cqs[0].entries = 63;
  std::strcpy(file->cqs[0].device, "mlx5_0");
  return file;
}

inline std::filesystem::path WriteStats(const std::filesystem::path& dir, const std::string& name,
                                        const occ_file& file, size_t size = sizeof(occ_file)) {
  const auto path = dir / name;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&file), static_cast<std::streamsize>(size));
  return path;
}

// The application's liveness lock (preload/tables.c): an OFD write lock on the whole file.
inline int LockStats(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  ::fcntl(fd, F_OFD_SETLK, &lock);
  return fd;
}

// A /proc of fixture processes: each with its uids, start time and the files it maps.
class FakeProc {
 public:
  explicit FakeProc(const std::filesystem::path& root) : root_(root) {
    std::filesystem::create_directories(root_ / "self/ns");
    std::filesystem::create_symlink("pid:[" + std::to_string(kOwnNs) + "]", root_ / "self/ns/pid");
  }
  void AddProcess(uint32_t pid, uid_t uid, const std::vector<std::filesystem::path>& mapped) {
    const auto dir = root_ / std::to_string(pid);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "status") << "Name:\ttrainer\nUid:\t" << uid << "\t" << uid << "\t" << uid
                                  << "\t" << uid << "\nNSpid:\t" << pid << "\n";
    std::string stat = std::to_string(pid) + " (trainer) S";
    for (int field = 4; field <= 21; ++field) stat += " 0";
    stat += " 5555 0 0\n";  // field 22: start time
    std::ofstream(dir / "stat") << stat;
    std::ofstream maps(dir / "maps");
    maps << "55d0c0a00000-55d0c0a21000 r--p 00000000 fd:01 1234 /usr/bin/trainer\n";
    for (const std::filesystem::path& path : mapped) {
      struct stat st {};
      ::stat(path.c_str(), &st);
      char line[512];
      std::snprintf(line, sizeof line, "7f0000000000-7f000006c000 rw-s 00000000 %02x:%02x %lu %s\n",
                    major(st.st_dev), minor(st.st_dev), static_cast<unsigned long>(st.st_ino),
                    path.c_str());
      maps << line;
    }
  }

 private:
  std::filesystem::path root_;
};

// The directory as /run/rdmascope is: every user may create files there.
struct SharedDir {
  TempDir tmp;
  std::filesystem::path dir = tmp.path() / "stats";
  std::filesystem::path proc = tmp.path() / "proc";
  SharedDir() {
    std::filesystem::create_directories(dir);
    ::chmod(dir.c_str(), 01777);
  }
};

// rdmascope_occupancy_files_skipped_total{reason} in an exposition; -1 when absent.
inline double Skipped(const std::string& text, const std::string& reason) {
  const std::string key = "rdmascope_occupancy_files_skipped_total{reason=\"" + reason + "\"} ";
  const size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size()));
}

}  // namespace rdmascope::testing
