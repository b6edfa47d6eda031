// The text report's layout helpers: an 80-column line writer with optional
// ANSI colors, shared by every text section.
#pragma once

#include <algorithm>
#include <cctype>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace memtrack::text {

inline constexpr size_t kLineWidth = 80;

// Bytes that would break the layout (newlines, escapes) become '?'; text
// longer than width is cut on a UTF-8 character boundary and ends in "...".
// Widths count bytes, which never undercounts terminal columns for UTF-8.
inline std::string fit(std::string_view text, size_t width) {
  std::string clean(text);
  for (char& c : clean) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) c = '?';
  }
  if (clean.size() <= width) return clean;
  if (width < 3) return clean.substr(0, width);
  size_t cut = width - 3;
  while (cut > 0 && (static_cast<unsigned char>(clean[cut]) & 0xc0) == 0x80) --cut;
  return clean.substr(0, cut) + "...";
}

// A figure's unit ("KiB", "ms", "KiB)," ...): wrapped with its number.
inline bool is_unit(std::string_view word) {
  while (!word.empty() && (word.back() == ')' || word.back() == ',' || word.back() == ';' || word.back() == '.'))
    word.remove_suffix(1);
  for (std::string_view unit : {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "ns", "\u00b5s", "ms", "s", "min", "h"})
    if (word == unit) return true;
  return false;
}

// Greedy word wrap, never between a number and its unit; words longer than
// width are cut by fit().
inline std::vector<std::string> wrap(std::string_view text, size_t width) {
  std::vector<std::string> lines;
  std::string current;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = std::min(text.find(' ', pos), text.size());
    if (end < text.size()) {
      size_t next = std::min(text.find(' ', end + 1), text.size());
      bool number = end > pos && std::isdigit(static_cast<unsigned char>(text[end - 1]));
      if (number && is_unit(text.substr(end + 1, next - end - 1))) end = next;
    }
    std::string word = fit(text.substr(pos, end - pos), width);
    pos = end + 1;
    if (word.empty()) continue;
    if (!current.empty() && current.size() + 1 + word.size() > width) {
      lines.push_back(std::move(current));
      current.clear();
    }
    if (!current.empty()) current += ' ';
    current += word;
  }
  if (!current.empty()) lines.push_back(std::move(current));
  return lines;
}

inline std::string join(const std::vector<std::string>& words) {
  std::string joined;
  for (const std::string& word : words) {
    if (!joined.empty()) joined += ' ';
    joined += word;
  }
  return joined;
}

class TextWriter {
 public:
  TextWriter(std::ostream& out, bool color) : out_(out), color_(color) {}

  // SGR codes: applied after padding so colors never change the layout.
  std::string bold(std::string_view text) const { return paint(text, "1"); }
  std::string red(std::string_view text) const { return paint(text, "1;31"); }
  std::string yellow(std::string_view text) const { return paint(text, "33"); }

  void line(std::string_view text = {}) { out_ << text << '\n'; }
  void title(std::string_view text) {
    line();
    line(bold(text));
  }
  // "  label       value": the value wraps at words under itself, so a
  // figure is never cut (only a single word wider than the line is).
  void field(std::string_view label, std::string_view value) {
    std::string prefix = fmt::format("  {:<12}", label);
    std::vector<std::string> lines = wrap(value, kLineWidth - prefix.size());
    if (lines.empty()) lines.emplace_back();
    for (size_t i = 0; i < lines.size(); ++i) line((i == 0 ? prefix : std::string(prefix.size(), ' ')) + lines[i]);
  }
  // A wrapped warning: the first line after first_prefix, the others indented to match.
  void warning(std::string_view first_prefix, std::string_view text) {
    std::string indent(first_prefix.size(), ' ');
    bool first = true;
    for (const std::string& wrapped : wrap(text, kLineWidth - first_prefix.size())) {
      line(std::string(first ? first_prefix : indent) + yellow(wrapped));
      first = false;
    }
  }

 private:
  std::string paint(std::string_view text, std::string_view sgr) const {
    if (!color_) return std::string(text);
    return fmt::format("\x1b[{}m{}\x1b[0m", sgr, text);
  }

  std::ostream& out_;
  bool color_;
};

}  // namespace memtrack::text
