// The choice of the MR tracking path: the kernel path needs BTF for vmlinux, ib_core and
// ib_uverbs holding the functions it hooks; without them the exporter falls back to uprobes
// and says why (MrKernelPathUnavailable's text is that log line's reason).
#include "bpf/mr_kernel_probe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace rdmascope {
namespace {

namespace fs = std::filesystem;

class BtfDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/rdmascope-btf-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  // The running kernel's own BTF as the base (every Debian kernel has it).
  bool LinkVmlinux() {
    std::error_code ec;
    fs::create_symlink("/sys/kernel/btf/vmlinux", dir_ / "vmlinux", ec);
    return !ec && fs::exists("/sys/kernel/btf/vmlinux");
  }
  void Write(const char* name, const char* text) { std::ofstream(dir_ / name) << text; }
  fs::path dir_;
};

TEST(MrTracking, ParsesTheThreeValuesOnly) {
  EXPECT_EQ(ParseMrTracking("auto"), MrTracking::kAuto);
  EXPECT_EQ(ParseMrTracking("kernel"), MrTracking::kKernel);
  EXPECT_EQ(ParseMrTracking("uprobes"), MrTracking::kUprobes);
  EXPECT_EQ(ParseMrTracking("Kernel"), std::nullopt);
  EXPECT_EQ(ParseMrTracking(""), std::nullopt);
}

TEST_F(BtfDir, NoKernelBtf) {
  const auto why = MrKernelPathUnavailable(dir_);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("no kernel BTF"), std::string::npos) << *why;
}

TEST_F(BtfDir, NoIbCoreModuleBtfIsTheReason) {
  if (!LinkVmlinux()) GTEST_SKIP() << "no /sys/kernel/btf/vmlinux";
  const auto why = MrKernelPathUnavailable(dir_);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("no BTF for ib_core"), std::string::npos) << *why;
  EXPECT_NE(why->find("CONFIG_DEBUG_INFO_BTF_MODULES"), std::string::npos) << *why;
}

TEST_F(BtfDir, UnreadableModuleBtf) {
  if (!LinkVmlinux()) GTEST_SKIP() << "no /sys/kernel/btf/vmlinux";
  Write("ib_core", "not BTF");
  const auto why = MrKernelPathUnavailable(dir_);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("cannot read the BTF of ib_core"), std::string::npos) << *why;
}

// Modules with BTF but without the functions (another subsystem's BTF stands in for them):
// the reason names the missing functions, once each.
TEST_F(BtfDir, ModulesWithoutTheFunctions) {
  if (!LinkVmlinux()) GTEST_SKIP() << "no /sys/kernel/btf/vmlinux";
  fs::path module;
  for (const auto& entry : fs::directory_iterator("/sys/kernel/btf")) {
    if (entry.path().filename() != "vmlinux") {
      module = entry.path();
      break;
    }
  }
  if (module.empty()) GTEST_SKIP() << "no module BTF on this kernel";
  fs::create_symlink(module, dir_ / "ib_core");
  fs::create_symlink(module, dir_ / "ib_uverbs");
  const auto why = MrKernelPathUnavailable(dir_);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why,
            "kernel functions without BTF: ib_uverbs_reg_mr, rdma_restrack_add, "
            "ib_dereg_mr_user");
}

}  // namespace
}  // namespace rdmascope
