#include "sys/grpc_capture.h"

#include <cerrno>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/capture.h"
#include "sys/grpc_endpoints.h"

namespace rdmascope::sys {
namespace {

using nlohmann::json;

// The deepest a file nests: the object, its list, an entry, an entry's device_ids.
constexpr size_t kMaxDepth = 4;
// Kubernetes names are 253 bytes at most, ids 64; an endpoint is a path; an error a line.
constexpr size_t kMaxText = 4096;
// Entries of one answer, and device ids of one entry: far above any node's.
constexpr size_t kMaxEntries = 65536;
constexpr size_t kMaxDeviceIds = 4096;

// Nesting counted over the bytes before any value is built, so that a file of brackets costs
// a scan, not a tree of millions of nodes.
bool WithinDepth(std::string_view text) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

std::string Dump(const json& value) {
  // Runtimes name things in UTF-8; anything else is replaced rather than refused when written.
  return value.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

// A string member: absent is "" unless `required`; another type or one too long is refused.
std::expected<std::string, std::string> Text(const json& object, const char* name,
                                             bool required = false) {
  const auto it = object.find(name);
  if (it == object.end()) {
    if (required) return std::unexpected(std::string("no \"") + name + "\"");
    return std::string();
  }
  if (!it->is_string()) return std::unexpected(std::string("\"") + name + "\" is not a string");
  const auto& text = it->get_ref<const std::string&>();
  if (text.size() > kMaxText) {
    return std::unexpected(std::string("\"") + name + "\" is longer than " +
                           std::to_string(kMaxText) + " bytes");
  }
  return text;
}

// The file's object, its endpoint, and either its error or its list of entries (`list`).
template <typename Entry>
std::expected<Recorded<std::expected<std::vector<Entry>, std::string>>, std::string> ParseAnswer(
    std::string_view text, const char* list,
    const std::function<std::expected<Entry, std::string>(const json&)>& entry) {
  if (text.size() > kMaxGrpcAnswerBytes) return std::unexpected("larger than the bound");
  if (!WithinDepth(text)) {
    return std::unexpected("nested more than " + std::to_string(kMaxDepth) + " deep");
  }
  const json root = json::parse(text, nullptr, false);
  if (root.is_discarded()) return std::unexpected("not JSON");
  if (!root.is_object()) return std::unexpected("not a JSON object");
  Recorded<std::expected<std::vector<Entry>, std::string>> recorded;
  auto endpoint = Text(root, "endpoint", true);
  if (!endpoint) return std::unexpected(endpoint.error());
  recorded.endpoint = std::move(*endpoint);
  const auto error = root.find("error");
  const auto entries = root.find(list);
  if ((error == root.end()) == (entries == root.end())) {
    return std::unexpected(std::string("neither or both of \"error\" and \"") + list + "\"");
  }
  if (error != root.end()) {
    auto why = Text(root, "error");
    if (!why) return std::unexpected(why.error());
    // An empty error would read as success with nothing listed.
    if (why->empty()) return std::unexpected("\"error\" is empty");
    recorded.answer = std::unexpected(std::move(*why));
    return recorded;
  }
  if (!entries->is_array()) return std::unexpected(std::string("\"") + list + "\" is not a list");
  if (entries->size() > kMaxEntries) {
    return std::unexpected(std::string("\"") + list + "\" has more than " +
                           std::to_string(kMaxEntries) + " entries");
  }
  std::vector<Entry> parsed;
  parsed.reserve(entries->size());
  for (size_t i = 0; i < entries->size(); ++i) {
    const json& item = (*entries)[i];
    std::expected<Entry, std::string> one =
        item.is_object() ? entry(item) : std::unexpected(std::string("not an object"));
    if (!one) {
      return std::unexpected(std::string(list) + "[" + std::to_string(i) + "]: " + one.error());
    }
    parsed.push_back(std::move(*one));
  }
  recorded.answer = std::move(parsed);
  return recorded;
}

// Each named member into its field, in order; the first refusal stops.
std::expected<void, std::string> Fields(
    const json& object, std::initializer_list<std::tuple<const char*, std::string*, bool>> fields) {
  for (const auto& [name, field, required] : fields) {
    auto text = Text(object, name, required);
    if (!text) return std::unexpected(text.error());
    *field = std::move(*text);
  }
  return {};
}

std::expected<CriContainer, std::string> ParseContainer(const json& object) {
  CriContainer container;
  // The id is the key lookups use: an entry without one names nothing.
  const auto fields = Fields(object, {{"id", &container.id, true},
                                      {"pod", &container.pod, false},
                                      {"namespace", &container.pod_namespace, false},
                                      {"pod_uid", &container.pod_uid, false},
                                      {"container", &container.container, false}});
  if (!fields) return std::unexpected(fields.error());
  if (container.id.empty()) return std::unexpected("\"id\" is empty");
  return container;
}

std::expected<PodDevices, std::string> ParsePodDevices(const json& object) {
  PodDevices devices;
  const auto fields = Fields(object, {{"pod", &devices.pod, true},
                                      {"namespace", &devices.pod_namespace, false},
                                      {"container", &devices.container, false},
                                      {"resource", &devices.resource, true}});
  if (!fields) return std::unexpected(fields.error());
  const auto ids = object.find("device_ids");
  if (ids == object.end()) return devices;
  if (!ids->is_array()) return std::unexpected("\"device_ids\" is not a list");
  if (ids->size() > kMaxDeviceIds) return std::unexpected("\"device_ids\" is too long");
  for (const json& id : *ids) {
    if (!id.is_string() || id.get_ref<const std::string&>().size() > kMaxText) {
      return std::unexpected("a device id that is not a string of at most " +
                             std::to_string(kMaxText) + " bytes");
    }
    devices.device_ids.push_back(id.get<std::string>());
  }
  return devices;
}

template <typename Entries>
json Answer(std::string_view endpoint, const std::expected<Entries, std::string>& answer,
            const char* list, const std::function<json(const typename Entries::value_type&)>& one) {
  json root = {{"endpoint", endpoint}};
  if (!answer) {
    // Never empty: an empty error would not read back as a failure.
    root["error"] = answer.error().empty() ? std::string("failed") : answer.error();
    return root;
  }
  json entries = json::array();
  for (const auto& entry : *answer) entries.push_back(one(entry));
  root[list] = std::move(entries);
  return root;
}

template <typename Answer, typename Parse>
Answer Captured(std::string_view file, std::string_view endpoint,
                const std::function<Answer()>& live, const Parse& parse,
                const std::function<std::string(std::string_view, const Answer&)>& format) {
  capture::Session* session = capture::Active();
  if (session == nullptr) return live();
  if (session->replaying()) {
    const size_t sample = session->sample();
    const auto text = session->reader()->ReadFile(sample, file, kMaxGrpcAnswerBytes);
    const std::string where = "the capture's sample " + std::to_string(sample) + " ";
    if (!text) {
      return std::unexpected(where + "has no " + std::string(file) + " (" +
                             capture::ErrnoName(text.error()) + ")");
    }
    auto parsed = parse(*text);
    if (!parsed) {
      return std::unexpected(where + std::string(file) + " is refused: " + parsed.error());
    }
    return std::move(parsed->answer);
  }
  Answer answer = live();
  if (capture::Writer* writer = session->writer(); writer != nullptr) {
    if (const redact::Redactor* redactor = writer->redactor(); redactor != nullptr) {
      // The error's paths hashed as /debug/workloads' last_error is (cli/capture_redact.h).
      Answer kept =
          answer ? answer : Answer(std::unexpected(redact::FreeText(*redactor, answer.error())));
      if (kept) Redact(*redactor, *kept);
      writer->File(file, format(RedactEndpoint(*redactor, endpoint), kept));
    } else {
      writer->File(file, format(endpoint, answer));
    }
  }
  return answer;
}

}  // namespace

std::string FormatCriAnswer(std::string_view endpoint, const CriAnswer& answer) {
  return Dump(Answer<std::vector<CriContainer>>(
      endpoint, answer, "containers", [](const CriContainer& container) {
        return json{{"id", container.id},
                    {"pod", container.pod},
                    {"namespace", container.pod_namespace},
                    {"pod_uid", container.pod_uid},
                    {"container", container.container}};
      }));
}

std::string FormatPodResourcesAnswer(std::string_view endpoint, const PodResourcesAnswer& answer) {
  return Dump(Answer<std::vector<PodDevices>>(endpoint, answer, "pod_devices",
                                              [](const PodDevices& devices) {
                                                return json{{"pod", devices.pod},
                                                            {"namespace", devices.pod_namespace},
                                                            {"container", devices.container},
                                                            {"resource", devices.resource},
                                                            {"device_ids", devices.device_ids}};
                                              }));
}

std::expected<Recorded<CriAnswer>, std::string> ParseCriAnswer(std::string_view text) {
  return ParseAnswer<CriContainer>(text, "containers", &ParseContainer);
}

std::expected<Recorded<PodResourcesAnswer>, std::string> ParsePodResourcesAnswer(
    std::string_view text) {
  return ParseAnswer<PodDevices>(text, "pod_devices", &ParsePodDevices);
}

void Redact(const redact::Redactor& redactor, std::vector<CriContainer>& containers) {
  for (CriContainer& container : containers) {
    container.id = redact::WorkloadLabel(redactor, "container_id", container.id);
    container.pod = redact::WorkloadLabel(redactor, "pod", container.pod);
    container.pod_namespace = redact::WorkloadLabel(redactor, "namespace", container.pod_namespace);
    container.pod_uid = redact::WorkloadLabel(redactor, "pod_uid", container.pod_uid);
    container.container = redact::WorkloadLabel(redactor, "container", container.container);
  }
}

void Redact(const redact::Redactor& redactor, std::vector<PodDevices>& devices) {
  for (PodDevices& entry : devices) {
    entry.pod = redact::WorkloadLabel(redactor, "pod", entry.pod);
    entry.pod_namespace = redact::WorkloadLabel(redactor, "namespace", entry.pod_namespace);
    entry.container = redact::WorkloadLabel(redactor, "container", entry.container);
  }
}

std::string RedactEndpoint(const redact::Redactor& redactor, std::string_view endpoint) {
  std::vector<std::string> defaults = DefaultCriEndpoints();
  defaults.push_back(DefaultPodResourcesEndpoint());
  for (const std::string& known : defaults) {
    if (endpoint == known) return known;
  }
  return endpoint.empty() ? "" : redactor.Name("endpoint", endpoint);
}

CriAnswer CapturedCriList(std::string_view endpoint, const std::function<CriAnswer()>& live) {
  return Captured<CriAnswer>(kCriAnswerFile, endpoint, live, &ParseCriAnswer, &FormatCriAnswer);
}

PodResourcesAnswer CapturedPodResourcesList(std::string_view endpoint,
                                            const std::function<PodResourcesAnswer()>& live) {
  return Captured<PodResourcesAnswer>(kPodResourcesAnswerFile, endpoint, live,
                                      &ParsePodResourcesAnswer, &FormatPodResourcesAnswer);
}

std::optional<std::string> RecordedEndpoint(std::string_view file) {
  const capture::Session* session = capture::Active();
  if (session == nullptr || !session->replaying()) return std::nullopt;
  const capture::Reader& reader = *session->reader();
  for (size_t n = 1; n <= reader.sample_count(); ++n) {
    const auto text = reader.ReadFile(n, file, kMaxGrpcAnswerBytes);
    if (!text) {
      if (text.error() == ENOENT) continue;
      return std::string();
    }
    // A refused file still says the source was there: its samples answer with the refusal.
    if (file == kCriAnswerFile) {
      const auto parsed = ParseCriAnswer(*text);
      return parsed ? parsed->endpoint : std::string();
    }
    const auto parsed = ParsePodResourcesAnswer(*text);
    return parsed ? parsed->endpoint : std::string();
  }
  return std::nullopt;
}

}  // namespace rdmascope::sys
