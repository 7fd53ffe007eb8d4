// `doctor` without --exporter asks the exporter on 127.0.0.1:9879 for its report, if one
// answers. Any local user can listen there when no exporter does (ports above 1023 need no
// privilege), and answer with a report of their making: findings, and fix lines a root
// operator may paste. So the implicit exporter is trusted only when the socket listening on
// that port belongs to a process that is `rdmascope` running as root: the listening socket's
// inode from /proc/net/tcp and tcp6, the process holding it from /proc/PID/fd, its uids from
// /proc/PID/status and its executable from /proc/PID/exe. Nothing is sent to it before that
// holds, and never the --exporter.* credentials, which go only to a URL the user named.
#pragma once

#include <expected>
#include <string>

namespace rdmascope {

// Ok when every socket listening on TCP `port` that 127.0.0.1 reaches is held by root
// processes whose executable is named rdmascope; else why not (nothing listens, a process of
// uid N, another program, /proc not readable enough to tell).
std::expected<void, std::string> VerifyLocalExporter(int port, const std::string& procfs = "/proc");

}  // namespace rdmascope
