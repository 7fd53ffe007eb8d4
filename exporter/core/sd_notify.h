// systemd's readiness protocol (sd_notify(3)) without libsystemd: one datagram of
// newline-separated VARIABLE=value assignments to the AF_UNIX socket named by $NOTIFY_SOCKET
// (a path, or an abstract socket if it starts with '@'). systemd documents the protocol as
// stable and meant to be reimplemented (man sd_notify, "NOTES"); docs/packaging.md says why
// libsystemd is not linked. `serve` says READY=1 once it answers, RELOADING=1/READY=1 around a
// reload of its web config and STOPPING=1 when it shuts down (Type=notify in the unit).
#pragma once

#include <expected>
#include <string>
#include <string_view>

namespace rdmascope::sd {

// Sends `state` (e.g. "READY=1") to `socket_address` ($NOTIFY_SOCKET's form: "/path" or
// "@abstract"). The error names the address and the failing call.
std::expected<void, std::string> NotifyTo(std::string_view socket_address, std::string_view state);

// Sends `state` to $NOTIFY_SOCKET. Returns false, sending nothing, when the variable is unset
// or empty (not started by systemd with Type=notify), true when sent.
std::expected<bool, std::string> Notify(std::string_view state);

// Notify, with a failure logged as a warning (readiness is best effort: a service manager
// that cannot be told is no reason to stop serving).
void NotifyOrWarn(std::string_view state);

// "RELOADING=1\nMONOTONIC_USEC=<CLOCK_MONOTONIC now>": systemd 253's Type=notify-reload needs
// the timestamp, older versions ignore it.
std::string ReloadingState();

}  // namespace rdmascope::sd
