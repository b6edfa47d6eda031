// The error of a failed system call: "what: strerror(errno)".
#pragma once

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace memtrack {

inline std::runtime_error system_error(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace memtrack
