// librdmascope_pprof.so: the protobuf half of the pprof writer (profile/pprof_writer.h), in
// a library of its own so that only `rdmascope profile` maps libprotobuf (issue 17). Linked
// with its own copies of stacks.cc and metric_set.cc (SanitizeUtf8) and exporting only its
// entry points and the generated classes (pprof_library.map): it needs nothing from the
// executable that loads it.
#include <cmath>
#include <map>
#include <tuple>

#include "core/metric_set.h"
#include "pprof/profile.pb.h"
#include "profile/pprof_writer.h"
#include "profile/stacks.h"

namespace rdmascope::profile {
namespace {

namespace pb = perftools::profiles;

// profile.proto's string table: every string is an index, and index 0 must be "".
// proto3 strings must be UTF-8 (parsers reject the message otherwise), hence SanitizeUtf8.
class StringTable {
 public:
  explicit StringTable(pb::Profile& profile) : profile_(profile) { Index(""); }
  int64_t Index(const std::string& raw) {
    const std::string text = SanitizeUtf8(raw);
    auto [it, inserted] = index_.emplace(text, static_cast<int64_t>(index_.size()));
    if (inserted) profile_.add_string_table(text);
    return it->second;
  }

 private:
  pb::Profile& profile_;
  std::map<std::string, int64_t> index_;
};

// Functions, mappings and locations, each created once and referred to by id (ids start at
// 1: 0 means "none" in profile.proto).
class Tables {
 public:
  Tables(pb::Profile& profile, StringTable& strings) : profile_(profile), strings_(strings) {}

  uint64_t Location(const Frame& frame) {
    const auto key = std::make_tuple(frame.function, frame.module, frame.offset);
    if (auto it = locations_.find(key); it != locations_.end()) return it->second;
    pb::Location* location = profile_.add_location();
    location->set_id(static_cast<uint64_t>(profile_.location_size()));
    location->set_mapping_id(Mapping(frame.module));
    // Address 0: an absolute address means nothing across runs (ASLR), and the call site's
    // offset from its function is no address in the mapping, which Parca or pprof might try
    // to symbolize again. Each call site (function, module, offset) stays its own location;
    // its offset is in profile.json and the HTML tooltips.
    location->set_address(0);
    pb::Line* line = location->add_line();
    line->set_function_id(Function(frame));
    locations_.emplace(key, location->id());
    return location->id();
  }

 private:
  uint64_t Mapping(const std::string& module) {
    if (module.empty()) return 0;
    if (auto it = mappings_.find(module); it != mappings_.end()) return it->second;
    pb::Mapping* mapping = profile_.add_mapping();
    mapping->set_id(static_cast<uint64_t>(profile_.mapping_size()));
    mapping->set_filename(strings_.Index(module));
    // Already symbolized: pprof must not look for the binary to symbolize addresses.
    mapping->set_has_functions(true);
    mappings_.emplace(module, mapping->id());
    return mapping->id();
  }

  uint64_t Function(const Frame& frame) {
    const std::string name = FrameName(frame);
    const auto key = std::make_pair(name, frame.module);
    if (auto it = functions_.find(key); it != functions_.end()) return it->second;
    pb::Function* function = profile_.add_function();
    function->set_id(static_cast<uint64_t>(profile_.function_size()));
    function->set_name(strings_.Index(name));
    function->set_system_name(strings_.Index(name));
    functions_.emplace(key, function->id());
    return function->id();
  }

  pb::Profile& profile_;
  StringTable& strings_;
  std::map<std::tuple<std::string, std::string, uint64_t>, uint64_t> locations_;
  std::map<std::string, uint64_t> mappings_;
  std::map<std::pair<std::string, std::string>, uint64_t> functions_;
};

int64_t Signed(uint64_t value) {
  return value > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(value);
}

std::string SerializePprof(const ProfileData& data) {
  pb::Profile profile;
  StringTable strings(profile);
  Tables tables(profile, strings);

  for (const auto& [type, unit] : {std::pair{"outstanding_bytes", "bytes"},
                                   {"outstanding_regions", "count"},
                                   {"registrations", "count"},
                                   {"registered_bytes", "bytes"}}) {
    pb::ValueType* sample_type = profile.add_sample_type();
    sample_type->set_type(strings.Index(type));
    sample_type->set_unit(strings.Index(unit));
  }
  profile.set_default_sample_type(strings.Index("outstanding_bytes"));

  for (const RegistrationStack& stack : StacksWithRemainder(data)) {
    pb::Sample* sample = profile.add_sample();
    // location_id[0] is the leaf in profile.proto, as frames are innermost first here.
    for (const Frame& frame : stack.frames) sample->add_location_id(tables.Location(frame));
    sample->add_value(Signed(stack.outstanding_bytes));
    sample->add_value(Signed(stack.outstanding_regions));
    sample->add_value(Signed(stack.registrations));
    sample->add_value(Signed(stack.registered_bytes));
  }

  profile.set_time_nanos(static_cast<int64_t>(std::llround(data.start_unix_seconds * 1e9)));
  profile.set_duration_nanos(static_cast<int64_t>(std::llround(data.duration_seconds * 1e9)));
  profile.add_comment(strings.Index("rdmascope " + data.rdmascope_version +
                                    " memory registrations of pid " + std::to_string(data.pid) +
                                    " (" + data.comm + ")"));
  if (!data.workload.empty()) {
    std::string workload = "workload:";
    for (const auto& [name, value] : data.workload) workload += " " + name + "=" + value;
    profile.add_comment(strings.Index(workload));
  }
  for (const std::string& note : data.notes) profile.add_comment(strings.Index(note));

  return profile.SerializeAsString();
}

}  // namespace

}  // namespace rdmascope::profile

// The library's only exported functions (built with hidden visibility), found by dlsym.
extern "C" {

__attribute__((visibility("default"))) const char* rdmascope_pprof_abi() {
  static const std::string abi = rdmascope::profile::PprofAbi();
  return abi.c_str();
}

__attribute__((visibility("default"))) int rdmascope_pprof_serialize(
    const rdmascope::profile::ProfileData* data, std::string* out, std::string* error) {
  try {
    *out = rdmascope::profile::SerializePprof(*data);
    return 0;
  } catch (const std::exception& e) {
    *error = e.what();
    return -1;
  }
}

}  // extern "C"
