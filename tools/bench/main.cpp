// sonopipe-bench: benchmark suites, one subcommand per chain; each prints a table.
#include <iostream>

#include "tools/bench/commands.h"
#include "wire/version.h"

int main(int argc, char** argv) {
  CLI::App app{"sonopipe-bench: measure throughput and latency (tables on stdout)"};
  app.set_version_flag("--version", sonopipe::version_line("sonopipe-bench"));
  app.require_subcommand(1);
  sonopipe::bench::add_core_bench(app);
  sonopipe::bench::add_perfusion_bench(app);
  sonopipe::bench::add_arfi_bench(app);
  sonopipe::bench::add_strain_bench(app);
  sonopipe::bench::add_beamform_bench(app);
  sonopipe::bench::add_devices_bench(app);
  sonopipe::bench::add_doppler_bench(app);
  sonopipe::bench::add_doppler_daemon_bench(app);
  sonopipe::bench::add_soak_bench(app);
  sonopipe::bench::add_shm_transport_bench(app);
  sonopipe::bench::add_live_bench(app);
  sonopipe::bench::add_acknowledgement_bench(app);
  sonopipe::bench::add_host_copy_bench(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "sonopipe-bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
