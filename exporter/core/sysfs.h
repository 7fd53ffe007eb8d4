// Defensive reads of sysfs/procfs attributes. Every read is one bounded read(2) of a small
// file; any failure (ENOENT when a device vanished, EACCES, EINVAL or EOPNOTSUPP from a driver
// that does not implement the attribute, EISDIR on a malformed tree) or a "N/A" placeholder
// yields nullopt: the caller then omits the series rather than inventing a 0.
#pragma once

#include <dirent.h>

#include <cstdint>
#include <expected>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rdmascope::sysfs {

// Contents without the trailing newline; nullopt on error or "N/A ..." placeholders
// (mlx5 counters read "N/A (no PMA)" on ports without a performance management agent).
std::optional<std::string> ReadAttribute(const std::filesystem::path& path);

// A whole (proc) file up to max_bytes, read until EOF; nullopt on error or if larger.
std::optional<std::string> ReadFile(const std::filesystem::path& path, size_t max_bytes);
// The same, with the reason: the errno of open(2) or read(2) (ENOENT or ESRCH when a process
// or device went away), EFBIG when the file is larger than max_bytes.
std::expected<std::string, int> ReadFileChecked(const std::filesystem::path& path,
                                                size_t max_bytes);
// A file of the exporter's own process (its /proc/self, the boot time of process_* metrics):
// always read from the live host, never recorded into or replayed from a capture
// (core/capture.h), since it describes this process rather than the host being read.
std::expected<std::string, int> ReadOwnFile(const std::filesystem::path& path, size_t max_bytes);
// The same for a descriptor open for reading, from where it stands to its end.
std::expected<std::string, int> ReadFdChecked(int fd, size_t max_bytes);

// A decimal or 0x-prefixed unsigned integer, whole file, surrounding blanks allowed.
std::optional<uint64_t> ReadUnsigned(const std::filesystem::path& path);
std::optional<int64_t> ReadSigned(const std::filesystem::path& path);

std::optional<uint64_t> ParseUnsigned(std::string_view text);
std::optional<int64_t> ParseSigned(std::string_view text);
// A finite decimal number, the whole text ("25.78125", "8.0", "6.103515625e-5"); nullopt for
// anything else, "nan" and "inf" included (no kernel file means them as a figure).
std::optional<double> ParseDouble(std::string_view text);

// Names of the entries of a directory, sorted; empty when it cannot be read.
std::vector<std::string> ListDirectory(const std::filesystem::path& path);
// The same, telling "nothing there" from "cannot see": a directory that is absent (ENOENT,
// ENOTDIR) is empty, one that exists but cannot be listed (EACCES, EMFILE, ENOMEM, EIO, a
// readdir error part-way) is its errno. For the directories whose emptiness means "no such
// device on this host" (a claim a collector must not make when it simply could not look).
std::expected<std::vector<std::string>, int> ListDirectoryChecked(
    const std::filesystem::path& path);

// The entry names of an open directory but "." and "..", sorted; closes `dir` in every case.
// The errno of a readdir that failed part-way (a partial list would look like vanished files).
std::expected<std::vector<std::string>, int> TakeSortedNames(DIR* dir);

// Target name of a symlink's last component (e.g. the driver of a device), if any.
std::optional<std::string> ReadLinkBasename(const std::filesystem::path& path);

// What a collector asks of a path without reading it, through the host boundary like every
// read here (core/capture.h records and replays them):
// - PathExists: stat(2) succeeds (links followed);
// - EntryExists: lstat(2) succeeds (the name is there, whatever it is or points to);
// - IsSymlink: lstat(2) says a symbolic link (a class device's `device`, a VF's `physfn`);
// - Canonical: realpath(3) (the PCI device behind a class device).
bool PathExists(const std::filesystem::path& path);
bool EntryExists(const std::filesystem::path& path);
bool IsSymlink(const std::filesystem::path& path);
std::optional<std::filesystem::path> Canonical(const std::filesystem::path& path);

std::string_view Trim(std::string_view text);

// A NUL-padded fixed-size field (a comm or device name from a BPF map or a shared file) as a
// string, never reading past `size` when the field is full.
std::string FixedString(const char* chars, size_t size);

// Test seam (tests/unit/fault_seams_test.cc, docs/testing.md "Faults"): a fault for the reads
// of this file (ReadFile*, ReadAttribute, ReadUnsigned/Signed, ListDirectory*,
// ReadLinkBasename) of a path. `error` non-zero: the open fails with that errno (ENOENT: the
// file vanished); else `short_read`: the file ends after that many bytes, as a read cut short.
struct InjectedFault {
  int error = 0;
  std::optional<size_t> short_read;
};
using FaultHook = std::function<std::optional<InjectedFault>(const std::filesystem::path&)>;
// Installs the hook (an empty function removes it). Tests only: call it while no other thread
// reads through this file.
void SetFaultHookForTesting(FaultHook hook);

}  // namespace rdmascope::sysfs
