#include "curve/curve_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

namespace sonopipe::curve {
namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

// `name = "value"` (quotes optional) -> value, when the trimmed line starts with name.
bool key_value(std::string_view line, std::string_view name, std::string& value) {
  if (line.substr(0, name.size()) != name) return false;
  const auto equals = line.find('=', name.size());
  if (equals == std::string_view::npos || !trim(line.substr(name.size(), equals - name.size())).empty()) return false;
  std::string_view rest = trim(line.substr(equals + 1));
  if (rest.size() >= 2 && (rest.front() == '"' || rest.front() == '\'') && rest.back() == rest.front())
    rest = rest.substr(1, rest.size() - 2);
  value = std::string(rest);
  return true;
}

std::string read_small_file(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    throw KeyError(path + ": not a key file (missing, or not a regular file)");
  const auto size = std::filesystem::file_size(path, error);
  if (error || size > kMaxKeyFileBytes)
    throw KeyError(path + ": not a key file (over " + std::to_string(kMaxKeyFileBytes) + " bytes)");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw KeyError(path + ": cannot be read");
  std::string text(size, '\0');
  file.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<std::size_t>(file.gcount()));
  return text;
}

void write_file(const std::string& path, const std::string& text, mode_t mode, bool overwrite) {
  if (!overwrite && std::filesystem::exists(path))
    throw KeyError(path + " exists; refusing to overwrite a key (--force replaces it)");
  const std::string temporary = path + ".tmp" + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw KeyError("cannot create " + temporary + ": " + std::strerror(errno));
  ::fchmod(fd, mode);  // the umask must not widen or narrow what a key file's mode says
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temporary.c_str());
    throw KeyError("cannot write " + path + ": " + why);
  }
}

std::string certificate_text(const KeyPair& keys, bool with_secret) {
  std::array<char, 64> when{};
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(when.data(), when.size(), "%Y-%m-%d %H:%M:%S UTC", &utc);
  std::string text = "#   ****  Generated on " + std::string(when.data()) + " by sonopipe-keygen  ****\n";
  text += with_secret ? "#   ZeroMQ CURVE **Secret** Certificate\n"
                        "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n"
                      : "#   ZeroMQ CURVE Public Certificate\n"
                        "#   Exchange securely, or use a secure mechanism to verify the contents\n"
                        "#   of this file after exchange. Store public certificates in your home\n"
                        "#   directory, in the .curve subdirectory.\n";
  text += "\nmetadata\ncurve\n    public-key = \"" + keys.public_key + "\"\n";
  if (with_secret) text += "    secret-key = \"" + keys.secret_key + "\"\n";
  return text;
}

}  // namespace

bool valid_key_text(std::string_view text) {
  if (text.size() != kKeyTextLength) return false;
  const std::string terminated(text);
  std::array<std::uint8_t, 32> bytes{};
  return zmq_z85_decode(bytes.data(), terminated.c_str()) != nullptr;
}

KeyPair parse_key_file(std::string_view text, const std::string& source) {
  KeyPair keys;
  bool has_public = false, has_secret = false;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = trim(text.substr(start, end - start));
    start = end + 1;
    if (line.empty() || line.front() == '#') continue;
    std::string value;
    if (key_value(line, "public-key", value)) {
      keys.public_key = value;
      has_public = true;
    } else if (key_value(line, "secret-key", value)) {
      keys.secret_key = value;
      has_secret = true;
    }
  }
  if (!has_public) throw KeyError(source + ": no public-key line; expected a ZeroMQ key file (sonopipe-keygen)");
  if (!valid_key_text(keys.public_key))
    throw KeyError(source + ": public-key is not 40 characters of Z85");
  if (has_secret && !valid_key_text(keys.secret_key))
    throw KeyError(source + ": secret-key is not 40 characters of Z85");
  return keys;
}

KeyPair read_key_file(const std::string& path) { return parse_key_file(read_small_file(path), path); }

std::string read_public_key(const std::string& key_or_path) {
  if (valid_key_text(key_or_path)) return key_or_path;
  return read_key_file(key_or_path).public_key;
}

std::vector<std::string> read_public_keys(const std::string& file_or_folder) {
  std::error_code error;
  if (!std::filesystem::is_directory(file_or_folder, error)) return {read_key_file(file_or_folder).public_key};
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(file_or_folder, error)) {
    if (entry.path().extension() != ".key" || !entry.is_regular_file(error)) continue;
    if (files.size() == kMaxKeysPerFolder)
      throw KeyError(file_or_folder + ": more than " + std::to_string(kMaxKeysPerFolder) + " key files");
    files.push_back(entry.path().string());
  }
  if (error) throw KeyError(file_or_folder + ": cannot list the folder: " + error.message());
  std::sort(files.begin(), files.end());
  std::vector<std::string> keys;
  for (const std::string& file : files) keys.push_back(read_key_file(file).public_key);
  return keys;
}

KeyPair generate_key_pair() {
  std::array<char, kKeyTextLength + 1> public_key{}, secret_key{};
  if (zmq_curve_keypair(public_key.data(), secret_key.data()) != 0)
    throw KeyError(std::string("zmq_curve_keypair: ") + zmq_strerror(zmq_errno()) +
                   " (libzmq built without CURVE?)");
  return KeyPair{public_key.data(), secret_key.data()};
}

void write_key_files(const std::string& base, const KeyPair& keys, bool overwrite) {
  if (!valid_key_text(keys.public_key) || !valid_key_text(keys.secret_key))
    throw KeyError("refusing to write an invalid key pair to " + base);
  // Secret first: a public key without its secret is useless, the reverse is recoverable.
  write_file(base + ".key_secret", certificate_text(keys, true), 0600, overwrite);
  write_file(base + ".key", certificate_text(keys, false), 0644, overwrite);
}

void make_server(zmq::socket_t& socket, const KeyPair& server, const std::string& zap_domain) {
  socket.set(zmq::sockopt::curve_server, true);
  socket.set(zmq::sockopt::curve_secretkey, server.secret_key);
  socket.set(zmq::sockopt::zap_domain, zap_domain);
}

void make_client(zmq::socket_t& socket, const std::string& server_public_key, const KeyPair& client) {
  socket.set(zmq::sockopt::curve_serverkey, server_public_key);
  socket.set(zmq::sockopt::curve_publickey, client.public_key);
  socket.set(zmq::sockopt::curve_secretkey, client.secret_key);
}

}  // namespace sonopipe::curve
