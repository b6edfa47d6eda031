#include "module/module_artifacts.h"

#include <fmt/format.h>

#include <cctype>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "io/untrusted_file.h"
#include "util/hex.h"

namespace memtrack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Json = nlohmann::ordered_json;

constexpr std::string_view kDeletedSuffix = " (deleted)";

// The file's first recorded name, reduced to characters safe in any file name.
std::string safe_basename(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  if (name.ends_with(kDeletedSuffix)) name.resize(name.size() - kDeletedSuffix.size());
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' && c != '+') c = '_';
  return name.empty() ? "file" : name;
}

// From the recorded identity only, so that a key does not depend on what is
// on disk now.
std::string key_base(const ModuleIdentity& identity, const std::string& first_path) {
  if (identity.by_build_id()) return hex(identity.build_id).substr(0, 12) + "-" + safe_basename(first_path);
  return fmt::format("dev{:x}-ino{}-{}", identity.dev, identity.ino, safe_basename(first_path));
}

void write_bytes(const fs::path& path, const std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

Json section_entry(const std::optional<SectionBytes>& section, const std::string& name, const fs::path& dir) {
  if (!section) return nullptr;
  write_bytes(dir / name,
              std::string_view(reinterpret_cast<const char*>(section->bytes.data()), section->bytes.size()));
  return Json{{"file", name}, {"address", section->address}, {"size", section->bytes.size()}};
}

// Writes the file's artifacts into `dir` and returns its metadata entry.
Json export_file(const std::string& key, const ModuleIdentity& identity, const LocatedModule& located,
                 const fs::path& dir) {
  Json entry;
  entry["path"] = located.path;
  entry["status"] = located.module ? "exported" : located.status;
  entry["reason"] = located.module ? Json(nullptr) : Json(located.reason);
  const bool by_build_id = identity.by_build_id();
  entry["identity"] = by_build_id ? "build-id" : "dev-ino";
  const std::vector<uint8_t>& build_id = located.module ? located.module->build_id : identity.build_id;
  entry["build_id"] = build_id.empty() ? Json(nullptr) : Json(hex(build_id));
  entry["dev"] = by_build_id ? Json(nullptr) : Json(identity.dev);
  entry["ino"] = by_build_id ? Json(nullptr) : Json(identity.ino);

  Json missing = Json::array();
  if (!located.module) {
    for (const char* item : {"symbols", "cfi", "load_segments"}) missing.push_back(item);
    for (const char* item : {"load_segments", "eh_frame", "eh_frame_hdr", "debug_frame", "debug_link", "debug_file",
                             "symbols_file"})
      entry[item] = nullptr;
    entry["symbols"] = 0;
    entry["missing"] = std::move(missing);
    return entry;
  }

  const ModuleInfo& module = *located.module;
  Json segments = Json::array();
  for (const LoadSegment& s : module.load_segments)
    segments.push_back(
        {{"vaddr", s.vaddr}, {"offset", s.offset}, {"filesz", s.filesz}, {"memsz", s.memsz}, {"flags", s.flags}});
  entry["load_segments"] = std::move(segments);
  if (module.eh_frame) {
    entry["eh_frame"] = section_entry(module.eh_frame, key + ".eh_frame", dir);
    entry["eh_frame_hdr"] = section_entry(module.eh_frame_hdr, key + ".eh_frame_hdr", dir);
    entry["debug_frame"] = nullptr;
  } else {
    entry["eh_frame"] = nullptr;
    entry["eh_frame_hdr"] = nullptr;
    entry["debug_frame"] = section_entry(module.debug_frame, key + ".debug_frame", dir);
  }
  entry["debug_link"] =
      module.debug_link ? Json{{"name", module.debug_link->name}, {"crc", module.debug_link->crc}} : Json(nullptr);
  entry["debug_file"] = module.debug_file.empty() ? Json(nullptr) : Json(module.debug_file);
  if (module.symbols.empty()) {
    entry["symbols_file"] = nullptr;
  } else {
    std::string text;
    for (const FunctionSymbol& s : module.symbols) text += fmt::format("{:x} {:x} {}\n", s.address, s.size, s.name);
    write_bytes(dir / (key + ".symbols.map"), text);
    entry["symbols_file"] = key + ".symbols.map";
  }
  entry["symbols"] = module.symbols.size();

  if (module.symbols.empty()) missing.push_back("symbols");
  if (!module.eh_frame && !module.debug_frame) missing.push_back("cfi");
  if (module.eh_frame && !module.eh_frame_hdr) missing.push_back("eh_frame_hdr");
  if (module.load_segments.empty()) missing.push_back("load_segments");
  entry["missing"] = std::move(missing);
  return entry;
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

ModuleArtifactsWriter::ModuleArtifactsWriter(const std::string& dir) : dir_(dir), files_(Json::object()) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir + ": " + ec.message());
}

std::string ModuleArtifactsWriter::add_file(const ModuleIdentity& identity, const std::string& first_path,
                                            const LocatedModule& located) {
  const std::string base = key_base(identity, first_path);
  std::string key = base;
  for (int n = 2; !keys_.insert(key).second; ++n) key = fmt::format("{}-{}", base, n);
  files_[key] = export_file(key, identity, located, dir_);
  return key;
}

void ModuleArtifactsWriter::write_metadata(const std::string& artifact, uint64_t start_monotonic_ns,
                                           Json processes) {
  Json metadata;
  metadata["version"] = 1;
  metadata["artifact"] = artifact;
  metadata["start_monotonic_ns"] = start_monotonic_ns;
  metadata["files"] = std::move(files_);
  metadata["processes"] = std::move(processes);
  write_bytes(dir_ / "memtrack.metadata", metadata.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

}  // namespace memtrack
