// `rdmascope capture --redact` (issue 39, docs/capture.md "Redaction"): what identifies a host
// or its network in a capture (host names, GUIDs, MAC and IP addresses, GIDs, serial numbers,
// container and pod ids) is replaced by a keyed hash of it, in the value's own shape: a GUID
// stays a GUID, a GID a GID of the same kind, an address an address. So every parser reads a
// redacted capture as it reads the host's, and a replay of it finds what the host would give.
//
// Keyed: HMAC-SHA256 under a key the user keeps (`--redact.key-file`), so that one value hashes
// the same in every capture of a fleet made with that key (a GID seen from two hosts, the same
// switch) and nobody without the key can test a guess (an IPv4 address is only 2^32 guesses).
// Without a key file each capture draws its own key, consistent within that capture only.
//
// What stays: the vendor part of identifiers (the OUI of a GUID or MAC: the vendor is what a
// support case needs, not a secret), the kind of a GID (IPv4-mapped, link-local, the all-zero
// slot), loopback and unspecified addresses, and the length and case of everything.
#pragma once

#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>

namespace rdmascope::redact {

class Redactor {
 public:
  // `key`: any bytes, at least 16 (a shorter key is a guessable one).
  static std::expected<Redactor, std::string> WithKey(std::string key);
  // 32 bytes from getrandom(2).
  static std::expected<Redactor, std::string> WithRandomKey();

  // HMAC-SHA256(key, kind NUL value): 32 bytes. `kind` separates the families, so that a host
  // name and a pod name that are equal do not hash alike.
  std::string Digest(std::string_view kind, std::string_view value) const;
  // The first `digits` (1..64) lowercase hex digits of Digest.
  std::string Token(std::string_view kind, std::string_view value, size_t digits = 10) const;

  // A name (`kind`-TOKEN, e.g. "host-3f9a2c1b07"): a valid host name, pod or container name.
  std::string Name(std::string_view kind, std::string_view value) const;
  // An EUI-64 with its OUI (top 24 bits) kept, the other 40 hashed.
  uint64_t Guid(uint64_t guid) const;
  // "0002:c903:0042:1234" (sysfs node_guid) in the same form; other text: Name("guid", text).
  std::string GuidText(std::string_view text) const;
  // A hardware address "aa:bb:..." of any length, lowercase or uppercase as given: a 6-byte MAC
  // keeps its OUI; a 20-byte IPoIB address its flags and QPN (4 bytes) and its GID as Gid
  // redacts it; other lengths are hashed whole. Text that is not one: Name("mac", text).
  std::string HardwareAddress(std::string_view text) const;
  // An IPv4 address in 10.0.0.0/8 (the host part of a private range: plainly not a real one);
  // 0.0.0.0 and 127.0.0.0/8 kept. Text that is not one: Name("ip", text).
  std::string Ipv4(std::string_view text) const;
  // A GID or IPv6 address: all zero kept; IPv4-mapped (::ffff:a.b.c.d) maps its IPv4 as Ipv4;
  // link-local fe80::/64 keeps its prefix and maps its interface id as the MAC it was made from
  // (EUI-64 with ff:fe) or as the GUID it is (InfiniBand); any other becomes a ULA (fd00::/8)
  // with 120 hashed bits. Written as it came: sysfs's eight groups of four digits, or the
  // shortest form (RFC 5952) for any other text. Text that is not one: Name("gid", text).
  std::string Gid(std::string_view text) const;
  // A serial number: the same length, letters and digits where it had them.
  std::string Serial(std::string_view text) const;
  // Ipv4 and Gid on the raw bytes (network order) of a binary reply, in place.
  void Ipv4Bytes(std::span<uint8_t, 4> ip) const;
  void GidBytes(std::span<uint8_t, 16> gid) const;

 private:
  explicit Redactor(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

// Container ids (64 lowercase hex digits) and pod UIDs (8-4-4-4-12, '-' or '_') anywhere in
// `text`, each hashed into the same shape, as proc/*/cgroup's are: the id a container runtime
// or a debug answer gives hashes alike to the one in the cgroup path, so lookups still match.
std::string CgroupIds(const Redactor& redactor, std::string_view text);

// One value of a workload label (rdma_process_workload_info's, the container runtime's and the
// kubelet's names): what identifies a tenant's workload, hashed in a shape the label still
// takes, alike wherever the capture holds it (grpc/*.json, exporter/debug/*.json):
//   namespace, pod, container    -> Name(label, value): "pod-3f9a2c1b07"
//   pod_uid, container_id        -> CgroupIds (a value with no id in it: Name(label, value))
//   slurm_job_id, slurm_step_id  -> Serial: digits stay digits, same length
//   systemd_unit                 -> "unit-TOKEN" with the unit's type suffix kept (".service")
//   any other label              -> Name(label, value)
// An empty value stays empty (a label without a value is left out, not made up).
std::string WorkloadLabel(const Redactor& redactor, std::string_view label, std::string_view value);

// Free text that may carry paths, addresses and host names (an error message, a module path,
// a reason a stack has no symbols), word by word:
//   a word with a '/'          Name("path", word), keeping a shared library's file name
//                              (".../libibverbs.so.1" -> "path-TOKEN/libibverbs.so.1"): which
//                              library is what a support case needs
//   an IPv4 address (":port")  Ipv4, the port kept
//   an IPv6 address            Gid
//   a DNS name (a.b.tld)       Name("host", word)
// other words stay; trailing ':' and '.' stay punctuation.
std::string FreeText(const Redactor& redactor, std::string_view text);

// One file of a capture (its path in a sample, "sys/class/infiniband/mlx5_0/node_guid"), its
// bytes as redacted: the rules of docs/capture.md "Redaction" by path. Files no rule names come
// back as they are.
std::string RedactFile(const Redactor& redactor, std::string_view path, std::string_view bytes);

}  // namespace rdmascope::redact
