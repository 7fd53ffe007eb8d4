// The sandboxed unwinder: sys::UnwindClient with the real worker (`rdmascope __unwind-worker`)
// unwinding the fake process of unit/unwind_fixture.h (the same frames as the in-process
// DwarfUnwinder), the worker's sandbox as the kernel shows it (/proc/PID/status), fake workers
// that hang, die or break the protocol (killed, counted, backed off), and the broker's checks of
// what a subverted worker may ask.
#include "sys/unwind_client.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "sys/spawn_helper.h"
#include "sys/untrusted_files.h"
#include "sys/unwind_broker.h"
#include "unit/process_status.h"
#include "unit/unwind_fixture.h"

namespace rdmascope::sys {
namespace {

namespace wire = unwind_protocol;

UnwindClientOptions RealWorker() {
  UnwindClientOptions options;
  options.program = RDMASCOPE_BINARY;
  return options;
}

class UnwindClientTest : public DwarfUnwinderTest {
 protected:
  std::shared_ptr<LocalProcessAccess> access_ =
      std::make_shared<LocalProcessAccess>(procfs_.path());
};

TEST_F(UnwindClientTest, TheWorkerUnwindsAndNamesAsTheProcessWould) {
  UnwindClient client(access_, RealWorker());
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const uint64_t beta = At(rdmascope_unwind_beta);
  const uint64_t gamma = At(rdmascope_unwind_gamma);
  const CapturedStack captured = Capture(alpha, 0, {beta + 1, gamma + 1, 0});
  const UnwoundStack remote = client.Unwind(captured, kPatient);
  const UnwoundStack local = unwinder_.Unwind(captured, kPatient);
  EXPECT_EQ(remote.pcs, local.pcs);
  EXPECT_EQ(remote.pcs, (std::vector<uint64_t>{alpha, beta + 1, gamma + 1}));
  EXPECT_EQ(remote.method, UnwindMethod::kDwarf);
  EXPECT_EQ(remote.stop_reason, local.stop_reason);
  std::string missing = "unset";
  const std::vector<Frame> frames =
      client.Symbolize(Image(), remote.pcs, {.first = FirstAddress::kInstructionPointer}, &missing);
  ASSERT_EQ(frames.size(), 3U);
  EXPECT_EQ(frames[0].Describe(), "rdmascope_unwind_alpha+0x0");
  EXPECT_EQ(frames[1].Describe(), "rdmascope_unwind_beta+0x1");
  EXPECT_EQ(frames[2].Describe(), "rdmascope_unwind_gamma+0x1");
  EXPECT_EQ(missing, "");
  // A process that is gone: said by the worker, from the parent's answer.
  const UnwoundStack gone = client.Unwind(CaptureOf(999999, alpha, 0, {}), kPatient);
  EXPECT_EQ(gone.pcs, (std::vector<uint64_t>{alpha}));
  EXPECT_EQ(gone.stop_reason, "process gone");
  // Sessions dropped (sent with the next request): the next stack makes a new one.
  client.Retain({});
  EXPECT_EQ(client.Unwind(captured, kPatient).pcs, remote.pcs);
  EXPECT_EQ(client.stats().starts, 1U);
  EXPECT_TRUE(client.stats().restarts.empty());
}

// The parent says which files only root can write (the worker's user namespace shows their
// owner as the overflow uid): the worker maps those from the page cache, as the exporter does,
// rather than copy them (a copy of every library would be its memory; a debug file would be
// refused). The test binary, built by root, is one: its inode is in the worker's maps.
TEST_F(UnwindClientTest, TheWorkerMapsTheFilesOnlyRootCanWrite) {
  struct stat self {};
  ASSERT_EQ(stat("/proc/self/exe", &self), 0);
  if (!OnlyRootCanWrite(self)) GTEST_SKIP() << "the test binary is not root's: it is copied";
  UnwindClient client(access_, RealWorker());
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const uint64_t beta = At(rdmascope_unwind_beta);
  const CapturedStack captured = Capture(alpha, 0, {beta + 1, 0});
  ASSERT_EQ(client.Unwind(captured, kPatient).method, UnwindMethod::kDwarf);
  std::ifstream maps("/proc/" + std::to_string(client.worker_pid()) + "/maps");
  ASSERT_TRUE(maps.is_open());
  bool mapped = false;
  for (std::string line; std::getline(maps, line);) {
    // start-end perms offset dev inode path
    std::istringstream fields(line);
    std::string range, perms, offset, device;
    uint64_t inode = 0;
    if (fields >> range >> perms >> offset >> device >> inode && inode == self.st_ino) {
      mapped = true;
    }
  }
  EXPECT_TRUE(mapped) << "the worker copied a file only root can write";
}

// What the kernel says of the worker: no capability in any set, no_new_privs, a seccomp
// filter, not dumpable; and its sandbox's layers as the worker reported them.
TEST_F(UnwindClientTest, TheWorkerRunsInItsSandbox) {
  UnwindClient client(access_, RealWorker());
  ASSERT_TRUE(client.Start());
  const pid_t worker = client.worker_pid();
  ASSERT_GT(worker, 0);
  EXPECT_EQ(StatusField(worker, "Seccomp"), "2");
  EXPECT_EQ(StatusField(worker, "NoNewPrivs"), "1");
  EXPECT_EQ(StatusField(worker, "CapEff"), "0000000000000000");
  EXPECT_EQ(StatusField(worker, "CapPrm"), "0000000000000000");
  EXPECT_EQ(StatusField(worker, "CapAmb"), "0000000000000000");
  const auto layers = client.stats().sandbox;
  for (const char* layer : {"capabilities", "no_new_privs", "rlimits", "seccomp"}) {
    ASSERT_TRUE(layers.contains(layer)) << layer;
    EXPECT_TRUE(layers.at(layer)) << layer;
  }
  EXPECT_TRUE(layers.contains("uid"));
  EXPECT_TRUE(layers.contains("namespaces"));
  EXPECT_TRUE(layers.contains("empty_root"));
  if (getuid() == 0) {
    EXPECT_TRUE(layers.at("uid"));
    EXPECT_EQ(StatusField(worker, "Uid").substr(0, 5), "65534");
  }
  if (layers.at("namespaces")) {
    // Its own user namespace: not ours.
    std::error_code error;
    EXPECT_NE(std::filesystem::read_symlink("/proc/self/ns/user", error),
              std::filesystem::read_symlink("/proc/" + std::to_string(worker) + "/ns/user", error));
  }
}

// A worker that never answers is killed at the deadline; the next request waits out the back-off.
TEST_F(UnwindClientTest, AWorkerThatHangsIsKilledAtItsDeadline) {
  UnwindClientOptions options;
  options.program = "/bin/sleep";
  options.arguments = {"sleep", "1000"};  // the parent's pid appended: "sleep 1000 PID"
  options.slack = std::chrono::milliseconds(200);
  options.backoff = std::chrono::milliseconds(60000);
  UnwindClient client(access_, options);
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const UnwoundStack first =
      client.Unwind(Capture(alpha, 0, {}), {.budget = std::chrono::milliseconds(1)});
  EXPECT_EQ(first.pcs, (std::vector<uint64_t>{alpha}));
  EXPECT_NE(first.stop_reason.find("overran its deadline"), std::string::npos) << first.stop_reason;
  EXPECT_EQ(client.stats().restarts.at("deadline"), 1U);
  EXPECT_EQ(client.worker_pid(), -1);
  const UnwoundStack second = client.Unwind(Capture(alpha, 0, {}), kPatient);
  EXPECT_EQ(second.stop_reason, "unwinder worker restarting");
  EXPECT_EQ(client.stats().starts, 1U);
}

// A worker this process may not kill (another user's, and no CAP_KILL: a root exporter and its
// nobody worker) and that does not end by itself is left behind after a bounded wait, never
// waited for: the stack thread goes on.
TEST_F(UnwindClientTest, AWorkerThatCannotBeKilledIsNotWaitedFor) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a worker of another user)";
  UnwindClientOptions options;
  options.program = "/usr/bin/setpriv";
  options.arguments = {"setpriv",        "--reuid=65534", "--regid=65534",
                       "--clear-groups", "/bin/sleep",    "1000"};  // never ready, never ending
  options.slack = std::chrono::milliseconds(200);
  UnwindClient client(access_, options);
  pid_t worker = -1;
  const auto took = WithoutCapKill([&] {
    EXPECT_FALSE(client.Start());  // no kReady: stopped, the kill refused
    worker = client.worker_pid();
  });
  EXPECT_EQ(worker, -1);
  EXPECT_LT(took, std::chrono::seconds(20));  // the slack, then kReapWait: not the sleep's 1000 s
  KillByCommandLine(std::string("/bin/sleep\0001000", 15));  // from this thread, which may
}

// A worker whose request never completes (here: its parent never answers its question) ends
// itself shortly after the parent's deadline: under a root exporter the parent cannot kill it
// (the worker is nobody, the exporter has no CAP_KILL), so this bounds the parent's waitpid().
TEST(UnwindWorkerWatchdog, ARequestThatNeverCompletesEndsTheWorker) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd mine(pair[0]);
  UniqueFd theirs(pair[1]);
  auto pid = SpawnHelper(RDMASCOPE_BINARY,
                         {"rdmascope", "__unwind-worker", std::to_string(getpid())}, theirs.get());
  ASSERT_TRUE(pid.has_value()) << pid.error();
  theirs = UniqueFd();
  auto ready = wire::Receive(mine.get());
  ASSERT_TRUE(ready.has_value()) << ready.error();
  wire::Writer request(wire::Type::kUnwind);
  request.Image({.tgid = static_cast<uint32_t>(getpid())}).U64(1);
  for (int i = 0; i < 17; ++i) request.U64(0x1000);
  request.U32(16).U64(100'000'000).Bytes(std::vector<uint8_t>(64, 0));  // 100 ms budget
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_TRUE(wire::Send(mine.get(), request));
  auto question = wire::Receive(mine.get());  // what it asks its parent: never answered
  ASSERT_TRUE(question.has_value()) << question.error();
  EXPECT_EQ(question->type, wire::Type::kAccess);
  int status = 0;
  ASSERT_EQ(waitpid(*pid, &status, 0), *pid);
  const auto waited = std::chrono::steady_clock::now() - sent;
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGALRM);
  // The parent's deadline is 2.1 s here; the worker's 2.6 s; never RLIMIT_CPU's minutes.
  EXPECT_GE(waited, std::chrono::milliseconds(2500));
  EXPECT_LT(waited, std::chrono::seconds(30));
}

TEST_F(UnwindClientTest, AWorkerThatDiesIsCountedWithHowItDied) {
  UnwindClientOptions options;
  options.program = "/bin/sh";
  options.arguments = {"sh", "-c", "kill -SEGV $$"};
  options.backoff = std::chrono::milliseconds(0);
  UnwindClient client(access_, options);
  std::string missing;
  const uint64_t pcs[] = {At(rdmascope_unwind_alpha)};
  const std::vector<Frame> frames = client.Symbolize(Image(), pcs, {}, &missing);
  ASSERT_EQ(frames.size(), 1U);
  EXPECT_EQ(frames[0].Describe(), "??");
  EXPECT_NE(missing.find("killed by SIGSEGV"), std::string::npos) << missing;
  EXPECT_EQ(client.stats().restarts.at("died"), 1U);
  // Started again at the next request (no back-off here), and counted again.
  client.Symbolize(Image(), pcs, {}, &missing);
  EXPECT_EQ(client.stats().starts, 2U);
  EXPECT_EQ(client.stats().restarts.at("died"), 2U);
}

TEST_F(UnwindClientTest, AWorkerThatBreaksTheProtocolIsStopped) {
  UnwindClientOptions options;
  options.program = "/bin/sh";
  options.arguments = {"sh", "-c", "printf 'not the protocol' >&3; exec sleep 1000"};
  UnwindClient client(access_, options);
  const UnwoundStack unwound = client.Unwind(Capture(At(rdmascope_unwind_alpha), 0, {}), kPatient);
  EXPECT_NE(unwound.stop_reason.find("out of turn"), std::string::npos) << unwound.stop_reason;
  EXPECT_EQ(client.stats().restarts.at("protocol"), 1U);
}

class UnwindBrokerTest : public DwarfUnwinderTest {
 protected:
  void SetUp() override {
    DwarfUnwinderTest::SetUp();
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets_), 0);
  }
  void TearDown() override {
    close(sockets_[0]);
    close(sockets_[1]);
  }
  // The worker's question, answered by the broker; the reply as the worker receives it.
  std::optional<wire::Message> Ask(const wire::Writer& question) {
    EXPECT_TRUE(wire::Send(sockets_[1], question));
    auto received = wire::Receive(sockets_[0]);
    EXPECT_TRUE(received.has_value());
    if (!received || !broker_.Answer(sockets_[0], *received)) return std::nullopt;
    auto reply = wire::Receive(sockets_[1]);
    EXPECT_TRUE(reply.has_value());
    return reply ? std::optional<wire::Message>(std::move(*reply)) : std::nullopt;
  }
  static wire::Writer OpenDebugFile(uint32_t pid, const std::string& mapped,
                                    std::span<const uint8_t> build_id, const std::string& link,
                                    uint32_t first = 0) {
    return std::move(wire::Writer(wire::Type::kAccess)
                         .U32(static_cast<uint32_t>(wire::AccessOp::kOpenDebugFile))
                         .U32(pid)
                         .String(mapped)
                         .Bytes(build_id)
                         .String(link)
                         .U32(first));
  }
  // The error and index of a kOpenDebugFile reply; with a file, whether only root can write it
  // as the parent saw it (the worker's own fstat cannot tell), which must be the file's truth.
  static std::pair<std::string, uint32_t> Found(const std::optional<wire::Message>& reply) {
    wire::Reader reader(reply->body);
    std::string error = reader.String();
    const uint32_t index = reader.U32();
    if (error.empty()) {
      const uint8_t only_root = reader.U8();
      struct stat status {};
      EXPECT_EQ(fstat(reply->fd.get(), &status), 0);
      EXPECT_EQ(only_root, OnlyRootCanWrite(status) ? 1 : 0);
    }
    EXPECT_TRUE(reader.done());
    return {error, index};
  }
  UnwindBroker broker_{std::make_shared<LocalProcessAccess>(procfs_.path())};
  int sockets_[2] = {-1, -1};
};

TEST_F(UnwindBrokerTest, AnswersOnlyAboutTheProcessInScope) {
  broker_.SetScope(Image());
  const auto ticks = Ask(wire::Writer(wire::Type::kAccess)
                             .U32(static_cast<uint32_t>(wire::AccessOp::kStartTicks))
                             .U32(kPid));
  ASSERT_TRUE(ticks);
  wire::Reader reader(ticks->body);
  EXPECT_EQ(reader.U64(), 12345U);
  EXPECT_TRUE(reader.done());
  // Another pid, no scope, a malformed question: refused (the worker is then stopped).
  EXPECT_FALSE(Ask(wire::Writer(wire::Type::kAccess)
                       .U32(static_cast<uint32_t>(wire::AccessOp::kStartTicks))
                       .U32(kPid + 1)));
  EXPECT_FALSE(Ask(wire::Writer(wire::Type::kAccess)
                       .U32(static_cast<uint32_t>(wire::AccessOp::kStartTicks))
                       .U32(kPid)
                       .U8(7)));
  broker_.SetScope({});
  EXPECT_FALSE(Ask(wire::Writer(wire::Type::kAccess)
                       .U32(static_cast<uint32_t>(wire::AccessOp::kStartTicks))
                       .U32(kPid)));
}

// The maps are the scope image's only: a question naming another image of the pid (another
// exec generation) is refused, and an image that ended (an exec since: the probes' answer)
// gets ESRCH, not the maps of what runs now.
TEST_F(UnwindBrokerTest, MapsOnlyOfTheImageInScopeWhileItRuns) {
  bool current = true;
  UnwindBroker broker(std::make_shared<LocalProcessAccess>(
      procfs_.path(), nullptr, [&](const ImageKey&) { return current; }));
  const auto ask = [&](const ImageKey& image) -> std::optional<wire::Message> {
    EXPECT_TRUE(wire::Send(sockets_[1], wire::Writer(wire::Type::kAccess)
                                            .U32(static_cast<uint32_t>(wire::AccessOp::kMaps))
                                            .Image(image)));
    auto received = wire::Receive(sockets_[0]);
    if (!received || !broker.Answer(sockets_[0], *received)) return std::nullopt;
    auto reply = wire::Receive(sockets_[1]);
    return reply ? std::optional<wire::Message>(std::move(*reply)) : std::nullopt;
  };
  const auto error_of = [](const wire::Message& reply) {
    wire::Reader reader(reply.body);
    return reader.U32();
  };
  const ImageKey scoped = Image(kPid, 3);
  broker.SetScope(scoped);
  const auto maps = ask(scoped);
  ASSERT_TRUE(maps);
  EXPECT_EQ(error_of(*maps), 0U);
  EXPECT_TRUE(maps->fd.valid());
  EXPECT_FALSE(ask(Image(kPid, 4)));  // another image of the pid: the worker is stopped
  current = false;
  const auto ended = ask(scoped);
  ASSERT_TRUE(ended);
  EXPECT_EQ(error_of(*ended), static_cast<uint32_t>(ESRCH));
  EXPECT_FALSE(ended->fd.valid());
  // Another process under the pid (a new start time): ESRCH too, whatever the probes say.
  current = true;
  MapAt(kPid, kBase, 54321);
  const auto reused = ask(scoped);
  ASSERT_TRUE(reused);
  EXPECT_EQ(error_of(*reused), static_cast<uint32_t>(ESRCH));
}

// A subverted worker asks for files the process never mapped: none is opened.
TEST_F(UnwindBrokerTest, OpensOnlyMappedFilesAndTheirDebugFiles) {
  broker_.SetScope(Image());
  const auto error_of = [](const std::optional<wire::Message>& reply) {
    wire::Reader reader(reply->body);
    return reader.String();
  };
  const std::vector<uint8_t> id = {0xab, 0xcd, 0xef, 0x01};
  // Debug files of a file the process does not map: none looked up.
  for (const std::string path : {"/etc/passwd", "/etc/shadow", "/proc/1/environ", "",
                                 "/usr/lib/debug/.build-id/../../../etc/passwd"}) {
    const auto reply = Ask(OpenDebugFile(kPid, path, id, "passwd"));
    ASSERT_TRUE(reply) << path;
    EXPECT_FALSE(reply->fd.valid()) << path;
    EXPECT_EQ(Found(reply).first, "not a mapped file of the process") << path;
  }
  // Beside the mapped binary: a debuglink that climbs out is not looked up (only the build id,
  // which names no file here).
  const std::string directory = self_.substr(0, self_.rfind('/') + 1);
  const std::string name = self_.substr(self_.rfind('/') + 1);
  for (const std::string link : {"../../../../../../etc/passwd", "/etc/passwd", "x/../../passwd"}) {
    const auto reply = Ask(OpenDebugFile(kPid, self_, id, link));
    ASSERT_TRUE(reply) << link;
    EXPECT_FALSE(reply->fd.valid()) << link;
    EXPECT_EQ(Found(reply).first.find("passwd"), std::string::npos) << Found(reply).first;
  }
  // A plain name: looked up, and refused unless it is ELF.
  WriteFile(directory + "unwind-broker-not-elf.debug", "secret");
  const auto not_elf = Ask(OpenDebugFile(kPid, self_, id, "unwind-broker-not-elf.debug"));
  std::filesystem::remove(directory + "unwind-broker-not-elf.debug");
  ASSERT_TRUE(not_elf);
  EXPECT_FALSE(not_elf->fd.valid());
  EXPECT_NE(Found(not_elf).first.find(directory + "unwind-broker-not-elf.debug: not an ELF file"),
            std::string::npos)
      << Found(not_elf).first;
  // An ELF file by that name beside the file (here the binary itself): the third candidate, in
  // one question; asked again after it, the last candidate (its .debug/) is missing.
  const auto beside = Ask(OpenDebugFile(kPid, self_, id, name));
  ASSERT_TRUE(beside);
  EXPECT_EQ(Found(beside), (std::pair<std::string, uint32_t>{"", 2}));
  EXPECT_TRUE(beside->fd.valid());
  const auto after = Ask(OpenDebugFile(kPid, self_, id, name, 3));
  ASSERT_TRUE(after);
  EXPECT_FALSE(after->fd.valid());
  EXPECT_NE(Found(after).first.find("/.debug/" + name), std::string::npos) << Found(after).first;
  // Past the candidates: none, nothing opened.
  const auto past = Ask(OpenDebugFile(kPid, self_, id, name, 0xffffffff));
  ASSERT_TRUE(past);
  EXPECT_FALSE(past->fd.valid());
  EXPECT_EQ(Found(past).first, "no debug file candidate");
  // A mapping that is not a line of the process's maps.
  MappedFile forged{.start = kBase,
                    .end = kBase + kSpan,
                    .offset = 0,
                    .device = 0,
                    .inode = 1,
                    .path = "/etc/passwd"};
  const auto mapping = Ask(wire::Writer(wire::Type::kAccess)
                               .U32(static_cast<uint32_t>(wire::AccessOp::kOpenMapping))
                               .U32(kPid)
                               .U64(forged.start)
                               .U64(forged.end)
                               .U64(forged.offset)
                               .U64(forged.device)
                               .U64(forged.inode)
                               .String(forged.path));
  ASSERT_TRUE(mapping);
  EXPECT_FALSE(mapping->fd.valid());
  EXPECT_EQ(error_of(mapping), "not a mapping of the process");
}

// A debug file by build id under the process's /usr/lib/debug/.build-id (where this host has
// any: libc6-dbg and the like), for any mapped file.
TEST_F(UnwindBrokerTest, OpensADebugFileByBuildId) {
  std::error_code error;
  std::vector<uint8_t> id;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator("/usr/lib/debug/.build-id", error)) {
    const std::string dir = entry.path().parent_path().filename().string();
    std::string file = entry.path().filename().string();
    if (dir.size() != 2 || !file.ends_with(".debug") || !entry.is_regular_file(error)) continue;
    const std::string hex = dir + file.substr(0, file.size() - 6);
    if (hex.size() % 2 != 0 || hex.size() < 6) continue;
    for (size_t i = 0; i < hex.size(); i += 2) {
      id.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
    }
    break;
  }
  if (id.empty()) GTEST_SKIP() << "no file under /usr/lib/debug/.build-id";
  broker_.SetScope(Image());
  const auto reply = Ask(OpenDebugFile(kPid, self_, id, ""));
  ASSERT_TRUE(reply);
  EXPECT_EQ(Found(reply), (std::pair<std::string, uint32_t>{"", 0}));
  EXPECT_TRUE(reply->fd.valid());
}

// A subverted worker's malformed debug-file questions: each stops it (no answer), before any
// file is looked up.
TEST_F(UnwindBrokerTest, RefusesDebugFileQuestionsOutOfBounds) {
  broker_.SetScope(Image());
  const std::vector<uint8_t> id = {0xab, 0xcd, 0xef, 0x01};
  const auto raw = [&](std::span<const uint8_t> mapped, std::span<const uint8_t> build_id,
                       std::span<const uint8_t> link) {
    return std::move(wire::Writer(wire::Type::kAccess)
                         .U32(static_cast<uint32_t>(wire::AccessOp::kOpenDebugFile))
                         .U32(kPid)
                         .Bytes(mapped)
                         .Bytes(build_id)
                         .Bytes(link)
                         .U32(0));
  };
  const auto bytes = [](const std::string& text) {
    return std::vector<uint8_t>(text.begin(), text.end());
  };
  // A build id longer than any libdwfl looks up, a debuglink longer than a file name, a path
  // longer than the protocol's names (Writer::String would cut them: sent raw here).
  EXPECT_FALSE(Ask(raw(bytes(self_), std::vector<uint8_t>(wire::kMaxBuildId + 1, 1), bytes("x"))));
  EXPECT_FALSE(Ask(raw(bytes(self_), id, bytes(std::string(wire::kMaxDebuglink + 1, 'a')))));
  EXPECT_FALSE(Ask(raw(bytes(std::string(wire::kMaxName + 1, '/')), id, bytes("x"))));
  // Many names where one is allowed: the candidates are the broker's to compute, a list
  // appended to the question is bytes left over.
  wire::Writer many = OpenDebugFile(kPid, self_, id, "x");
  for (int i = 0; i < 64; ++i) many.String("/usr/lib/debug/../../etc/passwd");
  EXPECT_FALSE(Ask(many));
  // Cut short, another process's.
  wire::Writer cut(wire::Type::kAccess);
  cut.U32(static_cast<uint32_t>(wire::AccessOp::kOpenDebugFile)).U32(kPid).String(self_);
  EXPECT_FALSE(Ask(cut));
  EXPECT_FALSE(Ask(OpenDebugFile(kPid + 1, self_, id, "x")));
  // The bounds themselves are allowed: answered (no such file), not refused.
  const auto longest = Ask(OpenDebugFile(kPid, self_, std::vector<uint8_t>(wire::kMaxBuildId, 1),
                                         std::string(wire::kMaxDebuglink, 'a')));
  ASSERT_TRUE(longest);
  EXPECT_FALSE(longest->fd.valid());
  // The old question (a path of the worker's choosing) is no longer answered.
  EXPECT_FALSE(Ask(wire::Writer(wire::Type::kAccess).U32(5).U32(kPid).String("/etc/passwd")));
}

TEST(UnwindProtocol, ReaderStopsAtTheEndAndAtBounds) {
  const wire::Writer message =
      std::move(wire::Writer(wire::Type::kRetain).U32(2).String("abc").U64(7));
  wire::Reader reader(std::span(message.bytes()).subspan(4));
  EXPECT_EQ(reader.U32(), 2U);
  EXPECT_EQ(reader.String(2), "");  // longer than allowed: fails, and so does all after it
  EXPECT_FALSE(reader.ok());
  EXPECT_EQ(reader.U64(), 0U);
  wire::Reader whole(std::span(message.bytes()).subspan(4));
  EXPECT_EQ(whole.U32(), 2U);
  EXPECT_EQ(whole.String(), "abc");
  EXPECT_EQ(whole.U64(), 7U);
  EXPECT_TRUE(whole.done());
  EXPECT_EQ(whole.U8(), 0);
  EXPECT_FALSE(whole.ok());
}

}  // namespace
}  // namespace rdmascope::sys
