// sonopipe-import: converts a recorded acquisition (USTB UFF, Verasonics .mat, sonopipe) into a
// sonopipe recording. A bad file ends with one line naming the file, the object and what was
// expected, exit status 1, and no output file.
#include <CLI/CLI.hpp>

#include <iostream>

#include "tools/import/importer.h"
#include "wire/log_text.h"
#include "wire/version.h"

using namespace sonopipe;

int main(int argc, char** argv) {
  CLI::App app{"sonopipe-import: convert a UFF / Verasonics / sonopipe acquisition into a sonopipe recording"};
  app.set_version_flag("--version", version_line("sonopipe-import"));
  std::string source, output;
  formats::ImportOptions options;
  app.add_option("file", source, "the acquisition (format detected from its contents)")->required();
  app.add_option("--out", output, "the sonopipe recording to write (replaced if it exists)")->required();
  app.add_option("--object", options.object,
                 "UFF/.mat: the object to import (default: the first channel or beamformed data)");
  app.add_option("--ensemble", options.ensemble,
                 "group this many acquisition frames into one ARFI set (0 = one frame each)")
      ->capture_default_str();
  app.add_option("--stream-id", options.stream_id, "stream id of the imported frames (UFF/.mat)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const import::ImportReport report = import::import_acquisition(source, output, options);
    std::cout << "sonopipe-import: " << source << " (" << report.description << ") -> " << output << ": "
              << report.frames << " frames, " << static_cast<double>(report.bytes) / 1e6 << " MB" << std::endl;
    return 0;
  } catch (const std::exception& e) {
    // One line whatever the file held: a damaged object name may carry newlines or control bytes.
    std::cerr << "sonopipe-import: " << log_safe(e.what(), 4096) << "\n";
    return 1;
  }
}
