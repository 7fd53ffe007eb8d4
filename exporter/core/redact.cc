#include "core/redact.h"

#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

namespace rdmascope::redact {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr size_t kMinKeyBytes = 16;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

char HexDigit(int value, bool upper) {
  return (upper ? "0123456789ABCDEF" : "0123456789abcdef")[value & 0xf];
}

bool HasUpperHex(std::string_view text) {
  return std::ranges::any_of(text, [](char c) { return c >= 'A' && c <= 'F'; });
}

// "aa:bb:cc" (one or two hex digits a byte, as the kernel writes two) -> bytes.
std::optional<Bytes> ParseColonBytes(std::string_view text) {
  Bytes bytes;
  while (true) {
    const size_t colon = text.find(':');
    const std::string_view part = text.substr(0, colon);
    if (part.empty() || part.size() > 2) return std::nullopt;
    int value = 0;
    for (const char c : part) {
      const int digit = HexValue(c);
      if (digit < 0) return std::nullopt;
      value = value * 16 + digit;
    }
    bytes.push_back(static_cast<uint8_t>(value));
    if (colon == std::string_view::npos) return bytes;
    text.remove_prefix(colon + 1);
  }
}

std::string ColonBytes(const Bytes& bytes, bool upper) {
  std::string text;
  for (const uint8_t byte : bytes) {
    if (!text.empty()) text += ':';
    text += HexDigit(byte >> 4, upper);
    text += HexDigit(byte, upper);
  }
  return text;
}

// "0002:c903:0042:1234": exactly four groups of four hex digits.
std::optional<uint64_t> ParseGuidText(std::string_view text) {
  if (text.size() != 19) return std::nullopt;
  uint64_t value = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i % 5 == 4) {
      if (text[i] != ':') return std::nullopt;
      continue;
    }
    const int digit = HexValue(text[i]);
    if (digit < 0) return std::nullopt;
    value = value << 4 | static_cast<uint64_t>(digit);
  }
  return value;
}

// "fe80:0000:0000:0000:b859:9fff:fe12:3456": sysfs's form of a GID, eight groups of four.
bool SysfsGidForm(std::string_view text) {
  if (text.size() != 39) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i % 5 == 4 ? text[i] != ':' : HexValue(text[i]) < 0) return false;
  }
  return true;
}

uint64_t BigEndian64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = value << 8 | bytes[i];
  return value;
}

void PutBigEndian64(uint64_t value, uint8_t* bytes) {
  for (int i = 7; i >= 0; --i) {
    bytes[i] = static_cast<uint8_t>(value);
    value >>= 8;
  }
}

// A text file's value and its line end, so that "VALUE\n" comes back "REDACTED\n".
std::pair<std::string_view, std::string_view> SplitLineEnd(std::string_view bytes) {
  size_t end = bytes.size();
  while (end > 0 && (bytes[end - 1] == '\n' || bytes[end - 1] == '\r')) --end;
  return {bytes.substr(0, end), bytes.substr(end)};
}

// The path's components: "sys/class/net/eth0/address" -> {sys, class, net, eth0, address}.
std::vector<std::string_view> Components(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    if (slash != 0) parts.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

// `path` matches `pattern` component by component, "*" matching any one.
bool Matches(const std::vector<std::string_view>& path,
             std::initializer_list<const char*> pattern) {
  if (path.size() != pattern.size()) return false;
  size_t i = 0;
  for (const char* part : pattern) {
    if (std::string_view(part) != "*" && path[i] != part) return false;
    ++i;
  }
  return true;
}

}  // namespace

std::expected<Redactor, std::string> Redactor::WithKey(std::string key) {
  if (key.size() < kMinKeyBytes) {
    return std::unexpected("the redaction key has " + std::to_string(key.size()) +
                           " bytes; at least " + std::to_string(kMinKeyBytes) +
                           " are needed (head -c 32 /dev/urandom > KEYFILE)");
  }
  return Redactor(std::move(key));
}

std::expected<Redactor, std::string> Redactor::WithRandomKey() {
  std::string key(32, '\0');
  size_t got = 0;
  while (got < key.size()) {
    const ssize_t n = getrandom(key.data() + got, key.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(std::string("getrandom: ") + std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  return Redactor(std::move(key));
}

std::string Redactor::Digest(std::string_view kind, std::string_view value) const {
  std::string input(kind);
  input += '\0';
  input += value;
  std::array<unsigned char, 32> digest{};
  gnutls_hmac_fast(GNUTLS_MAC_SHA256, key_.data(), key_.size(), input.data(), input.size(),
                   digest.data());
  return std::string(digest.begin(), digest.end());
}

std::string Redactor::Token(std::string_view kind, std::string_view value, size_t digits) const {
  const std::string digest = Digest(kind, value);
  std::string token;
  for (size_t i = 0; i < std::clamp<size_t>(digits, 1, 64); ++i) {
    const auto byte = static_cast<uint8_t>(digest[i / 2]);
    token += HexDigit(i % 2 == 0 ? byte >> 4 : byte, false);
  }
  return token;
}

std::string Redactor::Name(std::string_view kind, std::string_view value) const {
  return std::string(kind) + "-" + Token(kind, value);
}

uint64_t Redactor::Guid(uint64_t guid) const {
  std::array<uint8_t, 8> bytes{};
  PutBigEndian64(guid, bytes.data());
  const std::string digest =
      Digest("guid", std::string_view(reinterpret_cast<const char*>(bytes.data()), 8));
  const uint64_t hashed = BigEndian64(reinterpret_cast<const uint8_t*>(digest.data()));
  constexpr uint64_t kOui = 0xffffffULL << 40;
  return (guid & kOui) | (hashed & ~kOui);
}

std::string Redactor::GuidText(std::string_view text) const {
  const auto guid = ParseGuidText(text);
  if (!guid) return Name("guid", text);
  const uint64_t redacted = Guid(*guid);
  const bool upper = HasUpperHex(text);
  std::string out;
  for (int group = 0; group < 4; ++group) {
    if (group > 0) out += ':';
    for (int digit = 0; digit < 4; ++digit) {
      out += HexDigit(static_cast<int>(redacted >> (60 - 4 * (group * 4 + digit))), upper);
    }
  }
  return out;
}

namespace {

// The byte-level rules, shared by the text forms (a GID inside an IPoIB hardware address, the
// MAC inside a link-local GID).
struct ByteRules {
  const Redactor& redactor;

  // As many bytes as `in` has, from its digest (chained past 32: no address here is longer).
  Bytes Hashed(std::string_view kind, const Bytes& in) const {
    const std::string_view input(reinterpret_cast<const char*>(in.data()), in.size());
    Bytes out;
    for (size_t block = 0; out.size() < in.size(); ++block) {
      const std::string digest = redactor.Digest(
          block == 0 ? std::string(kind) : std::string(kind) + "#" + std::to_string(block), input);
      for (const char c : digest) {
        if (out.size() == in.size()) break;
        out.push_back(static_cast<uint8_t>(c));
      }
    }
    return out;
  }

  Bytes Mac(const Bytes& mac) const {
    Bytes out = mac;
    const Bytes hashed = Hashed("mac", mac);
    std::copy(hashed.begin() + 3, hashed.end(), out.begin() + 3);  // the OUI stays
    return out;
  }

  Bytes Ipv4(const Bytes& ip) const {
    if (ip == Bytes{0, 0, 0, 0} || ip[0] == 127) return ip;
    const Bytes hashed = Hashed("ipv4", ip);
    return {10, hashed[1], hashed[2], hashed[3]};
  }

  Bytes Gid(const Bytes& gid) const {
    if (std::ranges::all_of(gid, [](uint8_t b) { return b == 0; })) return gid;
    Bytes out = gid;
    const bool mapped =
        std::all_of(gid.begin(), gid.begin() + 10, [](uint8_t b) { return b == 0; }) &&
        gid[10] == 0xff && gid[11] == 0xff;
    if (mapped) {
      const Bytes ip = Ipv4(Bytes(gid.begin() + 12, gid.end()));
      std::copy(ip.begin(), ip.end(), out.begin() + 12);
      return out;
    }
    const bool link_local =
        gid[0] == 0xfe && gid[1] == 0x80 &&
        std::all_of(gid.begin() + 2, gid.begin() + 8, [](uint8_t b) { return b == 0; });
    if (link_local) {
      if (gid[11] == 0xff && gid[12] == 0xfe) {
        // EUI-64 from a MAC (RFC 4291 appendix A): the universal/local bit flipped.
        const Bytes mac =
            Mac({static_cast<uint8_t>(gid[8] ^ 2), gid[9], gid[10], gid[13], gid[14], gid[15]});
        out[8] = static_cast<uint8_t>(mac[0] ^ 2);
        out[9] = mac[1];
        out[10] = mac[2];
        out[13] = mac[3];
        out[14] = mac[4];
        out[15] = mac[5];
      } else {
        PutBigEndian64(redactor.Guid(BigEndian64(gid.data() + 8)), out.data() + 8);
      }
      return out;
    }
    const Bytes hashed = Hashed("ipv6", gid);
    out = hashed;
    out[0] = 0xfd;  // a unique local address (RFC 4193): plainly nobody's real one
    return out;
  }
};

}  // namespace

std::string Redactor::HardwareAddress(std::string_view text) const {
  const auto bytes = ParseColonBytes(text);
  if (!bytes) return Name("mac", text);
  const ByteRules rules{*this};
  Bytes out;
  if (bytes->size() == 6) {
    out = rules.Mac(*bytes);
  } else if (bytes->size() == 20) {
    // IPoIB (drivers/infiniband/ulp/ipoib): flags and QPN, then the port's GID.
    out = *bytes;
    const Bytes gid = rules.Gid(Bytes(bytes->begin() + 4, bytes->end()));
    std::copy(gid.begin(), gid.end(), out.begin() + 4);
  } else {
    out = rules.Hashed("hwaddr", *bytes);
  }
  return ColonBytes(out, HasUpperHex(text));
}

std::string Redactor::Ipv4(std::string_view text) const {
  in_addr addr{};
  if (inet_pton(AF_INET, std::string(text).c_str(), &addr) != 1) return Name("ip", text);
  Bytes bytes(4);
  std::memcpy(bytes.data(), &addr, 4);
  const Bytes out = ByteRules{*this}.Ipv4(bytes);
  char buffer[INET_ADDRSTRLEN];
  std::memcpy(&addr, out.data(), 4);
  return inet_ntop(AF_INET, &addr, buffer, sizeof buffer);
}

std::string Redactor::Gid(std::string_view text) const {
  in6_addr addr{};
  std::string plain(text);
  if (inet_pton(AF_INET6, plain.c_str(), &addr) != 1) return Name("gid", text);
  Bytes bytes(16);
  std::memcpy(bytes.data(), &addr, 16);
  const Bytes out = ByteRules{*this}.Gid(bytes);
  if (SysfsGidForm(text)) {
    std::string form;
    for (size_t i = 0; i < 16; i += 2) {
      if (i > 0) form += ':';
      for (const uint8_t byte : {out[i], out[i + 1]}) {
        form += HexDigit(byte >> 4, false);
        form += HexDigit(byte, false);
      }
    }
    return form;
  }
  std::memcpy(&addr, out.data(), 16);
  char buffer[INET6_ADDRSTRLEN];
  return inet_ntop(AF_INET6, &addr, buffer, sizeof buffer);
}

void Redactor::Ipv4Bytes(std::span<uint8_t, 4> ip) const {
  const Bytes out = ByteRules{*this}.Ipv4(Bytes(ip.begin(), ip.end()));
  std::ranges::copy(out, ip.begin());
}

void Redactor::GidBytes(std::span<uint8_t, 16> gid) const {
  const Bytes out = ByteRules{*this}.Gid(Bytes(gid.begin(), gid.end()));
  std::ranges::copy(out, gid.begin());
}

std::string Redactor::Serial(std::string_view text) const {
  std::string out(text);
  std::string digest;
  for (size_t i = 0; i < out.size(); ++i) {
    if (i % 32 == 0) digest = Digest("serial#" + std::to_string(i / 32), text);
    const auto byte = static_cast<uint8_t>(digest[i % 32]);
    const char c = out[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      out[i] = static_cast<char>('0' + byte % 10);
    } else if (std::isupper(static_cast<unsigned char>(c))) {
      out[i] = static_cast<char>('A' + byte % 26);
    } else if (std::islower(static_cast<unsigned char>(c))) {
      out[i] = static_cast<char>('a' + byte % 26);
    }
  }
  return out;
}

namespace {

// Container ids (64 hex digits) and pod UIDs (8-4-4-4-12 hex, '-' or '_' between: the systemd
// cgroup driver writes '_') in a cgroup path, each hashed into the same shape.
std::string RedactCgroup(const Redactor& redactor, std::string_view text) {
  std::string out;
  size_t i = 0;
  const auto hex_run = [&](size_t from) {
    size_t end = from;
    while (end < text.size() && HexValue(text[end]) >= 0 && !(text[end] >= 'A' && text[end] <= 'F'))
      ++end;
    return end - from;
  };
  while (i < text.size()) {
    const bool boundary = i == 0 || HexValue(text[i - 1]) < 0;
    if (boundary && hex_run(i) == 64 && (i + 64 == text.size() || HexValue(text[i + 64]) < 0)) {
      out += redactor.Token("container", text.substr(i, 64), 64);
      i += 64;
      continue;
    }
    // A UUID: 8-4-4-4-12, one separator kind throughout; a hex letter may come before it
    // ("pod1b2c...": the d of "pod"), the shape itself marks where it starts.
    if (i + 36 <= text.size() && (text[i + 8] == '-' || text[i + 8] == '_')) {
      const char sep = text[i + 8];
      bool uuid = true;
      for (size_t k = 0; k < 36 && uuid; ++k) {
        const bool dash = k == 8 || k == 13 || k == 18 || k == 23;
        uuid = dash ? text[i + k] == sep
                    : HexValue(text[i + k]) >= 0 && !(text[i + k] >= 'A' && text[i + k] <= 'F');
      }
      if (uuid && (i + 36 == text.size() || HexValue(text[i + 36]) < 0)) {
        std::string token = redactor.Token("pod", text.substr(i, 36), 32);
        for (const size_t at : {8, 13, 18, 23}) token.insert(at, 1, sep);
        out += token;
        i += 36;
        continue;
      }
    }
    out += text[i++];
  }
  return out;
}

}  // namespace

std::string CgroupIds(const Redactor& redactor, std::string_view text) {
  return RedactCgroup(redactor, text);
}

std::string WorkloadLabel(const Redactor& redactor, std::string_view label,
                          std::string_view value) {
  if (value.empty()) return "";
  if (label == "pod_uid" || label == "container_id") {
    std::string hashed = RedactCgroup(redactor, value);
    // No id of the shapes the cgroup rules know (a runtime with other ids): hashed whole,
    // never kept.
    return hashed != value ? hashed : redactor.Name(label, value);
  }
  if (label == "slurm_job_id" || label == "slurm_step_id") return redactor.Serial(value);
  if (label == "systemd_unit") {
    // The unit's type ("service", "scope") says how it runs, not whose it is.
    const size_t dot = value.rfind('.');
    const bool typed = dot != std::string_view::npos && dot > 0 && value.size() - dot <= 10;
    return redactor.Name("unit", typed ? value.substr(0, dot) : value) +
           std::string(typed ? value.substr(dot) : "");
  }
  return redactor.Name(label, value);
}

namespace {

bool IsIpv4(std::string_view word) {
  in_addr addr{};
  return inet_pton(AF_INET, std::string(word).c_str(), &addr) == 1;
}

// Labels of letters, digits and '-', at least two, the last of letters only ("node17.example.com";
// not "libibverbs.so.1", "3.5").
bool IsDnsName(std::string_view word) {
  size_t labels = 0;
  std::string_view last;
  while (true) {
    const size_t dot = word.find('.');
    const std::string_view label = word.substr(0, dot);
    if (label.empty() || label.size() > 63) return false;
    for (const char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    }
    ++labels;
    last = label;
    if (dot == std::string_view::npos) break;
    word.remove_prefix(dot + 1);
  }
  return labels >= 2 && std::all_of(last.begin(), last.end(), [](char c) {
           return std::isalpha(static_cast<unsigned char>(c));
         });
}

std::string FreeWord(const Redactor& redactor, std::string_view word) {
  if (word.find('/') != std::string_view::npos) {
    const size_t slash = word.rfind('/');
    const std::string_view file = word.substr(slash + 1);
    const bool library = file.starts_with("lib") && file.find(".so") != std::string_view::npos;
    if (!library) return redactor.Name("path", word);
    return redactor.Name("path", word.substr(0, slash)) + "/" + std::string(file);
  }
  if (IsIpv4(word)) return redactor.Ipv4(word);
  if (const size_t colon = word.rfind(':');
      colon != std::string_view::npos && IsIpv4(word.substr(0, colon))) {
    return redactor.Ipv4(word.substr(0, colon)) + std::string(word.substr(colon));
  }
  if (word.find(':') != std::string_view::npos) {
    in6_addr addr{};
    if (inet_pton(AF_INET6, std::string(word).c_str(), &addr) == 1) return redactor.Gid(word);
  }
  if (IsDnsName(word)) return redactor.Name("host", word);
  return std::string(word);
}

}  // namespace

std::string FreeText(const Redactor& redactor, std::string_view text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = std::min(text.find_first_of(" \t\n\r\"'()[]{},;=<>", i), text.size());
    if (end == i) {
      out += text[i++];
      continue;
    }
    std::string_view word = text.substr(i, end - i);
    i = end;
    // Punctuation after a word ("/x/y: not found", "... at node17.example.com.") stays.
    size_t kept = word.size();
    while (kept > 0 && (word[kept - 1] == ':' || word[kept - 1] == '.')) --kept;
    out += FreeWord(redactor, word.substr(0, kept));
    out += word.substr(kept);
  }
  return out;
}

std::string RedactFile(const Redactor& redactor, std::string_view path, std::string_view bytes) {
  const auto parts = Components(path);
  const auto [value, line_end] = SplitLineEnd(bytes);
  const auto whole = [&](std::string redacted) { return redacted + std::string(line_end); };
  if (Matches(parts, {"sys", "class", "infiniband", "*", "node_guid"}) ||
      Matches(parts, {"sys", "class", "infiniband", "*", "sys_image_guid"})) {
    return whole(redactor.GuidText(value));
  }
  if (Matches(parts, {"sys", "class", "infiniband", "*", "ports", "*", "gids", "*"})) {
    return whole(redactor.Gid(value));
  }
  if (Matches(parts, {"sys", "class", "infiniband", "*", "node_desc"})) {
    // rdma-ndd and mlx5 write "HOSTNAME DEVICE" (or the HCA's model when no daemon set it):
    // the first word is a host name only when a second follows, as rdma-ndd writes it.
    const size_t space = value.find(' ');
    if (space == std::string_view::npos) return std::string(bytes);
    return whole(redactor.Name("host", value.substr(0, space)) + std::string(value.substr(space)));
  }
  if (Matches(parts, {"sys", "class", "net", "*", "address"}) ||
      Matches(parts, {"sys", "class", "net", "*", "perm_addr"})) {
    return whole(redactor.HardwareAddress(value));
  }
  if (Matches(parts, {"proc", "sys", "kernel", "hostname"}) ||
      Matches(parts, {"proc", "sys", "kernel", "domainname"})) {
    return whole(redactor.Name("host", value));
  }
  if (Matches(parts, {"proc", "*", "cgroup"}) ||
      Matches(parts, {"proc", "*", "task", "*", "cgroup"})) {
    return RedactCgroup(redactor, bytes);
  }
  return std::string(bytes);
}

}  // namespace rdmascope::redact
