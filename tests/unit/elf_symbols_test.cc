#include "sys/elf_symbols.h"

#include <gtest/gtest.h>

#include <map>

#include "bpf/uprobe_attach.h"

namespace rdmascope::sys {
namespace {

// The libibverbs stand-in built next to the tests exports the same versioned symbols as
// rdma-core's libibverbs.so.1.
TEST(ElfSymbols, ResolvesEveryVersionOfAName) {
  const auto symbols = ReadFunctionSymbols(FAKEVERBS_PATH);
  ASSERT_TRUE(symbols) << symbols.error();
  std::map<std::string, FunctionSymbol> by_version;
  for (const auto& symbol : *symbols) by_version[symbol.name + "@" + symbol.version] = symbol;
  ASSERT_TRUE(by_version.contains("ibv_reg_mr@IBVERBS_1.0"));
  ASSERT_TRUE(by_version.contains("ibv_reg_mr@IBVERBS_1.1"));
  EXPECT_FALSE(by_version["ibv_reg_mr@IBVERBS_1.0"].default_version);
  EXPECT_TRUE(by_version["ibv_reg_mr@IBVERBS_1.1"].default_version);
  EXPECT_NE(by_version["ibv_reg_mr@IBVERBS_1.0"].file_offset,
            by_version["ibv_reg_mr@IBVERBS_1.1"].file_offset);
  EXPECT_TRUE(by_version.contains("ibv_dereg_mr@IBVERBS_1.0"));
  EXPECT_TRUE(by_version.contains("ibv_reg_mr_iova2@IBVERBS_1.8"));
  EXPECT_FALSE(by_version.contains("fake_reg_mr_1_1@")) << "internal names stay local";
}

TEST(ElfSymbols, TheRealLibibverbs) {
  const std::string path = LinkedLibibverbsPath();
  ASSERT_FALSE(path.empty());
  const auto symbols = ReadFunctionSymbols(path);
  ASSERT_TRUE(symbols) << symbols.error();
  int dereg_versions = 0;
  for (const auto& symbol : *symbols) {
    if (symbol.name == "ibv_dereg_mr") ++dereg_versions;
    if (symbol.name == "ibv_get_device_list") {
      EXPECT_GT(symbol.file_offset, 0U);
    }
  }
  EXPECT_EQ(dereg_versions, 2) << "ibv_dereg_mr@IBVERBS_1.0 and @@IBVERBS_1.1";
}

// rdma-core funnels the registration wrappers into ibv_reg_mr_iova2 through the PLT; the MR
// probe relies on this to probe the inner function only.
TEST(ElfSymbols, ForwardersOfTheRealLibibverbs) {
  const auto symbols = ReadFunctionSymbols(LinkedLibibverbsPath());
  ASSERT_TRUE(symbols) << symbols.error();
  std::map<std::string, std::string> forwards;
  for (const auto& symbol : *symbols)
    forwards[symbol.name + "@" + symbol.version] = symbol.forwards_to;
  EXPECT_EQ(forwards["ibv_reg_mr@IBVERBS_1.1"], "ibv_reg_mr_iova2");
  EXPECT_EQ(forwards["ibv_reg_mr_iova@IBVERBS_1.7"], "ibv_reg_mr_iova2");
  EXPECT_EQ(forwards["ibv_reg_mr_iova2@IBVERBS_1.8"], "") << "the implementation itself";
  EXPECT_EQ(forwards["ibv_dereg_mr@IBVERBS_1.0"], "") << "the 1.0 wrapper reads memory";
  EXPECT_EQ(forwards["ibv_dereg_mr@IBVERBS_1.1"], "");
}

// The stand-in's wrappers jump straight to ibv_reg_mr_iova2 (hidden, no PLT).
TEST(ElfSymbols, DirectForwardersOfTheStandIn) {
  const auto symbols = ReadFunctionSymbols(FAKEVERBS_PATH);
  ASSERT_TRUE(symbols) << symbols.error();
  for (const auto& symbol : *symbols) {
    if (symbol.name == "ibv_reg_mr" && symbol.version == "IBVERBS_1.1") {
      EXPECT_EQ(symbol.forwards_to, "ibv_reg_mr_iova2");
    }
  }
}

TEST(ElfSymbols, StaticProgramsUseTheirSymbolTable) {
  const auto symbols = ReadFunctionSymbols(STATIC_VERBS_PATH);
  ASSERT_TRUE(symbols) << symbols.error();
  bool found = false;
  for (const auto& symbol : *symbols) {
    if (symbol.name == "ibv_reg_mr_iova2") {
      found = true;
      EXPECT_GT(symbol.file_offset, 0U);
      EXPECT_TRUE(symbol.version.empty());
    }
  }
  EXPECT_TRUE(found);
}

TEST(ElfSymbols, ErrorsAreValues) {
  EXPECT_FALSE(ReadFunctionSymbols("/nonexistent/lib.so"));
  const auto not_elf = ReadFunctionSymbols("/proc/self/status");
  ASSERT_FALSE(not_elf);
  EXPECT_NE(not_elf.error().find("not an ELF"), std::string::npos);
}

}  // namespace
}  // namespace rdmascope::sys
