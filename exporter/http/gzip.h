// Content-Encoding negotiation and gzip for /metrics, as prometheus-cpp's pull handler does it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rdmascope {

// True if an Accept-Encoding header value lists gzip (or *) without q=0.
bool AcceptsGzip(std::string_view accept_encoding);

// The gzip stream (RFC 1952) of `input`; nullopt if zlib fails (then serve it uncompressed).
std::optional<std::string> GzipCompress(std::string_view input);

}  // namespace rdmascope
