// --web.config.file: exporter-toolkit's format, parsed strictly (web/web_config.h), and basic
// auth against its bcrypt hashes (web/basic_auth.h).
#include "web/web_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "cli/serve_flags.h"
#include "web/basic_auth.h"
#include "web/client_cert.h"
#include "web/go_decode.h"

namespace rdmascope::web {
namespace {

const std::filesystem::path kCerts = std::filesystem::path(RDMASCOPE_FIXTURES) / "web";

// bcrypt of "secret" at cost 4 (the minimum: keeps the tests fast).
constexpr char kSecretHash[] = "$2b$04$gzNiwl/0J/QZFXK4QTrkQeyszaFLw8sVUhzUoTeq2/GDAJjdOfEVm";

std::map<std::string, std::string> Users() { return {{"alice", kSecretHash}}; }

std::expected<WebConfig, std::string> Parse(const std::string& yaml) {
  return ParseWebConfig(yaml, kCerts);
}

std::string Tls(const std::string& extra = "") {
  return "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n" + extra;
}

std::string ErrorOf(const std::string& yaml) {
  const auto config = Parse(yaml);
  return config ? std::string("(accepted)") : config.error();
}

TEST(WebConfig, EmptyFileIsPlainHttpWithoutAuth) {
  const auto config = Parse("");
  ASSERT_TRUE(config) << config.error();
  EXPECT_FALSE(config->tls.enabled);
  EXPECT_TRUE(config->basic_auth_users.empty());
  EXPECT_TRUE(config->headers.empty());
}

TEST(WebConfig, TlsDefaultsAreThoseOfExporterToolkit) {
  const auto config = Parse(Tls());
  ASSERT_TRUE(config) << config.error();
  EXPECT_TRUE(config->tls.enabled);
  EXPECT_EQ(config->tls.min_version, TlsVersion::kTls12);
  EXPECT_EQ(config->tls.max_version, TlsVersion::kTls13);
  EXPECT_EQ(config->tls.client_auth, ClientAuth::kNoClientCert);
  EXPECT_TRUE(config->tls.prefer_server_cipher_suites);
  // Relative paths are resolved against the file's directory, not the working directory.
  EXPECT_EQ(config->tls.cert_file, kCerts / "server.crt");
  EXPECT_NE(config->tls.cert_pem.find("BEGIN CERTIFICATE"), std::string::npos);
}

TEST(WebConfig, LoadResolvesPathsAgainstTheFilesDirectory) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("web_config_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kCerts / "server.crt", dir / "server.crt",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(kCerts / "server.key", dir / "server.key",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "web.yml") << Tls();
  const auto config = LoadWebConfig(dir / "web.yml");
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->tls.key_file, dir / "server.key");
}

TEST(WebConfig, UnknownKeysAreErrorsNamingTheKey) {
  EXPECT_NE(ErrorOf("tls_server_config:\n  cert_filse: x\n").find("cert_filse"), std::string::npos);
  EXPECT_NE(ErrorOf("basic_auth: {}\n").find("basic_auth"), std::string::npos);
  EXPECT_NE(ErrorOf("http_server_config:\n  header: {}\n").find("header"), std::string::npos);
  EXPECT_NE(ErrorOf("just a string\n").find("mapping"), std::string::npos);
  EXPECT_NE(ErrorOf(Tls("  cert_file: server.crt\n")).find("already set"), std::string::npos);
  EXPECT_FALSE(Parse("tls_server_config: [\n"));  // a YAML syntax error
}

TEST(WebConfig, BadValuesAreErrors) {
  EXPECT_NE(ErrorOf(Tls("  min_version: TLS111\n")).find("unknown TLS version: TLS111"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Tls("  client_auth_type: Sometimes\n")).find("client_auth_type"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Tls("  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n")).find("unknown cipher"),
            std::string::npos);  // insecure suites are refused, as by exporter-toolkit
  EXPECT_NE(ErrorOf(Tls("  curve_preferences: [CurveP257]\n")).find("unknown curve"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Tls("  prefer_server_cipher_suites: maybe\n")).find("true or false"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Tls("  cipher_suites: TLS_AES_128_GCM_SHA256\n")).find("must be a list"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Tls("  min_version: TLS13\n  max_version: TLS12\n")).find("above"),
            std::string::npos);
}

TEST(WebConfig, TlsFilesAreChecked) {
  // exporter-toolkit's validateTLSPaths words, now that a file or inline PEM will do.
  EXPECT_EQ(ErrorOf("tls_server_config:\n  key_file: server.key\n"),
            "tls_server_config: missing one of cert or cert_file");
  EXPECT_EQ(ErrorOf("tls_server_config:\n  cert_file: server.crt\n"),
            "tls_server_config: missing one of key or key_file");
  EXPECT_NE(ErrorOf("tls_server_config:\n  cert_file: nofile\n  key_file: server.key\n")
                .find("cannot read"),
            std::string::npos);
  // The key is not the certificate's (tls.LoadX509KeyPair refuses that too).
  EXPECT_NE(ErrorOf("tls_server_config:\n  cert_file: server.crt\n  key_file: other.key\n")
                .find("key pair"),
            std::string::npos);
  // A key where the CA list should be: no certificate in it.
  EXPECT_NE(ErrorOf(Tls("  client_auth_type: RequireAndVerifyClientCert\n"
                        "  client_ca_file: server.key\n"))
                .find("no PEM certificate"),
            std::string::npos);
  // Missing cert_file is reported before a bad client_auth_type, as ConfigToTLSConfig does.
  EXPECT_NE(ErrorOf("tls_server_config:\n  client_auth_type: x\n")
                .find("missing one of cert or cert_file"),
            std::string::npos);
}

std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// `key: |` followed by the text, indented under tls_server_config.
std::string Inline(const std::string& key, const std::string& pem) {
  std::string out = "  " + key + ": |\n";
  for (size_t at = 0; at < pem.size();) {
    const size_t end = std::min(pem.find('\n', at), pem.size());
    out += "    " + pem.substr(at, end - at) + "\n";
    at = end + 1;
  }
  return out;
}

TEST(WebConfig, InlineCertAndKeyAreWhatTlsUses) {
  const std::string cert = ReadText(kCerts / "server.crt"), key = ReadText(kCerts / "server.key");
  const auto config = Parse("tls_server_config:\n" + Inline("cert", cert) + Inline("key", key));
  ASSERT_TRUE(config) << config.error();
  EXPECT_TRUE(config->tls.enabled);
  EXPECT_TRUE(config->tls.cert_file.empty());
  EXPECT_EQ(config->tls.cert_pem, cert);  // what server.cc hands to libmicrohttpd
  EXPECT_EQ(config->tls.key_pem, key);
  EXPECT_TRUE(config->notes.empty());
  // Mixed, as exporter-toolkit's tls_config_noAuth.requireanyclientcertkeyinline.good.yml.
  const auto mixed = Parse("tls_server_config:\n  cert_file: server.crt\n" + Inline("key", key));
  ASSERT_TRUE(mixed) << mixed.error();
  EXPECT_EQ(mixed->tls.cert_pem, cert);
  EXPECT_EQ(mixed->tls.key_pem, key);
}

TEST(WebConfig, AFileWinsOverInlineTextAndTheNoteSaysSo) {
  // exporter-toolkit reads cert_file when both are set: the inline text (here a key, which
  // would not load as a certificate) is ignored, not an error.
  const std::string key = ReadText(kCerts / "server.key");
  const auto config = Parse(Tls(Inline("cert", key) + Inline("key", "not a key")));
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->tls.cert_pem, ReadText(kCerts / "server.crt"));
  ASSERT_EQ(config->notes.size(), 2u);
  EXPECT_EQ(config->notes[0],
            "tls_server_config.cert is ignored: cert_file is set and wins (as in "
            "exporter-toolkit)");
  EXPECT_NE(config->notes[1].find("tls_server_config.key is ignored: key_file"), std::string::npos);
}

TEST(WebConfig, BadInlineMaterialIsAnErrorThatNeverShowsTheKey) {
  const std::string cert = ReadText(kCerts / "server.crt");
  const std::string other_key = ReadText(kCerts / "other.key");
  const std::string error =
      ErrorOf("tls_server_config:\n" + Inline("cert", cert) + Inline("key", other_key));
  EXPECT_EQ(
      error.rfind("tls_server_config: failed to load the key pair (inline cert, inline key)", 0),
      0u)
      << error;
  EXPECT_EQ(error.find("PRIVATE KEY"), std::string::npos);
  EXPECT_EQ(error.find(other_key.substr(40, 20)), std::string::npos);
  EXPECT_NE(ErrorOf("tls_server_config:\n  cert: garbage\n  key_file: server.key\n")
                .find("failed to load the key pair (inline cert, "),
            std::string::npos);
  // An empty inline value is no value (Go compares with ""): cert_empty/key_empty fixtures.
  EXPECT_EQ(ErrorOf("tls_server_config:\n  cert: \"\"\n  key_file: server.key\n"),
            "tls_server_config: missing one of cert or cert_file");
  EXPECT_EQ(ErrorOf("tls_server_config:\n  cert_file: server.crt\n  key: \"\"\n"),
            "tls_server_config: missing one of key or key_file");
  // client_ca alone turns TLS on (TLSConfig.IsEnabled), and then a certificate is missing.
  EXPECT_EQ(ErrorOf("tls_server_config:\n" + Inline("client_ca", cert)),
            "tls_server_config: missing one of cert or cert_file");
  EXPECT_NE(ErrorOf("tls_server_config:\n  cert: [a]\n").find("cert must be a string"),
            std::string::npos);
}

TEST(WebConfig, InlineClientCa) {
  const std::string ca = ReadText(kCerts / "server.crt");  // any certificate will do as a CA
  const auto config =
      Parse(Tls("  client_auth_type: RequireAndVerifyClientCert\n" + Inline("client_ca", ca)));
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->tls.client_ca_pem, ca);  // what server.cc trusts for client certificates
  EXPECT_EQ(ErrorOf(Tls(Inline("client_ca", ca))),
            "tls_server_config: client_ca is set without a client_auth_type (Client CA's have "
            "been configured without a Client Auth Policy)");
  EXPECT_EQ(ErrorOf(Tls("  client_auth_type: RequireAndVerifyClientCert\n  client_ca: junk\n"))
                .rfind("client_ca: no PEM certificate in inline client_ca", 0),
            0u);
  // client_ca_file wins over client_ca, as for cert and key.
  const auto both =
      Parse(Tls("  client_auth_type: RequireAndVerifyClientCert\n"
                "  client_ca_file: server.crt\n  client_ca: junk\n"));
  ASSERT_TRUE(both) << both.error();
  EXPECT_EQ(both->tls.client_ca_pem, ca);
  ASSERT_EQ(both->notes.size(), 1u);
  EXPECT_NE(both->notes[0].find("client_ca is ignored: client_ca_file"), std::string::npos);
}

TEST(WebConfig, FingerprintCoversInlineMaterial) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("web_config_fp_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cert = ReadText(kCerts / "server.crt"), key = ReadText(kCerts / "server.key");
  std::ofstream(dir / "web.yml") << "tls_server_config:\n" + Inline("cert", cert) +
                                        Inline("key", key);
  const auto config = LoadWebConfig(dir / "web.yml");
  ASSERT_TRUE(config) << config.error();
  const std::string before = Fingerprint(dir / "web.yml", *config);
  // A rotated inline key of the same length: only the bytes differ.
  std::string rotated = key;
  rotated[40] = rotated[40] == 'A' ? 'B' : 'A';
  std::ofstream(dir / "web.yml") << "tls_server_config:\n" + Inline("cert", cert) +
                                        Inline("key", rotated);
  const std::string after = Fingerprint(dir / "web.yml", *config);
  std::filesystem::remove_all(dir);
  EXPECT_NE(before, after);
}

TEST(WebConfig, RateLimitAsExporterToolkitDecodesIt) {
  const auto config = Parse("rate_limit:\n  interval: 1s\n  burst: 5\n");
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->rate_limit.interval_ns, 1000000000);
  EXPECT_EQ(config->rate_limit.burst, 5);
  EXPECT_TRUE(config->rate_limit.limits());
  EXPECT_TRUE(config->notes.empty());
  EXPECT_FALSE(Parse("")->rate_limit.limits());
  EXPECT_FALSE(Parse("rate_limit:\n")->rate_limit.limits());
  // yaml.v2 into time.Duration: text through time.ParseDuration, quoted or not; a plain
  // number is nanoseconds, a float truncated.
  const std::pair<const char*, int64_t> intervals[] = {
      {"1m30s", 90000000000},
      {"'250ms'", 250000000},
      {"\"1.5h\"", 5400000000000},
      {"1", 1},
      {"1.9", 1},
      {"0", 0},
      {"~", 0},
      {"1_000", 1000},
      {"0x10", 16},
      {"-1s", -1000000000},
      {"2us", 2000},
      {"1e3", 1000},
  };
  for (const auto& [text, ns] : intervals) {
    const auto parsed = Parse("rate_limit:\n  interval: " + std::string(text) + "\n");
    ASSERT_TRUE(parsed) << text << ": " << parsed.error();
    EXPECT_EQ(parsed->rate_limit.interval_ns, ns) << text;
  }
  // yaml.v2 into int: a plain number only, a float truncated toward zero.
  const std::pair<const char*, int64_t> bursts[] = {
      {"10", 10}, {"2.9", 2}, {"-3", -3}, {"0o17", 15}, {"017", 15}, {"+4", 4}, {"null", 0}};
  for (const auto& [text, burst] : bursts) {
    const auto parsed = Parse("rate_limit:\n  interval: 1s\n  burst: " + std::string(text) + "\n");
    ASSERT_TRUE(parsed) << text << ": " << parsed.error();
    EXPECT_EQ(parsed->rate_limit.burst, burst) << text;
  }
}

TEST(WebConfig, RateLimitErrorsNameTheKeyAndGosReason) {
  const auto error = [](const std::string& body) { return ErrorOf("rate_limit:\n" + body); };
  EXPECT_EQ(error("  interval: 1d\n"),
            "line 2: rate_limit.interval: cannot unmarshal !!str `1d` into time.Duration "
            "(time: unknown unit \"d\" in duration \"1d\")");
  EXPECT_EQ(error("  interval: '10'\n"),
            "line 2: rate_limit.interval: cannot unmarshal !!str `10` into time.Duration "
            "(time: missing unit in duration \"10\")");
  EXPECT_NE(error("  interval: soon\n").find("time: invalid duration \"soon\""), std::string::npos);
  EXPECT_NE(error("  interval: .inf\n").find("cannot unmarshal !!float `.inf`"), std::string::npos);
  EXPECT_NE(error("  interval: [1s]\n").find("rate_limit.interval must be a duration"),
            std::string::npos);
  EXPECT_EQ(error("  burst: '5'\n"),
            "line 2: rate_limit.burst: cannot unmarshal !!str `5` into int");
  EXPECT_NE(error("  burst: true\n").find("cannot unmarshal !!bool `true` into int"),
            std::string::npos);
  EXPECT_NE(error("  burst: 18446744073709551615\n").find("cannot unmarshal !!int"),
            std::string::npos);
  EXPECT_NE(error("  burst: 1e30\n").find("cannot unmarshal !!float"), std::string::npos);
  EXPECT_NE(error("  rate: 3\n").find("field rate not found in rate_limit"), std::string::npos);
  EXPECT_NE(error("  burst: 1\n  burst: 2\n").find("already set"), std::string::npos);
  EXPECT_NE(ErrorOf("rate_limit: 5\n").find("rate_limit must be a mapping"), std::string::npos);
}

TEST(WebConfig, RateLimitValuesWithSurprisingEffectsAreNoted) {
  // exporter-toolkit's own fixture web_config_rate_limiter_one_second.yaml: burst 0 refuses all.
  const auto none = Parse("rate_limit:\n  interval: \"1s\"\n  burst: 0\n");
  ASSERT_TRUE(none) << none.error();
  EXPECT_TRUE(none->rate_limit.limits());
  ASSERT_EQ(none->notes.size(), 1u);
  EXPECT_NE(none->notes[0].find("every request is refused with 429"), std::string::npos);
  const auto negative = Parse("rate_limit:\n  interval: -1s\n  burst: 3\n");
  ASSERT_TRUE(negative) << negative.error();
  EXPECT_FALSE(negative->rate_limit.limits());
  ASSERT_EQ(negative->notes.size(), 1u);
  EXPECT_NE(negative->notes[0].find("every request passes"), std::string::npos);
  const auto off = Parse("rate_limit:\n  interval: 0\n  burst: 3\n");
  ASSERT_TRUE(off) << off.error();
  EXPECT_FALSE(off->rate_limit.limits());
  ASSERT_EQ(off->notes.size(), 1u);
  EXPECT_NE(off->notes[0].find("rate_limit.burst has no effect"), std::string::npos);
}

TEST(GoDuration, AsTimeParseDuration) {
  const std::pair<const char*, int64_t> good[] = {
      {"0", 0},
      {"+0", 0},
      {"-0", 0},
      {"1ns", 1},
      {"1.5h", 5400000000000},
      {"-2m30s", -150000000000},
      {"1h30m", 5400000000000},
      {".5s", 500000000},
      {"1.s", 1000000000},
      {"1\u00b5s", 1000},
      {"1\u03bcs", 1000},
      {"1.0000000001s", 1000000000},  // under a nanosecond is dropped
      {"9223372036854775807ns", INT64_MAX},
      {"-9223372036854775808ns", INT64_MIN},
      {"2562047h", int64_t{2562047} * 3600 * 1000000000},
  };
  for (const auto& [text, ns] : good) {
    const auto parsed = ParseGoDuration(text);
    ASSERT_TRUE(parsed) << text << ": " << parsed.error();
    EXPECT_EQ(*parsed, ns) << text;
  }
  const std::pair<const char*, const char*> bad[] = {
      {"", "time: invalid duration \"\""},
      {"s", "time: invalid duration \"s\""},
      {".s", "time: invalid duration \".s\""},
      {"1", "time: missing unit in duration \"1\""},
      {"1d", "time: unknown unit \"d\" in duration \"1d\""},
      {"1sec", "time: unknown unit \"sec\" in duration \"1sec\""},
      {"9223372036854775808ns", "time: invalid duration \"9223372036854775808ns\""},
      {"2562048h", "time: invalid duration \"2562048h\""},
      {"1s-1s", "time: unknown unit \"s-\" in duration \"1s-1s\""},
  };
  for (const auto& [text, message] : bad) {
    const auto parsed = ParseGoDuration(text);
    ASSERT_FALSE(parsed) << text;
    EXPECT_EQ(parsed.error(), message);
  }
}

TEST(WebConfig, ClientAuthTypes) {
  const std::pair<const char*, ClientAuth> cases[] = {
      {"NoClientCert", ClientAuth::kNoClientCert},
      {"RequestClientCert", ClientAuth::kRequestClientCert},
      {"RequireAnyClientCert", ClientAuth::kRequireAnyClientCert},
      {"RequireClientCert", ClientAuth::kRequireAnyClientCert},
      {"VerifyClientCertIfGiven", ClientAuth::kVerifyClientCertIfGiven},
      {"RequireAndVerifyClientCert", ClientAuth::kRequireAndVerifyClientCert},
  };
  for (const auto& [name, expected] : cases) {
    const auto config = Parse(Tls("  client_auth_type: " + std::string(name) + "\n"));
    ASSERT_TRUE(config) << name << ": " << config.error();
    EXPECT_EQ(config->tls.client_auth, expected) << name;
  }
  const auto with_ca =
      Parse(Tls("  client_auth_type: RequireAndVerifyClientCert\n"
                "  client_ca_file: server.crt\n"
                "  client_allowed_sans: [client.example, 10.0.0.1]\n"));
  ASSERT_TRUE(with_ca) << with_ca.error();
  EXPECT_EQ(with_ca->tls.client_allowed_sans,
            (std::vector<std::string>{"client.example", "10.0.0.1"}));
  // A CA without a policy is a mistake exporter-toolkit refuses.
  EXPECT_NE(ErrorOf(Tls("  client_ca_file: server.crt\n")).find("Client Auth Policy"),
            std::string::npos);
}

// exporter-toolkit (web/tls_config.go) accepts allowed SANs without a client_auth_type and
// ignores them (no certificate is asked for): accepted too, with a note that says so. A null
// list is unset (Go's nil slice); [] is set and matches nothing (Go refuses every client).
TEST(WebConfig, ClientAllowedSansAsExporterToolkit) {
  const auto ignored = Parse(Tls("  client_allowed_sans: [a]\n"));
  ASSERT_TRUE(ignored) << ignored.error();
  ASSERT_EQ(ignored->notes.size(), 1u);
  EXPECT_NE(ignored->notes[0].find("client_allowed_sans has no effect"), std::string::npos);
  const auto null =
      Parse(Tls("  client_auth_type: RequireAnyClientCert\n"
                "  client_allowed_sans:\n"));
  ASSERT_TRUE(null) << null.error();
  EXPECT_FALSE(null->tls.client_allowed_sans.has_value());
  const auto empty =
      Parse(Tls("  client_auth_type: RequestClientCert\n"
                "  client_allowed_sans: []\n"));
  ASSERT_TRUE(empty) << empty.error();
  EXPECT_EQ(empty->tls.client_allowed_sans, std::vector<std::string>{});
  EXPECT_TRUE(empty->notes.empty());
}

TEST(WebConfig, GnutlsPrioritiesFollowVersionsCiphersAndCurves) {
  auto config = Parse(Tls());
  ASSERT_TRUE(config) << config.error();
  auto priorities = GnutlsPriorities(config->tls);
  ASSERT_TRUE(priorities) << priorities.error();
  EXPECT_EQ(*priorities, "NORMAL:%SERVER_PRECEDENCE:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2");

  config =
      Parse(Tls("  min_version: TLS10\n  max_version: TLS12\n"
                "  prefer_server_cipher_suites: false\n"
                "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, "
                "TLS_RSA_WITH_AES_128_CBC_SHA]\n"
                "  curve_preferences: [X25519, CurveP256]\n"));
  ASSERT_TRUE(config) << config.error();
  priorities = GnutlsPriorities(config->tls);
  ASSERT_TRUE(priorities) << priorities.error();
  EXPECT_EQ(*priorities,
            "NORMAL:-VERS-ALL:+VERS-TLS1.2:+VERS-TLS1.1:+VERS-TLS1.0"
            ":-KX-ALL:+ECDHE-RSA:+RSA:-CIPHER-ALL:+AES-128-GCM:+AES-128-CBC"
            ":-MAC-ALL:+AEAD:+SHA1:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1");
}

TEST(WebConfig, EveryGoCipherSuiteMapsToGnutls) {
  // Go's tls.CipherSuites() as exporter-toolkit's web_config_noAuth_allCiphers.good.yml lists.
  const char* yaml_list =
      "[TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, "
      "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, "
      "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, "
      "TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256, "
      "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, "
      "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, "
      "TLS_RSA_WITH_AES_128_CBC_SHA, TLS_RSA_WITH_AES_256_CBC_SHA, "
      "TLS_RSA_WITH_AES_128_GCM_SHA256, TLS_RSA_WITH_AES_256_GCM_SHA384]";
  const auto config = Parse(Tls("  cipher_suites: " + std::string(yaml_list) + "\n"));
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->tls.cipher_suites.size(), 17u);
}

TEST(WebConfig, HeadersAreThoseExporterToolkitAllows) {
  const auto config = Parse(
      "http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
      "    Content-Security-Policy: \"default-src 'self'\"\n");
  ASSERT_TRUE(config) << config.error();
  ASSERT_EQ(config->headers.size(), 2u);
  EXPECT_EQ(config->headers[0].first, "X-Frame-Options");
  EXPECT_EQ(config->headers[1].second, "default-src 'self'");
  EXPECT_NE(ErrorOf("http_server_config:\n  headers:\n    Content-Type: text/html\n")
                .find("can not be configured"),
            std::string::npos);
  EXPECT_NE(ErrorOf("http_server_config:\n  headers:\n    X-Frame-Options: foo\n")
                .find("invalid value for X-Frame-Options"),
            std::string::npos);
}

TEST(WebConfig, Http2IsAcceptedAndNoted) {
  const auto config = Parse("http_server_config:\n  http2: false\n");
  ASSERT_TRUE(config) << config.error();
  ASSERT_EQ(config->notes.size(), 1u);
  EXPECT_NE(config->notes[0].find("http2"), std::string::npos);
}

TEST(WebConfig, UsersNeedBcryptHashesAndTheErrorDoesNotShowThem) {
  const auto config = Parse("basic_auth_users:\n  alice: '" + std::string(kSecretHash) + "'\n");
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->basic_auth_users.at("alice"), kSecretHash);
  const std::string error = ErrorOf("basic_auth_users:\n  john: doe-secret-value\n");
  EXPECT_NE(error.find("basic_auth_users.john"), std::string::npos);
  EXPECT_EQ(error.find("doe-secret-value"), std::string::npos);
}

TEST(WebConfig, BcryptHashForm) {
  EXPECT_TRUE(IsBcryptHash(kSecretHash));
  // exporter-toolkit's fixtures: $2y$ at costs 10, 12 and 18.
  EXPECT_TRUE(IsBcryptHash("$2y$18$4VeFDzXIoPHKnKTU3O3GH.N.vZu06CVqczYZ8WvfzrddFU6tGqjR."));
  EXPECT_FALSE(IsBcryptHash("doe"));
  EXPECT_FALSE(IsBcryptHash("$2b$03$gzNiwl/0J/QZFXK4QTrkQeyszaFLw8sVUhzUoTeq2/GDAJjdOfEVm"));
  EXPECT_FALSE(IsBcryptHash("$2b$32$gzNiwl/0J/QZFXK4QTrkQeyszaFLw8sVUhzUoTeq2/GDAJjdOfEVm"));
  EXPECT_FALSE(IsBcryptHash("$1$04$gzNiwl/0J/QZFXK4QTrkQeyszaFLw8sVUhzUoTeq2/GDAJjdOfEVm"));
  EXPECT_FALSE(IsBcryptHash("$2b$04$gzNiwl/0J/QZFXK4QTrkQeyszaFLw8sVUhzUoTeq2/GDAJjdOfEV!"));
}

TEST(BasicAuth, ParsesTheAuthorizationHeader) {
  Credentials credentials;
  ASSERT_TRUE(ParseBasicAuthorization("Basic YWxpY2U6c2VjcmV0", credentials));  // alice:secret
  EXPECT_EQ(credentials.user, "alice");
  EXPECT_EQ(credentials.password, "secret");
  ASSERT_TRUE(ParseBasicAuthorization("basic YTpiOmM=", credentials));  // a:b:c
  EXPECT_EQ(credentials.user, "a");
  EXPECT_EQ(credentials.password, "b:c");
  EXPECT_FALSE(ParseBasicAuthorization("", credentials));
  EXPECT_FALSE(ParseBasicAuthorization("Bearer YWxpY2U6c2VjcmV0", credentials));
  EXPECT_FALSE(ParseBasicAuthorization("Basic YWxpY2U", credentials));   // bad length
  EXPECT_FALSE(ParseBasicAuthorization("Basic YWxp*2U6", credentials));  // bad character
  EXPECT_FALSE(ParseBasicAuthorization("Basic YWxpY2U=", credentials));  // no colon
  EXPECT_FALSE(ParseBasicAuthorization("Basic =YWxpY2U", credentials));  // padding first
}

TEST(BasicAuth, ChecksPasswordsAndCachesVerdicts) {
  BasicAuth auth(Users());
  EXPECT_TRUE(auth.enabled());
  EXPECT_FALSE(auth.Check(""));
  EXPECT_TRUE(auth.Check("Basic YWxpY2U6c2VjcmV0"));   // alice:secret
  EXPECT_FALSE(auth.Check("Basic YWxpY2U6d3Jvbmc="));  // alice:wrong
  EXPECT_FALSE(auth.Check("Basic Ym9iOnNlY3JldA=="));  // bob:secret, unknown user
  EXPECT_EQ(auth.bcrypt_runs(), 3);
  // Again: answered from the cache, bcrypt not run.
  EXPECT_TRUE(auth.Check("Basic YWxpY2U6c2VjcmV0"));
  EXPECT_FALSE(auth.Check("Basic YWxpY2U6d3Jvbmc="));
  EXPECT_FALSE(auth.Check("Basic Ym9iOnNlY3JldA=="));
  EXPECT_EQ(auth.bcrypt_runs(), 3);
}

TEST(BasicAuth, AUserWithoutPasswordStillNeedsTheRightOne) {
  BasicAuth auth(Users());
  EXPECT_FALSE(auth.Check("Basic YWxpY2U6"));  // alice: (empty password)
  // bob, unknown, with exporter-toolkit's fake hash's own password: still refused.
  EXPECT_FALSE(auth.Check("Basic Ym9iOmZha2VwYXNzd29yZA=="));  // bob:fakepassword
}

TEST(BasicAuth, CacheStaysBoundedAndCorrect) {
  BasicAuth auth(Users());
  for (int i = 0; i < 3 * static_cast<int>(BasicAuth::kCacheSize); ++i) {
    // alice:wrongN, all different.
    const std::string password = "wrong" + std::to_string(i);
    const std::string plain = "alice:" + password;
    std::string encoded;
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t j = 0; j < plain.size(); j += 3) {
      unsigned bits = static_cast<unsigned char>(plain[j]) << 16;
      if (j + 1 < plain.size()) bits |= static_cast<unsigned char>(plain[j + 1]) << 8;
      if (j + 2 < plain.size()) bits |= static_cast<unsigned char>(plain[j + 2]);
      encoded += kAlphabet[(bits >> 18) & 63];
      encoded += kAlphabet[(bits >> 12) & 63];
      encoded += j + 1 < plain.size() ? kAlphabet[(bits >> 6) & 63] : '=';
      encoded += j + 2 < plain.size() ? kAlphabet[bits & 63] : '=';
    }
    EXPECT_FALSE(auth.Check("Basic " + encoded));
    EXPECT_LE(auth.cached(), BasicAuth::kCacheSize);
  }
  EXPECT_TRUE(auth.Check("Basic YWxpY2U6c2VjcmV0"));
}

TEST(BasicAuth, ConcurrentChecksAgree) {
  BasicAuth auth(Users());
  std::vector<std::thread> threads;
  std::atomic<int> accepted{0}, refused{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 5; ++j) {
        (auth.Check("Basic YWxpY2U6c2VjcmV0") ? accepted : refused)++;
        (auth.Check("Basic YWxpY2U6d3Jvbmc=") ? accepted : refused)++;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(accepted.load(), 20);
  EXPECT_EQ(refused.load(), 20);
}

ServeConfig ParseFlags(std::vector<std::string> args) {
  CLI::App app;
  ServeConfig config;
  AddServeFlags(app, config);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments reversed
  app.parse(args);
  FinishServeConfig(config);
  return config;
}

TEST(WebConfigFlag, LoadsTheFileAtStartUpAndRefusesABadOne) {
  EXPECT_EQ(ParseFlags({}).web.security, nullptr);
  const std::string good = (kCerts / "web.yml").string();
  const ServeConfig config = ParseFlags({"--web.config.file=" + good, "--web.config.check"});
  ASSERT_NE(config.web.security, nullptr);
  EXPECT_TRUE(config.web.security->tls.enabled);
  EXPECT_TRUE(config.web.config_check);
  try {
    ParseFlags({"--web.config.file=" + (kCerts / "server.crt").string()});
    ADD_FAILURE() << "a certificate is not a web config";
  } catch (const CLI::ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("--web.config.file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ParseFlags({"--web.config.check"}), CLI::ValidationError);  // needs the file
}

TEST(ClientCert, NoPolicyNeedsNoSessionAndAPolicyNeedsOne) {
  TlsServerConfig tls;
  tls.client_auth = ClientAuth::kNoClientCert;
  EXPECT_EQ(CheckClientCertificate(nullptr, tls), "");
  tls.client_auth = ClientAuth::kRequestClientCert;
  EXPECT_EQ(CheckClientCertificate(nullptr, tls), "");
  tls.client_auth = ClientAuth::kRequireAndVerifyClientCert;
  EXPECT_NE(CheckClientCertificate(nullptr, tls), "");
}

}  // namespace
}  // namespace rdmascope::web
