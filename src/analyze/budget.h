// Memory budgets: `diff --fail-if EXPR` and `check --max EXPR`. A small
// expression language over the figures of recording_diff.h, documented in
// docs/REPORT.md ("Budgets"):
//
//   budget     = [scope "."] figure comparison value
//   scope      = "total" | "each" | "process(" NAME ")"
//   comparison = "<" | "<=" | ">" | ">=" | "==" | "!="
//   value      = ["+" | "-"] number [unit]       unit: B KiB MiB GiB TiB, or %
//
// An unsigned value without % is the head's figure; a signed one the change
// from base to head; a percentage the relative change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/recording_diff.h"

namespace memtrack {

// A malformed expression: where (0-based byte offset in the text) and why.
class BudgetSyntaxError : public std::runtime_error {
 public:
  BudgetSyntaxError(size_t position, const std::string& reason)
      : std::runtime_error(reason), position_(position) {}
  size_t position() const { return position_; }

 private:
  size_t position_;
};

struct Budget {
  enum class Scope { Total, Each, Process };
  enum class Comparison { Less, LessEqual, Greater, GreaterEqual, Equal, NotEqual };
  enum class Value { Absolute, Change, Relative };
  // --fail-if: broken when the comparison holds; --max: broken when it does not.
  enum class Kind { FailIf, Max };

  std::string text;  // as given
  Kind kind = Kind::FailIf;
  Scope scope = Scope::Total;
  std::string process;  // Scope::Process: the name selected
  Figure figure = Figure::Peak;
  Comparison comparison = Comparison::Greater;
  Value value_kind = Value::Absolute;
  long double value = 0;  // bytes or a count; a percentage for Relative
  size_t value_position = 0;  // where the value starts in text (for errors about it)
};

// Throws BudgetSyntaxError.
Budget parse_budget(std::string_view text, Budget::Kind kind);

// "peak>+5%": the text with a caret under `position` and the reason, for
// error messages: "at column 6: expected a number\n  peak>+x%\n       ^".
std::string describe_syntax_error(std::string_view text, const BudgetSyntaxError& error);

// One figure that broke a budget: of the totals or of a process.
struct BudgetViolation {
  const ProcessMatch* process = nullptr;  // null for the totals
  FigureChange values;
};

struct BudgetResult {
  const Budget* budget = nullptr;
  bool broken = false;
  // Why the budget cannot be evaluated on these recordings (a figure they
  // lack, a process name no run has); empty when it was evaluated.
  std::string error;
  std::vector<BudgetViolation> violations;
};

// With both runs (diff): absolute values test the head. With one (check:
// `base` null, the processes of process_tree()): only absolute values mean
// something (validate_for_single_recording). The result refers to the
// budget and to the processes: they must outlive it.
BudgetResult evaluate_budget(const Budget& budget, const Report* base, const Report& head,
                             const std::vector<ProcessMatch>& processes);

// check: a change or a relative value needs two recordings. Throws
// BudgetSyntaxError pointing at the value.
void validate_for_single_recording(const Budget& budget);

}  // namespace memtrack
