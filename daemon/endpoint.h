// Whether a bound ZeroMQ endpoint can be reached from other machines: tcp on a wildcard (`*`,
// 0.0.0.0, [::]), a named interface or an address outside 127.0.0.0/8 and ::1. ipc and inproc stay
// on this machine. The daemon warns when it binds such an endpoint (README, Security).
#pragma once

#include <string>

namespace sonopipe {

inline bool reachable_beyond_loopback(const std::string& endpoint) {
  const std::string tcp = "tcp://";
  if (endpoint.rfind(tcp, 0) != 0) return false;
  std::string host = endpoint.substr(tcp.size());
  if (const auto semicolon = host.find(';'); semicolon != std::string::npos) host = host.substr(semicolon + 1);
  if (const auto colon = host.rfind(':'); colon != std::string::npos) host = host.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return !(host.rfind("127.", 0) == 0 || host == "localhost" || host == "::1" || host == "lo");
}

}  // namespace sonopipe
