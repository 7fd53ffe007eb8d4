// --web.config.file: exporter-toolkit's format, parsed strictly (web/web_config.h), and basic
// auth against its bcrypt hashes (web/basic_auth.h).
#include "web/web_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/serve_flags.h"
#include "web/basic_auth.h"
#include "web/client_cert.h"

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
  EXPECT_NE(ErrorOf("tls_server_config:\n  key_file: server.key\n").find("missing cert_file"),
            std::string::npos);
  EXPECT_NE(ErrorOf("tls_server_config:\n  cert_file: server.crt\n").find("missing key_file"),
            std::string::npos);
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
  EXPECT_NE(ErrorOf("tls_server_config:\n  client_auth_type: x\n").find("missing cert_file"),
            std::string::npos);
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
