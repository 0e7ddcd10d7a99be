// sonopipe-keygen: writes a CURVE key pair as ZeroMQ key files (the format czmq and pyzmq's zmq.auth
// read): <base>.key, the public key to hand to the other side, and <base>.key_secret (mode 0600).
//   sonopipe-keygen keys/server            the daemon's pair (security.curve.server_secret_key_file)
//   sonopipe-keygen keys/clients/scanner   a client's pair; the daemon lists keys/clients/ as
//                                          authorized_client_keys, the client uses the .key_secret
// Exit codes: 0 written, 1 not written (exists without --force, cannot write), 2 bad arguments.
#include <CLI/CLI.hpp>

#include <iostream>

#include "curve/curve_keys.h"
#include "wire/version.h"

int main(int argc, char** argv) {
  CLI::App app{"sonopipe-keygen: a CURVE key pair for sonopiped's sockets or one of its clients"};
  app.set_version_flag("--version", sonopipe::version_line("sonopipe-keygen"));
  std::string base;
  bool force = false;
  app.add_option("base", base, "writes <base>.key (public) and <base>.key_secret (secret, mode 0600)")->required();
  app.add_flag("--force", force, "replace existing key files");
  CLI11_PARSE(app, argc, argv);
  try {
    const sonopipe::curve::KeyPair keys = sonopipe::curve::generate_key_pair();
    sonopipe::curve::write_key_files(base, keys, force);
    std::cout << "wrote " << base << ".key (public) and " << base << ".key_secret (secret, mode 0600)\n"
              << "public key: " << keys.public_key << "\n";
  } catch (const sonopipe::curve::KeyError& e) {
    std::cerr << "sonopipe-keygen: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
