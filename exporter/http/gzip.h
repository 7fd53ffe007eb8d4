// Content-Encoding negotiation and gzip for /metrics, as prometheus-cpp's pull handler does it.
#pragma once

#include <string_view>

#include "core/gzip.h"  // GzipCompress, kGzipLevel: what the negotiated coding is

namespace rdmascope {

// True if an Accept-Encoding header value lists gzip (or *) without q=0.
bool AcceptsGzip(std::string_view accept_encoding);

}  // namespace rdmascope
