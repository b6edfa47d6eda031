#include "analyze/module_artifacts.h"

#include <nlohmann/json.hpp>
#include <sstream>
#include <optional>
#include <stdexcept>

#include "io/untrusted_file.h"

namespace memtrack {
namespace {

using nlohmann::json;

std::vector<uint8_t> bytes_of_hex(const std::string& hex) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

// export-modules writes a few MB per file (a big library's symbols and
// CFI); anything larger is not its output.
constexpr uint64_t kMaxModuleFileBytes = uint64_t{256} << 20;

// A file named by memtrack.metadata: only inside DIR (the metadata may come
// from elsewhere, like the artifact), a regular file, at most the cap.
// nullopt and a warning when it is not.
std::optional<std::string> read_listed(const std::string& dir, const std::string& name,
                                       std::vector<std::string>& warnings) {
  try {
    return UntrustedFile::open_beneath(dir, name, kMaxModuleFileBytes).read_all();
  } catch (const UntrustedFileError& e) {
    warnings.push_back(std::string(e.what()) + "; left out");
    return std::nullopt;
  }
}

// A section entry {"file", "address", "size"}; nullopt (and a warning) when
// its file is missing or its size differs.
std::optional<SectionBytes> section(const json& entry, const std::string& dir, std::vector<std::string>& warnings) {
  if (!entry.is_object()) return std::nullopt;
  const std::string name = entry.at("file").get<std::string>();
  std::optional<std::string> bytes = read_listed(dir, name, warnings);
  if (!bytes) return std::nullopt;
  if (bytes->size() != entry.at("size").get<uint64_t>()) {
    warnings.push_back(dir + "/" + name + ": not the size memtrack.metadata gives; left out");
    return std::nullopt;
  }
  return SectionBytes{entry.at("address").get<uint64_t>(), std::vector<uint8_t>(bytes->begin(), bytes->end())};
}

std::vector<FunctionSymbol> symbols(const std::string& dir, const std::string& name,
                                    std::vector<std::string>& warnings) {
  std::vector<FunctionSymbol> out;
  std::optional<std::string> text = read_listed(dir, name, warnings);
  if (!text) return out;
  std::istringstream in(*text);
  size_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    std::istringstream fields(line);
    FunctionSymbol symbol;
    if (!(fields >> std::hex >> symbol.address >> symbol.size) || !std::getline(fields >> std::ws, symbol.name) ||
        symbol.name.empty()) {
      warnings.push_back(dir + "/" + name + ":" + std::to_string(number) + ": not \"address size name\"; skipped");
      continue;
    }
    out.push_back(std::move(symbol));
  }
  return out;
}

}  // namespace

ModuleArtifacts read_module_artifacts(const std::string& dir) {
  const std::string metadata_path = dir + "/memtrack.metadata";
  std::string text;
  try {
    text = UntrustedFile::open(metadata_path, kMaxModuleFileBytes).read_all();
  } catch (const UntrustedFileError& e) {
    throw std::runtime_error(std::string("cannot read ") + e.what());
  }
  ModuleArtifacts result;
  try {
    const json metadata = json::parse(text);
    if (metadata.at("version") != 1) throw std::runtime_error("version is not 1");
    for (const auto& [key, file] : metadata.at("files").items()) {
      if (file.at("status") != "exported") continue;
      ModuleInfo module;
      module.path = file.at("path").get<std::string>();
      if (file.at("build_id").is_string()) module.build_id = bytes_of_hex(file.at("build_id").get<std::string>());
      if (file.at("dev").is_number()) module.dev = file.at("dev").get<uint64_t>();
      if (file.at("ino").is_number()) module.ino = file.at("ino").get<uint64_t>();
      for (const json& s : file.at("load_segments"))
        module.load_segments.push_back({s.at("vaddr").get<uint64_t>(), s.at("offset").get<uint64_t>(),
                                        s.at("filesz").get<uint64_t>(), s.at("memsz").get<uint64_t>(),
                                        s.at("flags").get<uint32_t>()});
      module.eh_frame = section(file.at("eh_frame"), dir, result.warnings);
      if (module.eh_frame) module.eh_frame_hdr = section(file.at("eh_frame_hdr"), dir, result.warnings);
      module.debug_frame = section(file.at("debug_frame"), dir, result.warnings);
      if (file.at("symbols_file").is_string())
        module.symbols = symbols(dir, file.at("symbols_file").get<std::string>(), result.warnings);
      if (file.at("debug_link").is_object())
        module.debug_link = DebugLink{file["debug_link"].at("name").get<std::string>(),
                                      file["debug_link"].at("crc").get<uint32_t>()};
      if (file.at("debug_file").is_string()) module.debug_file = file.at("debug_file").get<std::string>();
      result.modules.push_back(std::move(module));
    }
  } catch (const std::exception& e) {  // json's parse, type and missing-key errors
    throw std::runtime_error(metadata_path + ": " + e.what());
  }
  return result;
}

}  // namespace memtrack
