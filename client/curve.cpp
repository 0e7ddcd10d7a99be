#include "client/curve.h"

#include <cstdint>
#include <utility>

#include "client/status.h"

namespace sonopipe::client {
namespace {

constexpr std::size_t kZ85KeyCharacters = 40;  // a 32-byte CURVE key in Z85 text

std::string checked_key(const char* key, const char* what) {
  require(key, what);
  const std::string text(key);
  std::uint8_t decoded[32];
  if (text.size() != kZ85KeyCharacters || zmq_z85_decode(decoded, text.c_str()) == nullptr)
    throw ClientError(SP_ERROR_ARGUMENT, std::string(what) + " is not a 40-character Z85 CURVE key");
  return text;
}

}  // namespace

CurveKeys curve_keys(const char* server_public, const char* client_public, const char* client_secret) {
  CurveKeys keys{checked_key(server_public, "server_public_key"), checked_key(client_public, "client_public_key"),
                 checked_key(client_secret, "client_secret_key")};
  if (!zmq_has("curve")) throw ClientError(SP_ERROR_SOCKET, "this libzmq was built without CURVE");
  return keys;
}

void apply_curve(zmq::socket_t& socket, const CurveKeys& keys) {
  // Forty bytes of Z85 text are accepted by libzmq for each key option.
  for (const auto& [option, key] : {std::pair{ZMQ_CURVE_SERVERKEY, &keys.server_public},
                                     std::pair{ZMQ_CURVE_PUBLICKEY, &keys.client_public},
                                     std::pair{ZMQ_CURVE_SECRETKEY, &keys.client_secret}})
    if (zmq_setsockopt(socket.handle(), option, key->data(), key->size()) != 0) throw zmq::error_t();
}

}  // namespace sonopipe::client
