// Text for a terminal, from values others control. A process name, a netdev or device name, a
// label value read back from a remote exporter or a Prometheus may hold ESC and the rest of
// the control characters: printed raw they move the cursor, recolour or rewrite what was
// printed before, set the window title, and in some terminals answer back with typed input
// (CVE-2003-0063 class). Doctor's and profile's text output print every such value through
// EscapeControls; their JSON, and every debug route's JSON the HTTP handler serves
// (/debug/*: comm, cgroup, symbol and file names), through EscapeJsonControls.
#pragma once

#include <string>
#include <string_view>

namespace rdmascope {

// `text` as valid UTF-8 (invalid bytes become U+FFFD: a lone 0x9b is CSI to an 8-bit
// terminal) with C0 controls (newline and tab included: a value must not start a line of its
// own) and DEL written \xHH, and C1 controls (U+0080..U+009F) written \u00HH. Text without
// them comes back unchanged.
std::string EscapeControls(std::string_view text);

// A JSON document with DEL and the C1 controls, which JSON allows raw in strings (RFC 8259
// section 7 requires escaping U+0000..U+001F only, as nlohmann::json does), escaped as \u007f
// and \u0080..\u009f: the same document to a parser, no terminal control when printed. Outside
// strings a JSON document is ASCII, so every such byte is inside one.
std::string EscapeJsonControls(std::string json);

}  // namespace rdmascope
