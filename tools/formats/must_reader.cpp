#include "tools/formats/must_reader.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "stages/beamform/channel_conventions.h"
#include "stages/doppler/doppler_conventions.h"
#include "tools/formats/isolated_reader.h"
#include "tools/formats/mat_file.h"

namespace sonopipe::formats {
namespace {

constexpr double kPi = std::numbers::pi;

class MustReader : public AcquisitionReader {
 public:
  MustReader(const std::string& path, const ImportOptions& options) : file_(path), options_(options) {
    mat::Value param = file_.read("param");
    if (!param.is_struct()) param.fail("expected MUST's parameter structure");
    auto number = [&](const char* name, bool required, double fallback) {
      const std::optional<mat::Value> value = param.find_field(name);
      if (!value) {
        if (required) param.fail(std::string("missing field '") + name + "'");
        return fallback;
      }
      return value->scalar();
    };
    fs_ = number("fs", true, 0);
    fc_ = number("fc", true, 0);
    c_ = number("c", false, 1540);
    t0_ = number("t0", false, 0);
    prf_ = number("PRF", false, 0);
    pitch_ = number("pitch", true, 0);
    if (!(fs_ > 0) || !(fc_ > 0) || !(c_ > 0) || !(pitch_ > 0)) param.fail("fs, fc, c and pitch must be > 0");
    if (auto delays = param.find_field("TXdelay")) {
      const std::vector<double> d = delays->numbers();
      for (double v : d)
        if (v != d.front()) delays->fail("only unsteered plane waves (all TXdelay equal) are read");
      transmit_delay_s_ = d.empty() ? 0.0 : d.front();
    }
    mat::Value rf = file_.read("RF");
    if (!rf.is_numeric()) rf.fail("expected a numeric array [samples x elements (x frames)]");
    const std::vector<std::size_t> dims = rf.dims();
    if (dims.size() < 2 || dims.size() > 3) rf.fail("expected 2 or 3 dimensions [samples x elements (x frames)]");
    samples_ = dims[0];
    elements_ = dims[1];
    frames_ = dims.size() == 3 ? dims[2] : 1;
    if (samples_ < 2 || elements_ < 1) rf.fail("too few samples or elements");
    if (auto n = param.find_field("Nelements"); n && n->scalar() != static_cast<double>(elements_))
      n->fail("Nelements differs from RF's element count " + std::to_string(elements_));
    rf_ = rf.numbers();
    group_ = options.ensemble > 0 ? options.ensemble : 1;
    if (frames_ % group_ != 0)
      fail(path, "RF", std::to_string(frames_) + " frames do not divide into ensembles of " + std::to_string(group_));
    if (options.ensemble > 0 && !(prf_ > 0)) param.fail("an ensemble needs the PRF (param.PRF)");
    attributes_ = {{"source_format", "must"},
                   {"source_file", path},
                   {"must_rf_dims", std::to_string(samples_) + "x" + std::to_string(elements_) + "x" + std::to_string(frames_)},
                   {"must_demodulation", "IQ = 2 lowpass(RF exp(-j 2 pi fc t)), " + std::to_string(kDemodulationTaps) +
                                             "-tap Hann-windowed sinc cut at fs/4 (tools/formats/must_reader.h)"}};
    if (prf_ > 0) attributes_["must_prf_hz"] = std::to_string(prf_);
    if (options.ensemble > 0) attributes_["import_ensemble"] = std::to_string(options.ensemble);
  }

  std::string description() const override { return "MUST/PyMUST RF .mat " + file_.version(); }
  std::size_t frame_count() const override { return frames_ / group_; }
  std::map<std::string, std::string> source_attributes() const override { return attributes_; }

  FrameInfo frame_info(std::size_t index) override { return {options_.stream_id, time_ns(index * group_)}; }

  recording::Frame read_frame(std::size_t index) override {
    if (index >= frame_count()) fail(file_.path(), "RF", "frame " + std::to_string(index) + " does not exist");
    recording::Frame frame;
    FrameMeta& m = frame.meta;
    m.stream_id = options_.stream_id;
    m.sequence = index;
    m.acquisition_time_ns = time_ns(index * group_);
    m.kind = FrameKind::channel_iq;
    m.sampling_frequency_hz = fs_;
    m.center_frequency_hz = fc_;
    m.demodulation_frequency_hz = fc_;
    m.speed_of_sound_m_per_s = c_;
    m.payload.dtype = DType::complex64;
    const double first_x = -(static_cast<double>(elements_) - 1) / 2 * pitch_;
    m.payload.axes = {{std::string(channel::transmit_axis), 1},
                      {std::string(channel::element_axis), static_cast<std::int64_t>(elements_), pitch_, "m", first_x},
                      {std::string(channel::sample_axis), static_cast<std::int64_t>(samples_), 1 / fs_, "s", t0_}};
    if (options_.ensemble > 0) {
      m.payload.axes.insert(m.payload.axes.begin(),
                            Axis{doppler::kFrameAxis, static_cast<std::int64_t>(group_), 1 / prf_, "s", 0.0});
      std::vector<double> times(group_);
      for (std::size_t n = 0; n < group_; ++n) times[n] = static_cast<double>(n) / prf_;
      m.vectors[doppler::kEnsembleTimeVector] = times;
    }
    std::vector<double> x(elements_);
    for (std::size_t e = 0; e < elements_; ++e) x[e] = first_x + static_cast<double>(e) * pitch_;
    m.vectors[std::string(channel::element_x_m)] = x;
    m.vectors[std::string(channel::transmit_wavefront)] = {channel::wavefront_plane};
    m.vectors[std::string(channel::transmit_angle_rad)] = {0.0};
    m.vectors[std::string(channel::transmit_source_x_m)] = {0.0};
    m.vectors[std::string(channel::transmit_source_z_m)] = {0.0};
    if (transmit_delay_s_ != 0) m.vectors[std::string(channel::transmit_delay_s)] = {transmit_delay_s_};
    m.attributes["source_format"] = "must";
    std::vector<std::complex<float>> iq(group_ * elements_ * samples_);
    for (std::size_t f = 0; f < group_; ++f)
      for (std::size_t e = 0; e < elements_; ++e)  // MATLAB column-major: samples of one element are contiguous
        demodulate_line(rf_.data() + ((index * group_ + f) * elements_ + e) * samples_, samples_, fs_, fc_, t0_,
                        iq.data() + (f * elements_ + e) * samples_);
    frame.payload.resize(iq.size() * sizeof(std::complex<float>));
    std::memcpy(frame.payload.data(), iq.data(), frame.payload.size());
    return frame;
  }

 private:
  std::int64_t time_ns(std::size_t frame) const {
    return prf_ > 0 ? std::llround(static_cast<double>(frame) / prf_ * 1e9) : 0;
  }

  mat::File file_;
  ImportOptions options_;
  double fs_ = 0, fc_ = 0, c_ = 0, t0_ = 0, prf_ = 0, pitch_ = 0, transmit_delay_s_ = 0;
  std::size_t samples_ = 0, elements_ = 0, frames_ = 0, group_ = 1;
  std::vector<double> rf_;  // column-major [samples, elements, frames]
  std::map<std::string, std::string> attributes_;
};

}  // namespace

void demodulate_line(const double* rf, std::size_t samples, double fs, double fc, double t0, std::complex<float>* iq) {
  // Zero-phase low-pass: Hann-windowed sinc cut at fs/4, unit gain at 0 Hz.
  constexpr int half = kDemodulationTaps / 2;
  double taps[kDemodulationTaps], sum = 0;
  for (int k = -half; k <= half; ++k) {
    const double sinc = k == 0 ? 0.5 : std::sin(kPi * k / 2) / (kPi * k);  // cut-off fs/4: 2 fcut/fs = 1/2
    const double window = 0.5 * (1 + std::cos(kPi * k / (half + 1)));
    taps[k + half] = sinc * window;
    sum += taps[k + half];
  }
  std::vector<std::complex<double>> mixed(samples);
  for (std::size_t n = 0; n < samples; ++n)
    mixed[n] = rf[n] * std::polar(1.0, -2 * kPi * fc * (t0 + static_cast<double>(n) / fs));
  for (std::size_t n = 0; n < samples; ++n) {
    std::complex<double> acc = 0;
    for (int k = -half; k <= half; ++k) {
      const auto m = static_cast<std::ptrdiff_t>(n) + k;
      if (m >= 0 && m < static_cast<std::ptrdiff_t>(samples)) acc += taps[k + half] * mixed[m];
    }
    iq[n] = std::complex<float>(2.0 * acc / sum);
  }
}

bool is_must_mat(const std::string& path) {
  if (!mat::is_mat_file(path)) return false;
  const std::optional<bool> answer = isolation::check_in_child([&] {
    mat::File file(path);
    return file.has("RF") && file.has("param") && !file.has("Trans");
  });
  return answer.value_or(false);
}

std::unique_ptr<AcquisitionReader> open_must(const std::string& path, const ImportOptions& options) {
  if (!mat::is_mat_file(path)) fail(path, "", "not a MAT file (no MATLAB v5/v7.3 header)");
  // libmatio in a child process, as for Verasonics saves (isolated_reader.h).
  return isolation::open_in_child(
      path, options,
      [](const std::string& file, const ImportOptions& choices) {
        return std::unique_ptr<AcquisitionReader>(std::make_unique<MustReader>(file, choices));
      },
      "libmatio");
}

}  // namespace sonopipe::formats
