// The registry: one line per output. Each is defined next to its writer.
#include <array>
#include <string>

#include "output/output.h"

namespace memtrack {

extern const OutputFormat kTextOutput, kJsonOutput, kFoldedOutput, kPprofOutput, kSpeedscopeOutput,
    kHtmlOutput, kCsvOutput, kHeaptrackOutput, kMassifOutput;

namespace {
constexpr std::array<const OutputFormat*, 9> kOutputs = {&kTextOutput,       &kJsonOutput, &kFoldedOutput,
                                                          &kPprofOutput,      &kSpeedscopeOutput,
                                                          &kHtmlOutput,       &kCsvOutput,
                                                          &kHeaptrackOutput,  &kMassifOutput};
}  // namespace

std::span<const OutputFormat* const> output_formats() { return kOutputs; }

const OutputFormat* find_output_format(std::string_view name) {
  for (const OutputFormat* format : kOutputs)
    if (format->name == name) return format;
  return nullptr;
}

std::map<int32_t, std::string> commands_by_pid(const Report& report) {
  std::map<int32_t, std::string> commands;
  for (const ProcessReport& process : report.processes) commands[process.pid] = process.command;
  return commands;
}

std::string output_format_names(std::string_view separator) {
  std::string names;
  for (const OutputFormat* format : kOutputs) {
    if (!names.empty()) names += separator;
    names += format->name;
  }
  return names;
}

}  // namespace memtrack
