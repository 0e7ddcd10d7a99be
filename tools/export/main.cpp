// sonopipe-export: writes a sonopipe recording's raw frames (--stream) or results (--result) as a
// USTB UFF file that uff.read_object (MATLAB), PyUFF and sonopipe-import open.
#include <CLI/CLI.hpp>

#include <iostream>

#include "tools/export/exporter.h"
#include "wire/version.h"

using namespace sonopipe;

int main(int argc, char** argv) {
  CLI::App app{"sonopipe-export: a sonopipe recording's frames or results as USTB UFF"};
  app.set_version_flag("--version", version_line("sonopipe-export"));
  std::string recording, output;
  exporter::ExportOptions options;
  std::uint32_t stream = 0;
  app.add_option("recording", recording, "sonopipe recording (sonopipe-sim, sonopipe-record, sonopipe-import)")
      ->required()->check(CLI::ExistingFile);
  app.add_option("--out", output, "UFF file to write (replaced if it exists)")->required();
  auto* result_option = app.add_option("--result", options.result, "export the results of pipeline/output");
  auto* stream_option = app.add_option("--stream", stream, "export this stream's raw frames (default: the first stream)");
  result_option->excludes(stream_option);
  app.add_flag("--double", options.double_precision, "store float64 values instead of USTB's single precision");
  CLI11_PARSE(app, argc, argv);
  if (*stream_option) options.stream = stream;
  try {
    const exporter::ExportReport report = exporter::export_uff(recording, output, options);
    std::cout << "sonopipe-export: " << recording << " " << report.source << " -> " << output << " (" << report.object << "): "
              << report.frames << " frames as " << report.uff_frames << " UFF frames" << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "sonopipe-export: " << e.what() << "\n";
    return 1;
  }
}
