// ZeroMQ CURVE keys of a client socket (sender or subscriber): checked when given, applied before
// the socket connects.
#pragma once

#include <string>

#include <zmq.hpp>

namespace sonopipe::client {

struct CurveKeys {
  std::string server_public;  // 40-character Z85 text, as curve_keygen prints
  std::string client_public;
  std::string client_secret;
};

// Checks that each key is 40 characters of valid Z85 and that libzmq was built with CURVE; throws
// ClientError naming the bad key.
CurveKeys curve_keys(const char* server_public, const char* client_public, const char* client_secret);

// ZMQ_CURVE_SERVERKEY / PUBLICKEY / SECRETKEY on `socket` (before connect).
void apply_curve(zmq::socket_t& socket, const CurveKeys& keys);

}  // namespace sonopipe::client
