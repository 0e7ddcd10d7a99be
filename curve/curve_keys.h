// ZeroMQ CURVE keys for sonopipe's sockets. A key is 32 bytes, written as 40 characters of Z85.
// Key files are ZeroMQ certificates as czmq and pyzmq (zmq.auth) write and read them:
//   <name>.key         public:  `public-key = "<Z85>"` (hand it to the other side)
//   <name>.key_secret  secret:  public-key and `secret-key = "<Z85>"` (mode 0600, never shared)
// Lines starting with '#' are comments; other lines are ignored.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <zmq.hpp>

namespace sonopipe::curve {

inline constexpr std::size_t kKeyTextLength = 40;           // Z85 text of a 32-byte key
inline constexpr std::size_t kMaxKeyFileBytes = 64 * 1024;  // a key file is a few hundred bytes
inline constexpr std::size_t kMaxKeysPerFolder = 10000;

struct KeyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct KeyPair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85; empty for a public key file
};

// True when `text` is 40 characters that decode as Z85.
bool valid_key_text(std::string_view text);

// Parses a key file's contents; `source` names it in errors. Throws KeyError when there is no
// valid public key, or a secret key that is not valid.
KeyPair parse_key_file(std::string_view text, const std::string& source);
// Reads a key file (a regular file of at most kMaxKeyFileBytes). Throws KeyError.
KeyPair read_key_file(const std::string& path);
// A server's public key given as its 40 characters or as the path of its key file.
std::string read_public_key(const std::string& key_or_path);
// The public keys of a key file, or of every *.key file in a folder (sorted). Throws KeyError.
std::vector<std::string> read_public_keys(const std::string& file_or_folder);

// A fresh key pair (zmq_curve_keypair).
KeyPair generate_key_pair();
// Writes <base>.key (public, mode 0644) and <base>.key_secret (public + secret, mode 0600), each
// written under a temporary name and renamed, so no half-written key is ever read. Refuses to
// overwrite existing files unless `overwrite`. Throws KeyError.
void write_key_files(const std::string& base, const KeyPair& keys, bool overwrite);

// Socket options, set before bind/connect. A server accepts only clients that the ZAP handler on
// inproc://zeromq.zap.01 of the socket's context lets in; `zap_domain` names the socket there.
void make_server(zmq::socket_t& socket, const KeyPair& server, const std::string& zap_domain);
void make_client(zmq::socket_t& socket, const std::string& server_public_key, const KeyPair& client);

}  // namespace sonopipe::curve
