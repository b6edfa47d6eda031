#include "analyze/module_artifacts.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace memtrack {
namespace {

using nlohmann::json;

std::vector<uint8_t> bytes_of_hex(const std::string& hex) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

bool read_whole(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *out = s.str();
  return static_cast<bool>(in) || in.eof();
}

// A section entry {"file", "address", "size"}; nullopt (and a warning) when
// its file is missing or its size differs.
std::optional<SectionBytes> section(const json& entry, const std::string& dir, std::vector<std::string>& warnings) {
  if (!entry.is_object()) return std::nullopt;
  const std::string path = dir + "/" + entry.at("file").get<std::string>();
  std::string bytes;
  if (!read_whole(path, &bytes) || bytes.size() != entry.at("size").get<uint64_t>()) {
    warnings.push_back(path + ": missing or not the size memtrack.metadata gives; left out");
    return std::nullopt;
  }
  return SectionBytes{entry.at("address").get<uint64_t>(), std::vector<uint8_t>(bytes.begin(), bytes.end())};
}

std::vector<FunctionSymbol> symbols(const std::string& path, std::vector<std::string>& warnings) {
  std::vector<FunctionSymbol> out;
  std::ifstream in(path);
  if (!in) {
    warnings.push_back(path + ": cannot read; no function names from it");
    return out;
  }
  size_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    std::istringstream fields(line);
    FunctionSymbol symbol;
    if (!(fields >> std::hex >> symbol.address >> symbol.size) || !std::getline(fields >> std::ws, symbol.name) ||
        symbol.name.empty()) {
      warnings.push_back(path + ":" + std::to_string(number) + ": not \"address size name\"; skipped");
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
  if (!read_whole(metadata_path, &text)) throw std::runtime_error("cannot read " + metadata_path);
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
        module.symbols = symbols(dir + "/" + file.at("symbols_file").get<std::string>(), result.warnings);
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
