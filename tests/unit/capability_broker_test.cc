// The capability broker (sys/capability_broker.h) with the real `rdmascope
// __capability-broker`: what it answers about this test's own process (the same as reading
// /proc here), what it refuses whatever serve asks (files not mapped as code, /etc/passwd,
// forged lines, malformed and oversized requests), its confinement as the kernel shows it, and
// a broker that is gone or never answers (counted, no hang).
#include "sys/capability_broker.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sys/spawn_helper.h"
#include "sys/unwind_protocol.h"
#include "unit/process_status.h"

namespace rdmascope::sys {
namespace {

namespace wire = unwind_protocol;

// As root, the broker is nobody: without its two capabilities it could not read this (root's)
// process. As another user it keeps that uid, which reads its own processes with none.
caps::CapabilitySet TheBrokersShare() {
  return geteuid() == 0 ? BrokerCapabilities() : caps::CapabilitySet{};
}

std::shared_ptr<CapabilityBroker> StartBroker(const caps::CapabilitySet& keep = TheBrokersShare()) {
  auto broker = CapabilityBroker::Start(RDMASCOPE_BINARY, keep);
  EXPECT_TRUE(broker.has_value()) << broker.error();
  return broker ? *broker : nullptr;
}

// This test binary's own code mapping, as its maps show it.
MappedFile OwnCodeMapping() {
  std::ifstream maps("/proc/self/maps");
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string text((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
  for (const MappedFile& file : ParseMappedFiles(text)) {
    if (file.executable && file.path == self) return file;
  }
  ADD_FAILURE() << "no code mapping of " << self;
  return {};
}

TEST(CapabilityBrokerTest, AnswersAsReadingProcHereWould) {
  auto broker = StartBroker();
  ASSERT_TRUE(broker);
  const auto pid = static_cast<uint32_t>(getpid());
  const auto maps = broker->Maps(pid, 8 << 20);
  ASSERT_TRUE(maps.has_value()) << maps.error();
  const MappedFile code = OwnCodeMapping();
  EXPECT_NE(maps->find(code.path), std::string::npos);

  const auto opened = broker->OpenMapping(pid, code);
  ASSERT_TRUE(opened.has_value()) << opened.error();
  EXPECT_EQ(opened->status.st_ino, code.inode);
  EXPECT_EQ(opened->status.st_dev, code.device);
  EXPECT_TRUE(S_ISREG(opened->status.st_mode));
  EXPECT_EQ(fcntl(opened->fd.get(), F_GETFL) & O_ACCMODE, O_RDONLY);

  const uint32_t pids[] = {pid, 0, 0x7ffffff0};
  const auto links = broker->Namespaces(NamespaceKind::kPid, pids);
  ASSERT_EQ(links.size(), 3u);
  EXPECT_EQ(links[0], std::filesystem::read_symlink("/proc/self/ns/pid").string());
  EXPECT_FALSE(links[1]);
  EXPECT_FALSE(links[2]);
  const auto user = broker->Namespaces(NamespaceKind::kUser, std::span(pids, 1));
  EXPECT_EQ(user.at(0), std::filesystem::read_symlink("/proc/self/ns/user").string());

  const auto holders = broker->UverbsHolders();
  ASSERT_TRUE(holders.has_value()) << holders.error();
  EXPECT_EQ(*holders, DirectProcfs("/proc").UverbsHolders().value());

  const CapabilityBrokerStats stats = broker->stats();
  EXPECT_TRUE(stats.up);
  EXPECT_EQ(stats.failed, 0u);
  EXPECT_EQ(stats.requests.at("maps"), 1u);
  EXPECT_EQ(stats.requests.at("namespaces"), 2u);
}

TEST(CapabilityBrokerTest, OpensOnlyFilesMappedAsCodeAndTheirDebugFiles) {
  auto broker = StartBroker();
  ASSERT_TRUE(broker);
  const auto pid = static_cast<uint32_t>(getpid());
  // A data file this process maps (read-only, no code): its exact maps line, refused.
  char path[] = "/tmp/rdmascope-broker-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  void* data = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(data, MAP_FAILED);
  MappedFile mapped_data;
  for (const MappedFile& file : ParseMappedFiles(*DirectProcfs("/proc").Maps(pid, 8 << 20))) {
    if (file.path == path) mapped_data = file;
  }
  ASSERT_EQ(mapped_data.path, path);
  const auto refused = broker->OpenMapping(pid, mapped_data);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().find("maps as code"), std::string::npos) << refused.error();
  munmap(data, 4096);
  close(fd);
  unlink(path);

  // A forged line: the code file's path with another inode, or another range.
  MappedFile forged = OwnCodeMapping();
  forged.inode += 1;
  EXPECT_FALSE(broker->OpenMapping(pid, forged).has_value());
  forged = OwnCodeMapping();
  forged.end += 4096;
  EXPECT_FALSE(broker->OpenMapping(pid, forged).has_value());

  for (const char* other : {"/etc/passwd", "/etc/shadow", "/proc/1/environ",
                            "/usr/lib/debug/.build-id/../../../etc/passwd", "etc/passwd"}) {
    const auto opened = broker->OpenInRoot(pid, other);
    ASSERT_FALSE(opened.has_value()) << other;
    EXPECT_NE(opened.error().find("not a debug file"), std::string::npos) << opened.error();
  }
  // A debug-file name beside the code file is a question it may answer (here: no such file).
  const std::string beside =
      std::filesystem::path(OwnCodeMapping().path).parent_path() / "no-such.debug";
  const auto missing = broker->OpenInRoot(pid, beside);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().find("not a debug file"), std::string::npos) << missing.error();
  EXPECT_TRUE(broker->stats().up);  // refusals are answers, not failures
  EXPECT_EQ(broker->stats().failed, 0u);
}

TEST(CapabilityBrokerTest, ConfinedAsTheKernelShowsIt) {
  const bool root = geteuid() == 0;
  auto broker = StartBroker();
  ASSERT_TRUE(broker);
  EXPECT_EQ(StatusField(broker->pid(), "Seccomp"), "2");
  EXPECT_EQ(StatusField(broker->pid(), "NoNewPrivs"), "1");
  EXPECT_EQ(StatusField(broker->pid(), "CapInh"), "0000000000000000");
  EXPECT_EQ(StatusField(broker->pid(), "CapAmb"), "0000000000000000");
  // CAP_DAC_READ_SEARCH (2) and CAP_SYS_PTRACE (19) as root; nothing otherwise.
  const std::string held = root ? "0000000000080004" : "0000000000000000";
  EXPECT_EQ(StatusField(broker->pid(), "CapEff"), held);
  EXPECT_EQ(StatusField(broker->pid(), "CapPrm"), held);
  if (root) {
    EXPECT_EQ(StatusField(broker->pid(), "CapBnd"), held);
    EXPECT_EQ(StatusField(broker->pid(), "Uid"), "65534\t65534\t65534\t65534");
    EXPECT_EQ(broker->held(), "cap_dac_read_search,cap_sys_ptrace");
  }
  for (const char* layer :
       {"uid", "capabilities", "no_new_privs", "dumpable", "rlimits", "seccomp"}) {
    EXPECT_TRUE(broker->confinement().at(layer)) << layer << ": " << broker->layers();
  }
  // Anything but the two is refused before a process is started.
  EXPECT_FALSE(CapabilityBroker::Start(RDMASCOPE_BINARY, {CAP_SYS_ADMIN}).has_value());
}

// The broker's side, spoken to directly: what a subverted serve could send.
class RawBrokerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int pair[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
    socket_ = UniqueFd(pair[0]);
    UniqueFd theirs(pair[1]);
    auto pid = SpawnHelper(RDMASCOPE_BINARY,
                           {"rdmascope", "__capability-broker", std::to_string(getpid()),
                            caps::Names(TheBrokersShare())},
                           theirs.get());
    ASSERT_TRUE(pid.has_value()) << pid.error();
    pid_ = *pid;
    auto ready = wire::Receive(socket_.get());
    ASSERT_TRUE(ready.has_value()) << ready.error();
    ASSERT_EQ(ready->type, wire::Type::kReady);
  }
  void TearDown() override {
    socket_ = UniqueFd();  // the broker sees the end and exits
    if (pid_ > 0) {
      int status = 0;
      ASSERT_EQ(waitpid(pid_, &status, 0), pid_);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }
  }
  // errno of the reply to `request`, and its text.
  std::pair<uint32_t, std::string> Ask(const wire::Writer& request) {
    EXPECT_TRUE(wire::Send(socket_.get(), request));
    auto reply = wire::Receive(socket_.get());
    if (!reply) return {~0U, reply.error()};
    wire::Reader in(reply->body);
    const uint32_t error = in.U32();
    return {error, in.String()};
  }
  UniqueFd socket_;
  pid_t pid_ = -1;
};

TEST_F(RawBrokerTest, MalformedRequestsGetAnErrorAndTheBrokerGoesOn) {
  const auto op = [](BrokerOp value) {
    wire::Writer request(wire::Type::kBrokerRequest);
    request.U32(static_cast<uint32_t>(value));
    return request;
  };
  wire::Writer unknown(wire::Type::kBrokerRequest);
  unknown.U32(99);
  EXPECT_EQ(Ask(unknown).first, static_cast<uint32_t>(EINVAL));
  EXPECT_EQ(Ask(wire::Writer(wire::Type::kUnwind)).first, static_cast<uint32_t>(EINVAL));
  EXPECT_EQ(Ask(op(BrokerOp::kMaps)).first, static_cast<uint32_t>(EINVAL));  // no pid
  auto trailing = op(BrokerOp::kMaps);
  trailing.U32(getpid()).U32(7);
  EXPECT_EQ(Ask(trailing).first, static_cast<uint32_t>(EINVAL));
  auto pid_zero = op(BrokerOp::kMaps);
  pid_zero.U32(0);
  EXPECT_EQ(Ask(pid_zero).first, static_cast<uint32_t>(ENOENT));
  auto too_many = op(BrokerOp::kNamespaces);
  too_many.U8(1).U32(wire::kMaxItems + 1);
  EXPECT_EQ(Ask(too_many).first, static_cast<uint32_t>(EINVAL));
  auto bad_kind = op(BrokerOp::kNamespaces);
  bad_kind.U8(3).U32(0);
  EXPECT_EQ(Ask(bad_kind).first, static_cast<uint32_t>(EINVAL));
  auto long_path = op(BrokerOp::kOpenInRoot);
  const std::vector<uint8_t> too_long(wire::kMaxName + 1, 'a');  // String() would cut it
  long_path.U32(getpid()).Bytes(too_long);
  EXPECT_EQ(Ask(long_path).first, static_cast<uint32_t>(EINVAL));
  // Still answering.
  auto fine = op(BrokerOp::kMaps);
  fine.U32(getpid());
  EXPECT_EQ(Ask(fine).first, 0u);
}

TEST(CapabilityBrokerTest, ABrokerThatIsGoneIsCountedAndNeverWaitedFor) {
  auto broker = StartBroker();
  ASSERT_TRUE(broker);
  ASSERT_EQ(kill(broker->pid(), SIGKILL), 0);
  const auto maps = broker->Maps(static_cast<uint32_t>(getpid()), 1 << 20);
  ASSERT_FALSE(maps.has_value());
  EXPECT_FALSE(broker->stats().up);
  EXPECT_EQ(broker->stats().failed, 1u);
  // Later questions fail at once.
  EXPECT_FALSE(broker->UverbsHolders().has_value());
  const uint32_t pid = static_cast<uint32_t>(getpid());
  EXPECT_FALSE(broker->Namespaces(NamespaceKind::kPid, std::span(&pid, 1)).at(0));
  EXPECT_EQ(broker->stats().failed, 3u);
}

// A broker that stops answering and that this process may not kill (nobody's, and no CAP_KILL,
// as under a root exporter) is given up within a bounded time: a scrape never waits for it.
TEST(CapabilityBrokerTest, ABrokerThatHangsAndCannotBeKilledIsNotWaitedFor) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a broker of another user)";
  char dir[] = "/tmp/rdmascope-fake-broker-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string program = std::string(dir) + "/broker";
  {
    std::ofstream script(program);
    // Says it is ready (kReady, 16), then never answers.
    script << "#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups python3 -c '"
              "import socket, struct, time\n"
              "s = socket.socket(fileno=3)\n"
              "s.send(struct.pack(\"<II\", 16, 9) + b\"held=none\")\n"
              "time.sleep(1000)'\n";
  }
  ASSERT_EQ(chmod(program.c_str(), 0755), 0);
  auto broker = CapabilityBroker::Start(program, {}, std::chrono::milliseconds(300));
  ASSERT_TRUE(broker.has_value()) << broker.error();
  const auto took = WithoutCapKill(
      [&] { EXPECT_FALSE((*broker)->Maps(static_cast<uint32_t>(getpid()), 1 << 20).has_value()); });
  EXPECT_LT(took, std::chrono::seconds(5));  // 0.3 s of deadline, at most 1 s of reaping
  EXPECT_FALSE((*broker)->stats().up);
  EXPECT_EQ((*broker)->stats().failed, 1u);
  // The fake's sleeper (setpriv execs python3), from this thread, which may kill it.
  constexpr char kFake[] = "python3\0-c\0import socket, struct, time";
  KillByCommandLine(std::string_view(kFake, sizeof kFake - 1));
  std::filesystem::remove_all(dir);
}

TEST(CapabilityBrokerTest, ABrokerThatNeverStartsIsGivenUp) {
  // /bin/sleep is no broker: it never says it is ready.
  const auto started = CapabilityBroker::Start("/bin/sleep", {}, std::chrono::milliseconds(200));
  ASSERT_FALSE(started.has_value());
  EXPECT_NE(started.error().find("did not start"), std::string::npos) << started.error();
}

}  // namespace
}  // namespace rdmascope::sys
