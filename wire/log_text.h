// Text from outside (header fields, axis names, paths a client chose) on its way into a log line:
// capped and with control characters escaped, so one message can neither flood the log nor forge
// lines of its own.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace sonopipe {

inline constexpr std::size_t kLogTextLimit = 300;  // characters of outside text per log line

inline std::string log_safe(std::string_view text, std::size_t limit = kLogTextLimit) {
  std::string out;
  out.reserve(std::min(text.size(), limit) + 32);
  std::size_t used = 0;
  for (; used < text.size() && out.size() < limit; ++used) {
    const unsigned char c = static_cast<unsigned char>(text[used]);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (used < text.size()) out += "... (" + std::to_string(text.size() - used) + " more bytes)";
  return out;
}

}  // namespace sonopipe
