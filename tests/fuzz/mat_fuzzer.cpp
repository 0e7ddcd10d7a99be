// Fuzzes the Verasonics and MUST/PyMUST .mat readers (sonopipe-import's and sonopipe-replay's
// input; mat_file.cpp over libmatio, verasonics_reader.cpp, must_reader.cpp): the input is the
// file's bytes, a MAT v5 file, opened by each reader and read to its last frame. Any such file is read or refused with FormatError, never a crash, a hang
// or another exception. libmatio runs in the reader's child process (isolated_reader.h), so what
// this checks is that the isolation turns every damaged file into one FormatError; coverage
// inside the child is not seen by libFuzzer (docs/development.md, "Fuzzing"). Inputs whose header says v7.3 are skipped: libmatio hands those to libhdf5,
// whose parser of damaged bytes is not ours to fix (docs/formats.md, "Bad files"; the HDF5 side of our
// readers is fuzzed through well-formed files, recording_fuzzer.cpp and uff_fuzzer.cpp). Seeds:
// tests/fuzz/make_corpus.py (the saves of tests/tools/formats/verasonics_files.py, and small MUST
// saves in PyMUST's layout).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tools/formats/acquisition_reader.h"
#include "tools/formats/isolated_reader.h"
#include "tools/formats/must_reader.h"
#include "tools/formats/verasonics_reader.h"

namespace {

// The MAT header's version field (bytes 124-125): 0x0200 is v7.3 (HDF5 inside), in either byte
// order since the endian indicator follows it.
bool says_v73(const std::uint8_t* data, std::size_t size) {
  if (size < 128) return false;
  return (data[124] == 0x00 && data[125] == 0x02) || (data[124] == 0x02 && data[125] == 0x00);
}

const std::string& scratch_path() {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("sonopipe-fuzz-mat-" + std::to_string(::getpid()) + ".mat")).string();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (says_v73(data, size)) return 0;
  // Three opens per input within libFuzzer's -timeout of 20 s (run-fuzzers.sh); 2 GiB is far above
  // what these small files need. SONOPIPE_READER_SECONDS_PER_STEP shortens the step (CTest's
  // entries, tests/fuzz/tests.cmake: a file on which libmatio loops then costs 5 s, not 25 s; a
  // legitimate file that took longer would be refused with FormatError, which the harness accepts).
  namespace isolation = sonopipe::formats::isolation;
  const int seconds_per_step = isolation::time_limit_from_environment() ? isolation::limits().seconds_per_step : 5;
  isolation::set_limits({seconds_per_step, std::size_t{2} << 30});
  const std::string& path = scratch_path();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  // Each data variable in turn: channel data (RcvData) and the image paths (IQData, ImgData).
  for (const char* object : {"RcvData", "IQData", "ImgData"}) {
    try {
      sonopipe::formats::ImportOptions options;
      options.object = object;
      auto reader = sonopipe::formats::open_verasonics(path, options);
      (void)reader->description();
      (void)reader->source_attributes();
      for (std::size_t f = 0; f < reader->frame_count(); ++f) (void)reader->read_frame(f);
    } catch (const sonopipe::formats::FormatError&) {
      // refused with a reason: what a damaged file must get
    }
  }
  // The MUST reader (RF + param), single frames and a two-frame ensemble.
  for (const std::size_t ensemble : {std::size_t{0}, std::size_t{2}}) {
    try {
      sonopipe::formats::ImportOptions options;
      options.ensemble = ensemble;
      auto reader = sonopipe::formats::open_must(path, options);
      (void)reader->description();
      (void)reader->source_attributes();
      for (std::size_t f = 0; f < reader->frame_count(); ++f) (void)reader->read_frame(f);
    } catch (const sonopipe::formats::FormatError&) {
      // refused with a reason
    }
  }
  std::remove(path.c_str());
  return 0;
}
