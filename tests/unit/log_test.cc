// core/log: logfmt lines, and journald's priority prefix when stderr is the journal stream.
#include "core/log.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace rdmascope::log {
namespace {

// A temporary file, unlinked when done.
class TempFile {
 public:
  TempFile() {
    char name[] = "/tmp/rdmascope-log-test-XXXXXX";
    fd_ = mkstemp(name);
    path_ = name;
  }
  ~TempFile() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // "<device>:<inode>", as systemd sets $JOURNAL_STREAM.
  std::string DeviceInode() const {
    struct stat st {};
    EXPECT_EQ(fstat(fd_, &st), 0);
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  }
  std::vector<std::string> Lines() const {
    std::ifstream in(path_);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

 private:
  int fd_ = -1;
  std::string path_;
};

// Writes one line per level with stderr redirected to `to` and $JOURNAL_STREAM set to
// `journal_stream` (unset if nullptr), then restores both.
void WriteEachLevel(const TempFile& to, const char* journal_stream) {
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  ASSERT_GE(saved, 0);
  ASSERT_EQ(dup2(to.fd(), STDERR_FILENO), STDERR_FILENO);
  if (journal_stream) {
    setenv("JOURNAL_STREAM", journal_stream, 1);
  } else {
    unsetenv("JOURNAL_STREAM");
  }
  DetectJournalStream();
  SetLevel(Level::kDebug);
  Error("an error", {{"code", "1"}});
  Warn("a warning");
  Info("some news");
  Debug("a detail");
  SetLevel(Level::kInfo);
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  unsetenv("JOURNAL_STREAM");
  DetectJournalStream();
}

TEST(LogJournal, IsJournalStreamMatchesDeviceAndInode) {
  TempFile file;
  TempFile other;
  ASSERT_GE(file.fd(), 0);
  ASSERT_GE(other.fd(), 0);
  EXPECT_TRUE(IsJournalStream(file.DeviceInode().c_str(), file.fd()));
  EXPECT_FALSE(IsJournalStream(other.DeviceInode().c_str(), file.fd()));
}

TEST(LogJournal, MalformedJournalStreamIsNotTheJournal) {
  TempFile file;
  ASSERT_GE(file.fd(), 0);
  const std::string good = file.DeviceInode();
  const std::string device = good.substr(0, good.find(':'));
  const std::string inode = good.substr(good.find(':') + 1);
  for (const std::string& bad : {std::string(), std::string(":"), device + ":", ":" + inode, device,
                                 good + ":1", " " + good, good + " ", device + ":-" + inode,
                                 device + ":" + inode + "x", device + ":99999999999999999999999"}) {
    EXPECT_FALSE(IsJournalStream(bad.c_str(), file.fd())) << "'" << bad << "'";
  }
  EXPECT_FALSE(IsJournalStream(nullptr, file.fd()));
  EXPECT_FALSE(IsJournalStream(good.c_str(), -1));
}

TEST(LogJournal, PriorityPrefixWhenStderrIsTheJournalStream) {
  TempFile file;
  ASSERT_GE(file.fd(), 0);
  WriteEachLevel(file, file.DeviceInode().c_str());
  const std::vector<std::string> lines = file.Lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(lines[0].starts_with("<3>ts=")) << lines[0];
  EXPECT_NE(lines[0].find(" level=error msg=\"an error\" code=1"), std::string::npos) << lines[0];
  EXPECT_TRUE(lines[1].starts_with("<4>ts=")) << lines[1];
  EXPECT_NE(lines[1].find(" level=warn "), std::string::npos) << lines[1];
  EXPECT_TRUE(lines[2].starts_with("<6>ts=")) << lines[2];
  EXPECT_NE(lines[2].find(" level=info "), std::string::npos) << lines[2];
  EXPECT_TRUE(lines[3].starts_with("<7>ts=")) << lines[3];
  EXPECT_NE(lines[3].find(" level=debug "), std::string::npos) << lines[3];
}

TEST(LogJournal, PlainLinesOtherwise) {
  TempFile file;
  TempFile elsewhere;
  ASSERT_GE(file.fd(), 0);
  ASSERT_GE(elsewhere.fd(), 0);
  // Not under systemd, and a $JOURNAL_STREAM inherited from a parent whose stderr was the
  // journal while ours is a file (systemd.exec(5): compare before using it).
  for (const std::string& journal_stream : {std::string("unset"), elsewhere.DeviceInode()}) {
    ASSERT_EQ(ftruncate(file.fd(), 0), 0);
    ASSERT_EQ(lseek(file.fd(), 0, SEEK_SET), 0);
    WriteEachLevel(file, journal_stream == "unset" ? nullptr : journal_stream.c_str());
    const std::vector<std::string> lines = file.Lines();
    ASSERT_EQ(lines.size(), 4u) << journal_stream;
    for (const std::string& line : lines) {
      EXPECT_TRUE(line.starts_with("ts=")) << journal_stream << ": " << line;
    }
  }
}

}  // namespace
}  // namespace rdmascope::log
