// Which parts of a GitHub-flavoured markdown document are markup, for tests
// that feed hostile strings (commands, paths, symbol names) through a writer
// of markdown: everything a string from a recording becomes must be text —
// inside a code span, inside a fenced block that it cannot end, or escaped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace memtrack::testing {

struct MarkdownScan {
  // Markup no writer of ours makes: a heading or tag not in the allowed
  // lists, a setext underline or rule, an image, a link, a bare URL or
  // @mention, a code span left open, a line leaving its fenced block, a
  // control character (a CR ends a line too).
  std::vector<std::string> problems;
  // The text outside code spans and fenced blocks, a line each.
  std::string outside_code;
};

inline MarkdownScan scan_markdown(const std::string& md, const std::vector<std::string>& allowed_headings,
                                  const std::vector<std::string>& allowed_tags) {
  MarkdownScan scan;
  auto problem = [&](size_t number, const std::string& what, std::string_view line) {
    scan.problems.push_back("line " + std::to_string(number) + ": " + what + ": " + std::string(line));
  };
  for (char c : md)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\n') || c == 0x7f)
      scan.problems.push_back("control character " + std::to_string(static_cast<int>(c)));
  bool in_fence = false;
  size_t fence_indent = 0;
  bool previous_blank = true;
  size_t number = 0;
  for (size_t start = 0; start < md.size();) {
    size_t end = md.find('\n', start);
    if (end == std::string::npos) end = md.size();
    std::string_view line(md.data() + start, end - start);
    start = end + 1;
    ++number;
    size_t indent = line.find_first_not_of(' ');
    bool blank = indent == std::string_view::npos;
    std::string_view rest = blank ? std::string_view() : line.substr(indent);
    if (in_fence) {
      if (!blank && rest.starts_with("```") && indent == fence_indent) {
        in_fence = false;
      } else if (!blank && indent < fence_indent) {
        problem(number, "leaves its fenced block", line);
        in_fence = false;
      }
      previous_blank = blank;
      continue;
    }
    if (!blank && (rest.starts_with("```") || rest.starts_with("~~~"))) {
      in_fence = true;
      fence_indent = indent;
      previous_blank = false;
      continue;
    }
    if (!blank && indent <= 3 && rest.front() == '#') {
      bool allowed = false;
      for (const std::string& heading : allowed_headings) allowed |= rest.starts_with(heading);
      if (!allowed) problem(number, "a heading", line);
    }
    if (!blank && indent <= 3 && rest.find_first_not_of(rest.front()) >= rest.find_last_not_of(' ') + 1 &&
        (rest.front() == '=' || rest.front() == '-' || rest.front() == '*' || rest.front() == '_')) {
      if (!previous_blank || rest.front() != '=') problem(number, "a setext underline or a rule", line);
    }
    // Code spans out; what is left is rendered.
    std::string outside;
    for (size_t i = 0; i < rest.size();) {
      if (rest[i] != '`') {
        outside += rest[i++];
        continue;
      }
      size_t run = rest.find_first_not_of('`', i);
      if (run == std::string_view::npos) run = rest.size();
      const size_t length = run - i;
      size_t close = run;
      for (;;) {
        close = rest.find('`', close);
        if (close == std::string_view::npos) break;
        size_t close_end = rest.find_first_not_of('`', close);
        if (close_end == std::string_view::npos) close_end = rest.size();
        if (close_end - close == length) break;
        close = close_end;
      }
      if (close == std::string_view::npos) {
        problem(number, "a code span left open", line);
        outside += rest.substr(i);
        break;
      }
      outside += ' ';
      i = close + length;
    }
    for (size_t at = outside.find('<'); at != std::string::npos; at = outside.find('<', at + 1)) {
      bool allowed = false;
      for (const std::string& tag : allowed_tags) allowed |= std::string_view(outside).substr(at).starts_with(tag);
      if (!allowed) problem(number, "raw HTML", line);
    }
    auto unescaped = [&](std::string_view what) {
      for (size_t at = outside.find(what); at != std::string::npos; at = outside.find(what, at + 1))
        if (at == 0 || outside[at - 1] != '\\') return true;
      return false;
    };
    if (unescaped("![")) problem(number, "an image", line);
    if (unescaped("[") || unescaped("](")) problem(number, "a link", line);
    if (unescaped("://") || outside.find("www.") != std::string::npos) problem(number, "a bare URL", line);
    if (unescaped("@")) problem(number, "an @mention or e-mail address", line);
    scan.outside_code += outside + "\n";
    previous_blank = blank;
  }
  if (in_fence) scan.problems.push_back("a fenced block is never closed");
  return scan;
}

}  // namespace memtrack::testing
