#include "profile/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "profile/html_text.h"

namespace rdmascope::profile {
namespace {

constexpr double kWidth = 800, kHeight = 260;
constexpr double kLeft = 90, kRight = 20, kTop = 30, kBottom = 40;

std::string Px(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", value);
  return buffer;
}

// A "nice" step (1, 2 or 5 times a power of ten) giving about `ticks` ticks over `range`.
double NiceStep(double range, int ticks) {
  if (!(range > 0)) return 1;
  const double raw = range / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0}) {
    if (raw <= factor * power) return factor * power;
  }
  return 10 * power;
}

}  // namespace

std::string LinePlotSvg(const Timeline& timeline) {
  double t_max = 0, y_max = timeline.limit.value_or(0);
  for (const TimePoint& point : timeline.points) {
    if (std::isfinite(point.t_seconds)) t_max = std::max(t_max, point.t_seconds);
    if (std::isfinite(point.value)) y_max = std::max(y_max, point.value);
  }
  if (t_max <= 0) t_max = 1;
  // Byte ticks step in binary units (1, 2, 5 MiB: not 4.768 MiB), others in decimal ones.
  double scale = 1;
  if (timeline.unit == "bytes" || timeline.unit == "bytes_per_second") {
    while (y_max / scale >= 1024) scale *= 1024;
  }
  const double y_step = NiceStep(y_max > 0 ? y_max / scale : 1, 4) * scale;
  y_max = std::ceil((y_max > 0 ? y_max : 1) / y_step) * y_step;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto x = [&](double t) { return kLeft + plot_w * t / t_max; };
  auto y = [&](double v) { return kTop + plot_h * (1 - v / y_max); };

  const std::string title = HtmlEscape(timeline.title);
  std::string svg = "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
                    Px(kWidth) + " " + Px(kHeight) + "\" role=\"img\" aria-label=\"" + title +
                    "\"><title>" + title + "</title>\n";
  svg += "<text class=\"plot-title\" x=\"" + Px(kLeft) + "\" y=\"18\">" + title + "</text>\n";
  // Horizontal grid and y ticks.
  for (double v = 0; v <= y_max + y_step / 2; v += y_step) {
    svg += "<line class=\"grid\" x1=\"" + Px(kLeft) + "\" x2=\"" + Px(kLeft + plot_w) + "\" y1=\"" +
           Px(y(v)) + "\" y2=\"" + Px(y(v)) + "\"/><text class=\"tick\" x=\"" + Px(kLeft - 6) +
           "\" y=\"" + Px(y(v) + 4) + "\" text-anchor=\"end\">" +
           HtmlEscape(FormatValue(v, timeline.unit)) + "</text>\n";
  }
  const double t_step = NiceStep(t_max, 8);
  for (double t = 0; t <= t_max + t_step / 1000; t += t_step) {
    svg += "<text class=\"tick\" x=\"" + Px(x(t)) + "\" y=\"" + Px(kTop + plot_h + 16) +
           "\" text-anchor=\"middle\">" + HtmlEscape(FormatValue(t, "seconds")) + "</text>\n";
  }
  svg += "<line class=\"axis\" x1=\"" + Px(kLeft) + "\" x2=\"" + Px(kLeft) + "\" y1=\"" + Px(kTop) +
         "\" y2=\"" + Px(kTop + plot_h) + "\"/><line class=\"axis\" x1=\"" + Px(kLeft) +
         "\" x2=\"" + Px(kLeft + plot_w) + "\" y1=\"" + Px(kTop + plot_h) + "\" y2=\"" +
         Px(kTop + plot_h) + "\"/>\n";
  svg += "<text class=\"tick\" x=\"" + Px(kLeft + plot_w / 2) + "\" y=\"" + Px(kHeight - 4) +
         "\" text-anchor=\"middle\">time since the start of the window</text>\n";

  if (timeline.limit) {
    const std::string ly = Px(y(*timeline.limit));
    const std::string label = "limit " + FormatValue(*timeline.limit, timeline.unit);
    svg += "<line class=\"limit\" x1=\"" + Px(kLeft) + "\" x2=\"" + Px(kLeft + plot_w) +
           "\" y1=\"" + ly + "\" y2=\"" + ly + "\"><title>" + HtmlEscape(label) +
           "</title></line><text class=\"limit-label\" x=\"" + Px(kLeft + plot_w - 4) + "\" y=\"" +
           Px(y(*timeline.limit) - 4) + "\" text-anchor=\"end\">" + HtmlEscape(label) + "</text>\n";
  }

  std::string points, markers;
  for (const TimePoint& point : timeline.points) {
    if (!std::isfinite(point.t_seconds) || !std::isfinite(point.value)) continue;  // no made-up 0
    const std::string px = Px(x(point.t_seconds)), py = Px(y(point.value));
    points += px + "," + py + " ";
    markers += "<circle class=\"point\" cx=\"" + px + "\" cy=\"" + py + "\" r=\"2\"><title>" +
               HtmlEscape(FormatValue(point.t_seconds, "seconds") + ": " +
                          FormatValue(point.value, timeline.unit)) +
               "</title></circle>";
  }
  svg += "<polyline class=\"series\" points=\"" + points + "\"/>\n" + markers + "\n</svg>\n";
  return svg;
}

}  // namespace rdmascope::profile
