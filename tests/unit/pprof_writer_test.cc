// The pprof output decoded two ways: with libprotobuf's generated classes (field by field), and
// with `protoc --decode perftools.profiles.Profile profile.proto` as the issue asks (the text
// a person would check). Both must name the leaking function with its exact values.
#include "profile/pprof_writer.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "pprof/profile.pb.h"
#include "unit/profile_writer_fixture.h"

namespace rdmascope::profile {
namespace {

namespace pb = perftools::profiles;
using testing::kMiB;
using testing::SampleProfile;

// The encoder library of this build (librdmascope_pprof.so, loaded as `profile` loads it).
std::string Encode(const ProfileData& data) {
  auto gzipped = EncodePprof(data, PPROF_LIBRARY);
  EXPECT_TRUE(gzipped) << gzipped.error();
  return gzipped.value_or("");
}

std::string Gunzip(const std::string& gzipped) {
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 16 + MAX_WBITS), Z_OK);  // 16: gzip header, not zlib
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gzipped.data()));
  stream.avail_in = static_cast<uInt>(gzipped.size());
  std::string out;
  char buffer[65536];
  int status = Z_OK;
  while (status == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof buffer;
    status = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - stream.avail_out);
  }
  EXPECT_EQ(status, Z_STREAM_END) << "not a complete gzip stream";
  inflateEnd(&stream);
  return out;
}

pb::Profile Decode(const ProfileData& data) {
  const std::string gzipped = Encode(data);
  EXPECT_TRUE(gzipped.starts_with("\x1f\x8b")) << "not gzip";
  pb::Profile profile;
  EXPECT_TRUE(profile.ParseFromString(Gunzip(gzipped)));
  return profile;
}

// Sample values by the leaf function's name, and the whole stack leaf first.
struct Decoded {
  std::map<std::string, std::vector<int64_t>> values_by_leaf;
  std::map<std::string, std::vector<std::string>> stack_by_leaf;
};

Decoded Index(const pb::Profile& profile) {
  std::map<uint64_t, std::string> functions;
  for (const pb::Function& function : profile.function()) {
    functions[function.id()] = profile.string_table(static_cast<int>(function.name()));
  }
  std::map<uint64_t, const pb::Location*> locations;
  for (const pb::Location& location : profile.location()) locations[location.id()] = &location;
  Decoded decoded;
  for (const pb::Sample& sample : profile.sample()) {
    std::vector<std::string> stack;
    for (uint64_t id : sample.location_id()) {
      stack.push_back(functions.at(locations.at(id)->line(0).function_id()));
    }
    const std::string leaf = stack.at(0);
    decoded.values_by_leaf[leaf] = {sample.value().begin(), sample.value().end()};
    decoded.stack_by_leaf[leaf] = stack;
  }
  return decoded;
}

TEST(PprofWriter, SampleTypesAndStringTable) {
  const pb::Profile profile = Decode(SampleProfile());
  ASSERT_GT(profile.string_table_size(), 0);
  EXPECT_EQ(profile.string_table(0), "");  // profile.proto: index 0 is the empty string
  auto str = [&](int64_t index) { return profile.string_table(static_cast<int>(index)); };
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"outstanding_bytes", "bytes"},
      {"outstanding_regions", "count"},
      {"registrations", "count"},
      {"registered_bytes", "bytes"}};
  ASSERT_EQ(profile.sample_type_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(str(profile.sample_type(i).type()), expected[i].first);
    EXPECT_EQ(str(profile.sample_type(i).unit()), expected[i].second);
  }
  EXPECT_EQ(str(profile.default_sample_type()), "outstanding_bytes");
  EXPECT_EQ(profile.duration_nanos(), 10'000'000'000);
  EXPECT_EQ(profile.time_nanos(), 1'780'000'000'500'000'000);
  // Every string is unique in the table (an index, not a copy).
  std::set<std::string> unique(profile.string_table().begin(), profile.string_table().end());
  EXPECT_EQ(unique.size(), static_cast<size_t>(profile.string_table_size()));
}

TEST(PprofWriter, NamesTheLeakingFunctionWithItsValues) {
  const Decoded decoded = Index(Decode(SampleProfile()));
  // outstanding_bytes, outstanding_regions, registrations, registered_bytes
  EXPECT_EQ(decoded.values_by_leaf.at("leak_buffers"),
            (std::vector<int64_t>{12 * kMiB, 3, 3, 12 * kMiB}));
  EXPECT_EQ(decoded.stack_by_leaf.at("leak_buffers"),
            (std::vector<std::string>{"leak_buffers", "main", "__libc_start_call_main"}));
  EXPECT_EQ(decoded.values_by_leaf.at("post_buffers"),
            (std::vector<int64_t>{0, 0, 100, 400 * kMiB}));
  EXPECT_EQ(decoded.values_by_leaf.at("[libfoo.so.1]"), (std::vector<int64_t>{8192, 1, 1, 8192}));
  EXPECT_EQ(decoded.values_by_leaf.at("[no call stack]"), (std::vector<int64_t>{kMiB, 1, 0, 0}));
  // The hostile name survives as valid UTF-8 (proto3 strings must be).
  EXPECT_TRUE(
      decoded.values_by_leaf.contains("<img src=x onerror=alert(2)>;evil\n\"q\"\xef\xbf\xbd"));
}

TEST(PprofWriter, ValuesSumToTheTotals) {
  const ProfileData data = SampleProfile();
  const pb::Profile profile = Decode(data);
  int64_t sums[4] = {};
  for (const pb::Sample& sample : profile.sample()) {
    ASSERT_EQ(sample.value_size(), 4);
    for (int i = 0; i < 4; ++i) sums[i] += sample.value(i);
  }
  EXPECT_EQ(sums[0], static_cast<int64_t>(data.mr.outstanding_bytes));
  EXPECT_EQ(sums[1], static_cast<int64_t>(data.mr.outstanding_regions));
  EXPECT_EQ(sums[2], static_cast<int64_t>(data.mr.registrations));
  EXPECT_EQ(sums[3], static_cast<int64_t>(data.mr.registered_bytes));
}

TEST(PprofWriter, MappingsPerModuleAndNoAbsoluteAddresses) {
  const pb::Profile profile = Decode(SampleProfile());
  std::map<std::string, uint64_t> mappings;
  for (const pb::Mapping& mapping : profile.mapping()) {
    EXPECT_TRUE(mapping.has_functions());  // symbolized: nothing for pprof to look up
    EXPECT_EQ(mapping.memory_start(), 0U);
    mappings[profile.string_table(static_cast<int>(mapping.filename()))] = mapping.id();
  }
  EXPECT_EQ(mappings.size(), 5U);  // mr_leaker, libc.so.6, app, lib"odd'.so, libfoo.so.1
  EXPECT_TRUE(mappings.contains("lib\"odd'.so"));
  std::set<uint64_t> ids;
  for (const pb::Location& location : profile.location()) {
    EXPECT_EQ(location.address(), 0U);
    EXPECT_TRUE(ids.insert(location.id()).second);
    EXPECT_NE(location.id(), 0U);
    ASSERT_EQ(location.line_size(), 1);
  }
  // main is called from 3 call sites (offsets 0x51, 0x60, 0x70): 3 locations, 1 function.
  int main_functions = 0;
  for (const pb::Function& function : profile.function()) {
    main_functions += profile.string_table(static_cast<int>(function.name())) == "main";
  }
  EXPECT_EQ(main_functions, 1);
}

std::string RunCommand(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  EXPECT_EQ(pclose(pipe), 0) << command;
  return out;
}

TEST(PprofWriter, ProtocDecodesItAgainstPprofsProfileProto) {
  const std::string dir = ::testing::TempDir();
  const std::string raw = dir + "/profout_profile.pb";
  std::ofstream(raw, std::ios::binary) << Gunzip(Encode(SampleProfile()));
  const std::string text =
      RunCommand(std::string(PROTOC_PATH) + " --decode perftools.profiles.Profile" +
                 " --proto_path=" + PPROF_PROTO_DIR + " profile.proto < " + raw);
  std::remove(raw.c_str());
  EXPECT_NE(text.find("string_table: \"leak_buffers\""), std::string::npos) << text;
  EXPECT_NE(text.find("string_table: \"outstanding_bytes\""), std::string::npos);
  // The leak's sample: outstanding bytes, regions, registrations, registered bytes.
  EXPECT_NE(text.find("value: 12582912\n  value: 3\n  value: 3\n  value: 12582912"),
            std::string::npos)
      << text;
}

// `profile` finds the library beside its executable (the build tree) before the installed one.
TEST(PprofWriter, FindsTheLibraryBesideTheExecutable) {
  const std::filesystem::path library = PPROF_LIBRARY;
  const auto found = FindPprofLibrary(library.parent_path());
  ASSERT_TRUE(found) << found.error();
  EXPECT_EQ(*found, library);
}

// Without the library: an error naming what is missing, never an empty or made-up profile.
TEST(PprofWriter, MissingLibraryIsAnErrorNotAFile) {
  const auto encoded = EncodePprof(SampleProfile(), "/nonexistent/librdmascope_pprof.so");
  ASSERT_FALSE(encoded);
  EXPECT_NE(encoded.error().find("/nonexistent/librdmascope_pprof.so"), std::string::npos)
      << encoded.error();
  const auto found = FindPprofLibrary("/nonexistent");
  if (!found) {  // else installed on this host (<libdir>/rdmascope)
    EXPECT_NE(found.error().find("librdmascope_pprof.so found neither in /nonexistent"),
              std::string::npos)
        << found.error();
  }
}

// A library that is not the encoder (here libz) is refused, not called.
TEST(PprofWriter, AnotherLibraryIsRefused) {
  const auto encoded = EncodePprof(SampleProfile(), "libz.so.1");
  ASSERT_FALSE(encoded);
  EXPECT_NE(encoded.error().find("is not rdmascope's pprof library"), std::string::npos)
      << encoded.error();
}

}  // namespace
}  // namespace rdmascope::profile
