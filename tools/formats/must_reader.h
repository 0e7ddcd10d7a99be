// MUST / PyMUST channel RF saves (.mat with `RF` [samples x elements (x frames)] and the `param`
// structure of MUST's functions: fs, fc, c, t0, pitch, PRF, TXdelay), e.g. PyMUST's example data
// PWI_disk.mat. Read as channel IQ (stages/beamform/channel_conventions.h): MUST files are often
// bandpass sampled (PWI_disk: fs = 4/3 fc), where a Hilbert transform gives the wrong phase, so the
// RF is demodulated at fc as MUST's rf2iq does: IQ = 2 lowpass(RF exp(-j 2 pi fc t)), t the sample
// time (t0 included), the low-pass a zero-phase Hann-windowed sinc of kDemodulationTaps taps cut
// at fs/4 (halfway to the image of the negative band, which lands at fs/2 when fs = 4/3 fc).
// Frames: one per MUST frame, complex64 [transmit=1, element, sample]; with ImportOptions.ensemble N,
// N consecutive frames form one Doppler ensemble [frame, transmit, element, sample] (axis `frame`,
// spacing 1/PRF, vector ensemble_time_s; stages/doppler/doppler_conventions.h).
// Only unsteered plane waves are read (TXdelay all equal); other delay laws are refused.
#pragma once

#include <complex>
#include <memory>
#include <string>
#include <vector>

#include "tools/formats/acquisition_reader.h"

namespace sonopipe::formats {

inline constexpr int kDemodulationTaps = 21;

bool is_must_mat(const std::string& path);  // a MAT file with `RF` and `param`, and no Verasonics `Trans`
std::unique_ptr<AcquisitionReader> open_must(const std::string& path, const ImportOptions& options);

// The demodulation above on one line of RF (`samples` values): IQ out.
void demodulate_line(const double* rf, std::size_t samples, double sampling_frequency_hz, double center_frequency_hz,
                     double first_sample_time_s, std::complex<float>* iq);

}  // namespace sonopipe::formats
