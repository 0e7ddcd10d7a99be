// CURVE key files: what pyzmq's zmq.auth writes is read, what sonopipe-keygen's writer makes is a
// key pair libzmq agrees with, and anything else is refused with the file named.
#include <sys/stat.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "curve/curve_keys.h"
#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

// libzmq's own test key pair (tests/testutil_security.hpp).
constexpr const char* kPublic = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID";
constexpr const char* kSecret = "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs";

struct TempDir {
  std::string path;
  TempDir() {
    char pattern[] = "/tmp/sonopipe-keys-XXXXXX";
    if (!mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

std::string public_of(const std::string& secret) {
  std::array<char, 41> out{};
  REQUIRE(zmq_curve_public(out.data(), secret.c_str()) == 0);
  return out.data();
}

}  // namespace

TEST_CASE("a secret key file as pyzmq writes it gives both keys", "[curve]") {
  REQUIRE(public_of(kSecret) == kPublic);  // the pair is a pair
  const std::string text = std::string(
      "#   ****  Generated on 2026-11-24 07:00:00.000000 by pyzmq  ****\n"
      "#   ZeroMQ CURVE **Secret** Certificate\n"
      "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n\n"
      "metadata\ncurve\n    public-key = \"") + kPublic + "\"\n    secret-key = \"" + kSecret + "\"\n";
  const curve::KeyPair keys = curve::parse_key_file(text, "client.key_secret");
  CHECK(keys.public_key == kPublic);
  CHECK(keys.secret_key == kSecret);
  const curve::KeyPair public_only =
      curve::parse_key_file(std::string("metadata\ncurve\n    public-key = \"") + kPublic + "\"\n", "client.key");
  CHECK(public_only.public_key == kPublic);
  CHECK(public_only.secret_key.empty());
}

TEST_CASE("a key file without a valid key is refused with its name", "[curve]") {
  auto refusal = [](const std::string& text) {
    try {
      curve::parse_key_file(text, "keys/x.key");
    } catch (const curve::KeyError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refusal("") == "keys/x.key: no public-key line; expected a ZeroMQ key file (sonopipe-keygen)");
  CHECK(refusal("# public-key = \"" + std::string(kPublic) + "\"\n").find("no public-key line") != std::string::npos);
  CHECK(refusal("public-key = \"short\"\n") == "keys/x.key: public-key is not 40 characters of Z85");
  // 40 characters, but '"' is not a Z85 digit.
  CHECK(refusal("public-key = \"" + std::string(39, 'a') + "\"\"\n").find("not 40 characters of Z85") != std::string::npos);
  CHECK(refusal("public-key = \"" + std::string(kPublic) + "\"\nsecret-key = \"x\"\n") ==
        "keys/x.key: secret-key is not 40 characters of Z85");
}

TEST_CASE("write_key_files writes a matching pair, the secret one with mode 0600, never over a key", "[curve]") {
  TempDir dir;
  const curve::KeyPair keys = curve::generate_key_pair();
  CHECK(public_of(keys.secret_key) == keys.public_key);
  const std::string base = dir.path + "/server";
  curve::write_key_files(base, keys, false);
  struct stat info{};
  REQUIRE(::stat((base + ".key_secret").c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);
  REQUIRE(::stat((base + ".key").c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0644);
  const curve::KeyPair secret = curve::read_key_file(base + ".key_secret");
  CHECK(secret.public_key == keys.public_key);
  CHECK(secret.secret_key == keys.secret_key);
  const curve::KeyPair shared = curve::read_key_file(base + ".key");
  CHECK(shared.public_key == keys.public_key);
  CHECK(shared.secret_key.empty());  // the public file never carries the secret
  CHECK_THROWS_AS(curve::write_key_files(base, curve::generate_key_pair(), false), curve::KeyError);
  CHECK(curve::read_key_file(base + ".key_secret").secret_key == keys.secret_key);  // untouched
  CHECK(std::filesystem::directory_iterator(dir.path) != std::filesystem::directory_iterator());
  for (const auto& entry : std::filesystem::directory_iterator(dir.path))
    CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);  // no leftovers
}

TEST_CASE("read_public_keys reads a file, or every *.key of a folder", "[curve]") {
  TempDir dir;
  const curve::KeyPair a = curve::generate_key_pair(), b = curve::generate_key_pair();
  curve::write_key_files(dir.path + "/a", a, false);
  curve::write_key_files(dir.path + "/b", b, false);
  const std::vector<std::string> keys = curve::read_public_keys(dir.path);  // *.key only, not *.key_secret
  REQUIRE(keys.size() == 2);
  CHECK(keys[0] == a.public_key);
  CHECK(keys[1] == b.public_key);
  CHECK(curve::read_public_keys(dir.path + "/b.key") == std::vector<std::string>{b.public_key});
  CHECK(curve::read_public_key(a.public_key) == a.public_key);  // given as text
  CHECK(curve::read_public_key(dir.path + "/a.key") == a.public_key);
  CHECK_THROWS_AS(curve::read_public_keys(dir.path + "/missing.key"), curve::KeyError);
  CHECK_THROWS_AS(curve::read_key_file("/dev/zero"), curve::KeyError);  // not a regular file: never read
}
