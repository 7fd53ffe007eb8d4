#include "profile/flame_graph.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "profile/html_text.h"
#include "profile/stacks.h"

namespace rdmascope::profile {
namespace {

constexpr double kWidth = 1000, kRowHeight = 18, kTitleHeight = 24;
constexpr double kMinWidth = 0.1;  // narrower frames are invisible: left out, as flamegraph.pl
constexpr double kCharWidth = 7;   // of the 12px monospace label font

struct Node {
  std::string name;
  std::string title;  // of the first frame merged into this node
  uint64_t value = 0;
  std::map<std::string, std::unique_ptr<Node>> children;
};

const char* Unit(FoldedValue value) {
  return value == FoldedValue::kOutstandingBytes || value == FoldedValue::kRegisteredBytes
             ? "bytes"
             : "count";
}

int Depth(const Node& node) {
  int depth = 0;
  for (const auto& [name, child] : node.children) depth = std::max(depth, Depth(*child));
  return depth + 1;
}

std::string Px(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  return buffer;
}

// flamegraph.pl's warm palette, chosen by a hash of the name so that a function keeps its
// colour between the graphs; frames without a stack are grey.
std::string Colour(const std::string& name) {
  if (name == kNoStackFunction) return "rgb(180,180,180)";
  uint32_t hash = 2166136261u;  // FNV-1a
  for (unsigned char c : name) hash = (hash ^ c) * 16777619u;
  const unsigned r = 205 + hash % 50, g = (hash >> 8) % 230, b = (hash >> 16) % 55;
  return "rgb(" + std::to_string(r) + "," + std::to_string(g) + "," + std::to_string(b) + ")";
}

std::string Share(uint64_t part, uint64_t total) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f%%",
                100.0 * static_cast<double>(part) / static_cast<double>(total));
  return buffer;
}

// At most `fits` characters of valid UTF-8 text (cut between characters, never inside one),
// ".." marking a cut.
std::string Truncate(const std::string& text, size_t fits) {
  size_t characters = 0;
  for (unsigned char c : text) characters += (c & 0xC0) != 0x80;
  if (characters <= fits) return text;
  std::string cut;
  size_t kept = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80 && ++kept > fits - 2) break;
    cut += c;
  }
  return cut + "..";
}

// Children in decreasing value (ties by name), so the largest caller is leftmost.
void Draw(const Node& node, double x, int depth, uint64_t total, FoldedValue value,
          std::string& svg) {
  const double width = kWidth * static_cast<double>(node.value) / static_cast<double>(total);
  if (width < kMinWidth) return;
  const double y = kTitleHeight + depth * kRowHeight;
  const std::string tooltip = node.title + "\n" +
                              FormatValue(static_cast<double>(node.value), Unit(value)) + " (" +
                              Share(node.value, total) + ")";
  svg += "<g class=\"frame\"><title>" + HtmlEscape(tooltip) + "</title><rect x=\"" + Px(x) +
         "\" y=\"" + Px(y) + "\" width=\"" + Px(width) + "\" height=\"" + Px(kRowHeight - 1) +
         "\" fill=\"" + Colour(node.name) + "\"/>";
  const size_t fits = static_cast<size_t>((width - 6) / kCharWidth);
  if (fits >= 3) {
    std::string label = HtmlEscape(Truncate(node.name, fits));
    svg +=
        "<text x=\"" + Px(x + 3) + "\" y=\"" + Px(y + kRowHeight - 5) + "\">" + label + "</text>";
  }
  svg += "</g>\n";
  std::vector<const Node*> children;
  for (const auto& [name, child] : node.children) children.push_back(child.get());
  std::stable_sort(children.begin(), children.end(),
                   [](const Node* a, const Node* b) { return a->value > b->value; });
  for (const Node* child : children) {
    Draw(*child, x, depth + 1, total, value, svg);
    x += kWidth * static_cast<double>(child->value) / static_cast<double>(total);
  }
}

}  // namespace

std::string FlameGraphSvg(const std::vector<RegistrationStack>& stacks, FoldedValue value,
                          const std::string& title) {
  Node root{.name = "all", .title = "all stacks"};
  for (const RegistrationStack& stack : stacks) {
    const uint64_t count = StackValue(stack, value);
    if (count == 0) continue;
    root.value += count;
    Node* node = &root;
    for (auto frame = stack.frames.rbegin(); frame != stack.frames.rend(); ++frame) {
      const std::string name = FrameName(*frame);  // valid UTF-8
      auto& child = node->children[name];
      if (!child) child = std::make_unique<Node>(Node{.name = name, .title = FrameTitle(*frame)});
      child->value += count;
      node = child.get();
    }
  }
  if (root.value == 0) return "";
  const double height = kTitleHeight + Depth(root) * kRowHeight + 4;
  std::string svg = "<svg class=\"flame\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
                    Px(kWidth) + " " + Px(height) + "\" role=\"img\" aria-label=\"" +
                    HtmlEscape(title) + "\"><title>" + HtmlEscape(title) + "</title>\n" +
                    "<text class=\"plot-title\" x=\"0\" y=\"16\">" + HtmlEscape(title) +
                    "</text>\n";
  Draw(root, 0, 0, root.value, value, svg);
  svg += "</svg>\n";
  return svg;
}

}  // namespace rdmascope::profile
