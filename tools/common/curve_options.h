// The CURVE flags every tool that connects to the daemon takes (one place, one wording).
#pragma once

#include <CLI/CLI.hpp>

#include "tools/common/zmq_io.h"

namespace sonopipe::tools {

inline void add_curve_options(CLI::App& app, CurveClient& curve) {
  app.add_option("--curve-server-key", curve.server_key,
                 "the daemon's CURVE public key (40 characters, or its .key file); with security.curve");
  app.add_option("--curve-client-key-file", curve.client_key_file,
                 "this client's key file (.key_secret from sonopipe-keygen); its public key must be authorized");
}

}  // namespace sonopipe::tools
