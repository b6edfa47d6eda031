#include "analyze/budget.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>

namespace memtrack {
namespace {

struct Alias {
  const char* name;
  Figure figure;
};
// The report's JSON names of the same figures.
constexpr Alias kAliases[] = {
    {"total_allocated", Figure::Allocated}, {"peak_memory", Figure::Peak},
    {"leaked_bytes", Figure::Leaked},       {"leaked_count", Figure::LeakedBlocks},
    {"live_at_end_bytes", Figure::LiveAtEnd}, {"live_at_end_count", Figure::LiveAtEndBlocks},
    {"temporary_allocations", Figure::Temporary},
};

struct Unit {
  const char* name;
  long double factor;
};
constexpr Unit kByteUnits[] = {
    {"B", 1.0L}, {"KiB", 1024.0L}, {"MiB", 1048576.0L}, {"GiB", 1073741824.0L}, {"TiB", 1099511627776.0L}};

class Parser {
 public:
  Parser(std::string_view text, Budget::Kind kind) : text_(text) {
    budget_.text = std::string(text);
    budget_.kind = kind;
  }

  Budget parse() {
    skip_spaces();
    if (at_end()) fail("empty budget: expected a figure, e.g. peak>+5%");
    size_t start = pos_;
    std::string word = identifier();
    skip_spaces();
    if (word == "process" && peek() == '(') {
      ++pos_;
      size_t name_start = pos_;
      while (!at_end() && peek() != ')') ++pos_;
      if (at_end()) fail("process( without a closing )");
      std::string_view name = text_.substr(name_start, pos_ - name_start);
      if (name.empty()) error(name_start, "process() needs a name: the executable's file name, e.g. process(cc1plus)");
      budget_.scope = Budget::Scope::Process;
      budget_.process = std::string(name);
      ++pos_;
      skip_spaces();
      expect('.', "expected \".\" and a figure after process(NAME)");
      skip_spaces();
      start = pos_;
      word = identifier();
    } else if (peek() == '.') {
      if (word == "total") budget_.scope = Budget::Scope::Total;
      else if (word == "each") budget_.scope = Budget::Scope::Each;
      else error(start, fmt::format("unknown scope \"{}\": total, each or process(NAME)", word));
      ++pos_;
      skip_spaces();
      start = pos_;
      word = identifier();
    }
    budget_.figure = figure_named(word, start);
    skip_spaces();
    budget_.comparison = comparison();
    skip_spaces();
    value();
    skip_spaces();
    if (!at_end()) fail(fmt::format("unexpected \"{}\" after the value", text_.substr(pos_)));
    return budget_;
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  void skip_spaces() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(peek()))) ++pos_;
  }
  [[noreturn]] void error(size_t position, const std::string& reason) { throw BudgetSyntaxError(position, reason); }
  [[noreturn]] void fail(const std::string& reason) { error(pos_, reason); }
  void expect(char c, const char* reason) {
    if (peek() != c) fail(reason);
    ++pos_;
  }

  std::string identifier() {
    size_t start = pos_;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_')) ++pos_;
    if (pos_ == start) fail(at_end() ? "expected a figure" : fmt::format("expected a figure, not \"{}\"", peek()));
    return std::string(text_.substr(start, pos_ - start));
  }

  Figure figure_named(const std::string& word, size_t position) {
    for (const FigureInfo& info : all_figures())
      if (word == info.name) return info.figure;
    for (const Alias& alias : kAliases)
      if (word == alias.name) return alias.figure;
    std::string names;
    for (const FigureInfo& info : all_figures()) names += fmt::format("{}{}", names.empty() ? "" : ", ", info.name);
    error(position, fmt::format("unknown figure \"{}\": one of {}", word, names));
  }

  Budget::Comparison comparison() {
    using C = Budget::Comparison;
    auto two = text_.substr(pos_, 2);
    for (auto [symbol, value] : {std::pair{"<=", C::LessEqual}, std::pair{">=", C::GreaterEqual},
                                 std::pair{"==", C::Equal}, std::pair{"!=", C::NotEqual}})
      if (two == symbol) {
        pos_ += 2;
        return value;
      }
    if (peek() == '<') return ++pos_, C::Less;
    if (peek() == '>') return ++pos_, C::Greater;
    if (peek() == '=') fail("a single \"=\": write == (or <=, >=)");
    fail(at_end() ? "expected a comparison (<, <=, >, >=, ==, !=) after the figure"
                  : fmt::format("expected a comparison (<, <=, >, >=, ==, !=), not \"{}\"", peek()));
  }

  void value() {
    budget_.value_position = pos_;
    bool sign = false, negative = false;
    if (peek() == '+' || peek() == '-') {
      sign = true;
      negative = peek() == '-';
      ++pos_;
    }
    size_t number_start = pos_;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(peek()))) ++pos_;
    if (pos_ == number_start) fail(at_end() ? "expected a number" : fmt::format("expected a number, not \"{}\"", peek()));
    if (peek() == '.') {
      ++pos_;
      size_t fraction = pos_;
      while (!at_end() && std::isdigit(static_cast<unsigned char>(peek()))) ++pos_;
      if (pos_ == fraction) fail("expected digits after the decimal point");
    }
    long double number = std::strtold(std::string(text_.substr(number_start, pos_ - number_start)).c_str(), nullptr);
    skip_spaces();
    size_t unit_start = pos_;
    std::string unit;
    if (peek() == '%') {
      unit = "%";
      ++pos_;
    } else {
      while (!at_end() && std::isalpha(static_cast<unsigned char>(peek()))) unit += text_[pos_++];
    }
    const bool bytes = figure_info(budget_.figure).bytes;
    long double factor = 1;
    if (unit == "%") {
      budget_.value_kind = Budget::Value::Relative;
    } else {
      budget_.value_kind = sign ? Budget::Value::Change : Budget::Value::Absolute;
      if (!unit.empty()) {
        const char* figure = figure_info(budget_.figure).name;
        if (!bytes) error(unit_start, fmt::format("{} is a count: no unit but %", figure));
        bool known = false;
        for (const Unit& u : kByteUnits)
          if (unit == u.name) factor = u.factor, known = true;
        if (!known) {
          std::string lower = unit;
          for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          if (lower == "k" || lower == "kb" || lower == "m" || lower == "mb" || lower == "g" || lower == "gb" ||
              lower == "t" || lower == "tb")
            error(unit_start, fmt::format("unit \"{}\": sizes are base 1024, write {}iB", unit,
                                          static_cast<char>(std::toupper(static_cast<unsigned char>(lower[0])))));
          error(unit_start, fmt::format("unknown unit \"{}\": B, KiB, MiB, GiB, TiB or %", unit));
        }
      }
    }
    budget_.value = (negative ? -number : number) * factor;
  }

  std::string_view text_;
  size_t pos_ = 0;
  Budget budget_;
};

bool holds(long double lhs, Budget::Comparison comparison, long double rhs) {
  switch (comparison) {
    case Budget::Comparison::Less: return lhs < rhs;
    case Budget::Comparison::LessEqual: return lhs <= rhs;
    case Budget::Comparison::Greater: return lhs > rhs;
    case Budget::Comparison::GreaterEqual: return lhs >= rhs;
    case Budget::Comparison::Equal: return lhs == rhs;
    case Budget::Comparison::NotEqual: return lhs != rhs;
  }
  return false;  // not reached
}

}  // namespace

Budget parse_budget(std::string_view text, Budget::Kind kind) { return Parser(text, kind).parse(); }

std::string describe_syntax_error(std::string_view text, const BudgetSyntaxError& error) {
  return fmt::format("at column {}: {}\n  {}\n  {}^", error.position() + 1, error.what(), text,
                     std::string(error.position(), ' '));
}

void validate_for_single_recording(const Budget& budget) {
  if (budget.value_kind == Budget::Value::Absolute) return;
  throw BudgetSyntaxError(budget.value_position,
                          budget.value_kind == Budget::Value::Relative
                              ? "a relative change needs two recordings (memtrack diff --fail-if)"
                              : "a signed value is a change and needs two recordings (memtrack diff --fail-if); "
                                "write the limit without a sign");
}

BudgetResult evaluate_budget(const Budget& budget, const Report* base, const Report& head,
                             const std::vector<ProcessMatch>& processes) {
  BudgetResult result;
  result.budget = &budget;
  const char* figure = figure_info(budget.figure).name;
  // Each subject: the totals (process null) or one process (pair).
  std::vector<std::pair<const ProcessMatch*, FigureChange>> subjects;
  if (budget.scope == Budget::Scope::Total) {
    subjects.push_back({nullptr, {base ? figure_value(base->totals, budget.figure) : std::nullopt,
                                  figure_value(head.totals, budget.figure)}});
  } else {
    for (const ProcessMatch& process : processes)
      if (budget.scope == Budget::Scope::Each || process.name == budget.process)
        subjects.push_back({&process, process.change(budget.figure)});
    if (subjects.empty()) {
      std::string names;
      for (const ProcessMatch& process : processes)
        if (names.find(" " + process.name + ",") == std::string::npos && names.size() < 200)
          names += " " + process.name + ",";
      if (!names.empty()) names.pop_back();
      result.error = budget.scope == Budget::Scope::Each
                         ? "no process in the recordings"
                         : fmt::format("no process is named \"{}\"; the recordings have:{}", budget.process, names);
      return result;
    }
  }
  for (const auto& [process, values] : subjects) {
    std::optional<long double> lhs;
    switch (budget.value_kind) {
      case Budget::Value::Absolute:
        if (values.head) lhs = static_cast<long double>(*values.head);
        break;
      case Budget::Value::Change: lhs = values.change(); break;
      case Budget::Value::Relative: lhs = values.relative_percent(); break;
    }
    if (!lhs) {
      // Absent processes count zero (ProcessMatch::change): a missing value is a figure not recorded.
      result.error = budget.value_kind != Budget::Value::Absolute && !base
                         ? "a change needs two recordings"
                         : fmt::format("{} is not recorded in {}", figure,
                                       values.head ? "the base" : (base ? "the head" : "the recording"));
      result.violations.clear();
      result.broken = false;
      return result;
    }
    bool comparison_holds = holds(*lhs, budget.comparison, budget.value);
    bool broken = budget.kind == Budget::Kind::FailIf ? comparison_holds : !comparison_holds;
    if (broken) {
      result.broken = true;
      result.violations.push_back({process, values});
    }
  }
  return result;
}

}  // namespace memtrack
