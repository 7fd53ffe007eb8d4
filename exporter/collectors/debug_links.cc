#include "collectors/debug_links.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/html.h"

namespace rdmascope {
namespace {

// RFC 3339 UTC with milliseconds.
std::string TimeText(std::chrono::system_clock::time_point time) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch());
  const std::time_t seconds = static_cast<std::time_t>(ms.count() / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[96];  // room for any int the compiler can imagine in each field
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(ms.count() % 1000));
  return text;
}

nlohmann::ordered_json EventJson(const LinkEvent& event) {
  nlohmann::ordered_json json;
  json["time"] = TimeText(event.time);
  json["direction"] = event.down ? "down" : "up";
  if (event.down) {
    json["reason"] = event.reason;
    json["substate"] = event.substate;
  }
  if (!event.operstate.empty()) json["operstate"] = event.operstate;
  if (!event.linkstate_error.empty()) json["linkstate_error"] = event.linkstate_error;
  if (event.phy_down_count) json["phy_down_count"] = *event.phy_down_count;
  if (event.query_seconds) json["query_seconds"] = *event.query_seconds;
  if (event.module) {
    nlohmann::ordered_json module;
    if (!event.module->state.empty()) module["state"] = event.module->state;
    nlohmann::ordered_json lanes = nlohmann::ordered_json::array();
    for (const auto& watts : event.module->rx_power_watts) {
      lanes.push_back(watts ? nlohmann::ordered_json(*watts) : nlohmann::ordered_json());
    }
    module["rx_power_watts"] = std::move(lanes);
    if (!event.module->error.empty()) module["error"] = event.module->error;
    json["module"] = std::move(module);
  }
  if (!event.fec.empty()) json["fec"] = event.fec;
  return json;
}

// The ports with events or a known carrier, in the snapshot's port order.
template <typename Each>
void ForEachPort(const LinkSnapshot& snapshot, Each each) {
  for (const LinkPort& port : snapshot.ports) {
    if (port.netdev.empty() || port.native_ib || port.over_limit) continue;
    const auto it = snapshot.events.find(port.netdev);
    if (it == snapshot.events.end()) continue;
    each(port, it->second);
  }
}

std::string Watts(const std::optional<double>& watts) {
  if (!watts) return "";
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", *watts);
  return text;
}

}  // namespace

std::string LinkEventsJson(const LinkSnapshot& snapshot) {
  nlohmann::ordered_json ports = nlohmann::ordered_json::array();
  ForEachPort(snapshot, [&](const LinkPort& port, const PortEvents& events) {
    nlohmann::ordered_json entry;
    entry["device"] = port.device;
    entry["port"] = port.port;
    entry["netdev"] = port.netdev;
    entry["carrier"] = events.carrier_up ? (*events.carrier_up ? "up" : "down") : "unknown";
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const LinkEvent& event : events.recent) list.push_back(EventJson(event));
    entry["events"] = std::move(list);
    ports.push_back(std::move(entry));
  });
  nlohmann::ordered_json doc;
  doc["events_per_port"] = kEventsPerPort;
  // Live only: times notifications were lost (ENOBUFS) and every link dumped again.
  if (snapshot.resyncs) doc["notification_resyncs"] = *snapshot.resyncs;
  doc["ports"] = std::move(ports);
  // Hostile names may not be UTF-8: replaced, never a throw.
  return doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string LinkEventsHtml(const LinkSnapshot& snapshot) {
  std::string html = HtmlPageHead("rdmascope: link events") + "<h1>Link events</h1>\n<p>The last " +
                     std::to_string(kEventsPerPort) +
                     " carrier edges of each port, newest first, with the driver's reason for a "
                     "down edge and the module then (<a href=\"/debug/links?format=json\">JSON"
                     "</a>).</p>\n";
  bool any = false;
  ForEachPort(snapshot, [&](const LinkPort& port, const PortEvents& events) {
    any = true;
    html += "<h2>" + HtmlEscape(port.netdev) +
            (port.device.empty()
                 ? std::string()
                 : " (" + HtmlEscape(port.device) + " port " + HtmlEscape(port.port) + ")") +
            ": carrier " + (events.carrier_up ? (*events.carrier_up ? "up" : "down") : "unknown") +
            "</h2>\n";
    if (events.recent.empty()) {
      html += "<p>No edge seen.</p>\n";
      return;
    }
    html +=
        "<table><tr><th>time</th><th>direction</th><th>reason</th><th>substate</th>"
        "<th>module state</th><th>RX power per lane (W)</th><th>FEC</th><th>detail</th></tr>\n";
    for (auto it = events.recent.rbegin(); it != events.recent.rend(); ++it) {
      const LinkEvent& event = *it;
      std::string lanes;
      std::string module_state;
      if (event.module) {
        module_state = event.module->state.empty() ? event.module->error : event.module->state;
        for (size_t i = 0; i < event.module->rx_power_watts.size(); ++i) {
          if (i > 0) lanes += " ";
          lanes += Watts(event.module->rx_power_watts[i]);
        }
      }
      std::string detail = event.operstate.empty() ? "" : "operstate " + event.operstate;
      if (!event.linkstate_error.empty()) detail += " linkstate " + event.linkstate_error;
      html += "<tr><td>" + HtmlEscape(TimeText(event.time)) + "</td><td>" +
              (event.down ? "down" : "up") + "</td><td>" + HtmlEscape(event.reason) + "</td><td>" +
              HtmlEscape(event.substate) + "</td><td>" + HtmlEscape(module_state) + "</td><td>" +
              HtmlEscape(lanes) + "</td><td>" + HtmlEscape(event.fec) + "</td><td>" +
              HtmlEscape(detail) + "</td></tr>\n";
    }
    html += "</table>\n";
  });
  if (!any) html += "<p>No port followed yet.</p>\n";
  html += kHtmlPageTail;
  return html;
}

}  // namespace rdmascope
