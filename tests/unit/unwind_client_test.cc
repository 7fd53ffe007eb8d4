// The sandboxed unwinder: sys::UnwindClient with the real worker (`rdmascope __unwind-worker`)
// unwinding the fake process of unit/unwind_fixture.h (the same frames as the in-process
// DwarfUnwinder), the worker's sandbox as the kernel shows it (/proc/PID/status), fake workers
// that hang, die or break the protocol (killed, counted, backed off), and the broker's checks of
// what a subverted worker may ask.
#include "sys/unwind_client.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <fstream>
#include <thread>

#include "sys/unwind_broker.h"
#include "unit/unwind_fixture.h"

namespace rdmascope::sys {
namespace {

namespace wire = unwind_protocol;

UnwindClientOptions RealWorker() {
  UnwindClientOptions options;
  options.program = RDMASCOPE_BINARY;
  return options;
}

// "Seccomp:\t2" -> "2": a field of /proc/PID/status.
std::string StatusField(pid_t pid, const std::string& name) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with(name + ":")) {
      const size_t value = line.find_first_not_of(" \t", name.size() + 1);
      return value == std::string::npos ? "" : line.substr(value);
    }
  }
  return "";
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
      client.Symbolize(kPid, remote.pcs, {.first = FirstAddress::kInstructionPointer}, &missing);
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

TEST_F(UnwindClientTest, AWorkerThatDiesIsCountedWithHowItDied) {
  UnwindClientOptions options;
  options.program = "/bin/sh";
  options.arguments = {"sh", "-c", "kill -SEGV $$"};
  options.backoff = std::chrono::milliseconds(0);
  UnwindClient client(access_, options);
  std::string missing;
  const uint64_t pcs[] = {At(rdmascope_unwind_alpha)};
  const std::vector<Frame> frames = client.Symbolize(kPid, pcs, {}, &missing);
  ASSERT_EQ(frames.size(), 1U);
  EXPECT_EQ(frames[0].Describe(), "??");
  EXPECT_NE(missing.find("killed by SIGSEGV"), std::string::npos) << missing;
  EXPECT_EQ(client.stats().restarts.at("died"), 1U);
  // Started again at the next request (no back-off here), and counted again.
  client.Symbolize(kPid, pcs, {}, &missing);
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
  static wire::Writer OpenInRoot(uint32_t pid, const std::string& path) {
    return std::move(wire::Writer(wire::Type::kAccess)
                         .U32(static_cast<uint32_t>(wire::AccessOp::kOpenInRoot))
                         .U32(pid)
                         .String(path));
  }
  UnwindBroker broker_{std::make_shared<LocalProcessAccess>(procfs_.path())};
  int sockets_[2] = {-1, -1};
};

TEST_F(UnwindBrokerTest, AnswersOnlyAboutTheProcessInScope) {
  broker_.SetScope(kPid);
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
  broker_.SetScope(0);
  EXPECT_FALSE(Ask(wire::Writer(wire::Type::kAccess)
                       .U32(static_cast<uint32_t>(wire::AccessOp::kStartTicks))
                       .U32(kPid)));
}

// A subverted worker asks for files the process never mapped: none is opened.
TEST_F(UnwindBrokerTest, OpensOnlyMappedFilesAndTheirDebugFiles) {
  broker_.SetScope(kPid);
  const auto error_of = [](const std::optional<wire::Message>& reply) {
    wire::Reader reader(reply->body);
    return reader.String();
  };
  for (const std::string path : {"/etc/passwd", "/etc/shadow", "/proc/1/environ",
                                 "/usr/lib/debug/.build-id/../../../etc/passwd"}) {
    const auto reply = Ask(OpenInRoot(kPid, path));
    ASSERT_TRUE(reply) << path;
    EXPECT_FALSE(reply->fd.valid()) << path;
    EXPECT_EQ(error_of(reply), "not a debug file of a mapped file") << path;
  }
  // Beside the mapped binary, a plain name: looked up, and refused unless it is ELF.
  const std::string directory = self_.substr(0, self_.rfind('/') + 1);
  WriteFile(directory + "unwind-broker-not-elf.debug", "secret");
  const auto not_elf = Ask(OpenInRoot(kPid, directory + "unwind-broker-not-elf.debug"));
  std::filesystem::remove(directory + "unwind-broker-not-elf.debug");
  ASSERT_TRUE(not_elf);
  EXPECT_FALSE(not_elf->fd.valid());
  EXPECT_EQ(error_of(not_elf), "not an ELF file");
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
