#include "collectors/occupancy_facts.h"

#include <charconv>
#include <cstdio>

namespace rdmascope::occupancy_facts {
namespace {

using nlohmann::json;

std::string Octal(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0%llo", static_cast<unsigned long long>(value));
  return text;
}

std::optional<uint64_t> Unsigned(const json& facts, const char* key, uint64_t max) {
  const auto it = facts.find(key);
  if (it == facts.end() || !it->is_number_unsigned()) return std::nullopt;
  const uint64_t value = it->get<uint64_t>();
  if (value > max) return std::nullopt;
  return value;
}

// The text as a JSON object, within the bound; why not otherwise.
std::expected<json, std::string> Object(std::string_view text) {
  if (text.size() > kMaxBytes) return std::unexpected(std::string("larger than a facts file"));
  json facts = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!facts.is_object()) return std::unexpected(std::string("not a JSON object"));
  return facts;
}

}  // namespace

json StatJson(const struct stat& st) {
  return {{"mode", Octal(st.st_mode)},
          {"uid", st.st_uid},
          {"dev", static_cast<uint64_t>(st.st_dev)},
          {"ino", static_cast<uint64_t>(st.st_ino)},
          {"size", static_cast<uint64_t>(st.st_size < 0 ? 0 : st.st_size)}};
}

std::expected<struct stat, std::string> ParseStat(const json& facts, const char* what) {
  const auto bad = [&](const char* why) {
    return std::unexpected(std::string("\"") + what + "\": " + why);
  };
  if (!facts.is_object()) return bad("not an object");
  const auto mode_text = facts.find("mode");
  if (mode_text == facts.end() || !mode_text->is_string()) return bad("no octal \"mode\"");
  const std::string& text = mode_text->get_ref<const std::string&>();
  uint32_t mode = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mode, 8);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || mode > 0177777) {
    return bad("\"mode\" is not an octal st_mode");
  }
  switch (mode & S_IFMT) {
    case S_IFREG:
    case S_IFDIR:
    case S_IFLNK:
    case S_IFIFO:
    case S_IFSOCK:
    case S_IFCHR:
    case S_IFBLK:
      break;
    default:
      return bad("\"mode\" has no file type");
  }
  const auto uid = Unsigned(facts, "uid", UINT32_MAX);
  const auto dev = Unsigned(facts, "dev", UINT64_MAX);
  const auto ino = Unsigned(facts, "ino", UINT64_MAX);
  const auto size = Unsigned(facts, "size", INT64_MAX);
  if (!uid || !dev || !ino || !size) return bad("\"uid\", \"dev\", \"ino\" or \"size\" missing");
  struct stat st {};
  st.st_mode = mode;
  st.st_uid = static_cast<uid_t>(*uid);
  st.st_dev = static_cast<dev_t>(*dev);
  st.st_ino = static_cast<ino_t>(*ino);
  st.st_size = static_cast<off_t>(*size);
  return st;
}

std::expected<DirectoryFacts, std::string> ParseDirectoryFacts(std::string_view text) {
  auto facts = Object(text);
  if (!facts) return std::unexpected(facts.error());
  auto st = ParseStat(*facts, "directory");
  if (!st) return std::unexpected(st.error());
  const auto euid = Unsigned(*facts, "exporter_euid", UINT32_MAX);
  if (!euid) return std::unexpected(std::string("no \"exporter_euid\""));
  return DirectoryFacts{.st = *st, .exporter_euid = static_cast<uint32_t>(*euid)};
}

std::expected<NameFacts, std::string> ParseNameFacts(std::string_view text) {
  auto facts = Object(text);
  if (!facts) return std::unexpected(facts.error());
  const auto lstat = facts->find("lstat");
  if (lstat == facts->end()) return std::unexpected(std::string("no \"lstat\""));
  auto st = ParseStat(*lstat, "lstat");
  if (!st) return std::unexpected(st.error());
  NameFacts out;
  out.lstat = *st;
  if (const auto open = facts->find("open"); open != facts->end() && open->is_string()) {
    out.open = open->get<std::string>();
  }
  if (const auto stat = facts->find("stat"); stat != facts->end()) {
    out.stat = ParseStat(*stat, "stat");
  }
  if (const auto held = facts->find("held"); held != facts->end() && held->is_boolean()) {
    out.held = held->get<bool>();
  }
  return out;
}

sys::Refusal RefusalNamed(std::string_view name) {
  for (const sys::Refusal refusal : {sys::Refusal::kOpenFailed, sys::Refusal::kNotRegular,
                                     sys::Refusal::kTooLarge, sys::Refusal::kShortRead}) {
    if (name == sys::RefusalName(refusal)) return refusal;
  }
  return sys::Refusal::kOpenFailed;
}

}  // namespace rdmascope::occupancy_facts
