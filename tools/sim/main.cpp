// sonopipe-sim: writes synthetic recordings (HDF5, tools/common/recording.h), one subcommand per chain.
#include <iostream>

#include "tools/sim/commands.h"
#include "wire/version.h"

int main(int argc, char** argv) {
  CLI::App app{"sonopipe-sim: write synthetic recordings with ground truth"};
  app.set_version_flag("--version", sonopipe::version_line("sonopipe-sim"));
  app.require_subcommand(1);
  sonopipe::sim::add_speckle_command(app);
  sonopipe::sim::add_perfusion_command(app);
  sonopipe::sim::add_arfi_command(app);
  sonopipe::sim::add_strain_command(app);
  sonopipe::sim::add_channel_command(app);
  sonopipe::sim::add_flow_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "sonopipe-sim: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
