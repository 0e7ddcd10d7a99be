// sonopiped: placeholder entry point until the daemon lands (issue 2).
#include <CLI/CLI.hpp>
#include <iostream>

#include "pipeline/registry.h"

int main(int argc, char** argv) {
  CLI::App app{"sonopiped: real-time ultrasound pipeline daemon"};
  bool list_stages = false;
  app.add_flag("--list-stages", list_stages, "print every stage with its parameters");
  CLI11_PARSE(app, argc, argv);
  if (list_stages) std::cout << sonopipe::builtin_stages().describe();
  return 0;
}
