// Verasonics workspace saves (.mat v5 or v7.3) as frames: RcvData{b} as channel_rf frames in
// the conventions of stages/beamform/channel_conventions.h, IQData{n} as iq and ImgData{n} as rf
// frames. What is read and what is ignored: docs/formats.md, "Verasonics .mat saves".
#include "tools/formats/verasonics_reader.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <new>
#include <cstring>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "stages/beamform/channel_conventions.h"
#include "tools/formats/isolated_reader.h"
#include "tools/formats/mat_file.h"
#include "tools/formats/verasonics_timing.h"
#include "tools/formats/verasonics_transmit.h"

namespace sonopipe::formats {

namespace {

constexpr double kMegahertz = 1e6;
constexpr double kMillimetre = 1e-3;
// Frame period assumed when the saved sequence does not program one (documented).
constexpr std::int64_t kAssumedFramePeriodNs = 1'000'000;
constexpr double kNanosecondsPerMillisecond = 1e6;

// The variables whose presence (beside Trans) marks a Verasonics save.
constexpr const char* kDataVariables[] = {"RcvData", "IQData", "ImgData"};

double optional_scalar(const std::optional<mat::Value>& value, double fallback) {
  return value ? value->scalar() : fallback;
}

// Which buffer to read: "RcvData", "IQData{2}", "/ImgData" ("" = the first data variable present).
struct ObjectChoice {
  std::string variable;
  std::size_t buffer = 0;  // 0-based cell index
  std::string name() const { return variable + "{" + std::to_string(buffer + 1) + "}"; }
};

ObjectChoice choose_object(const mat::File& file, const std::string& requested) {
  ObjectChoice choice;
  if (requested.empty()) {
    for (const char* name : kDataVariables)
      if (file.has(name)) {
        choice.variable = name;
        return choice;
      }
    fail(file.path(), "", "no RcvData, IQData or ImgData variable");
  }
  std::string text = requested.front() == '/' ? requested.substr(1) : requested;
  const auto brace = text.find('{');
  choice.variable = text.substr(0, brace);
  if (brace != std::string::npos) {
    std::size_t index = 0;
    try {
      std::size_t used = 0;
      index = std::stoul(text.substr(brace + 1), &used);
      if (text.substr(brace + 1 + used) != "}" || index == 0) throw std::invalid_argument("index");
    } catch (const std::exception&) {
      fail(file.path(), requested, "expected NAME or NAME{n} with n >= 1");
    }
    choice.buffer = index - 1;
  }
  if (std::find(std::begin(kDataVariables), std::end(kDataVariables), choice.variable) == std::end(kDataVariables))
    fail(file.path(), requested, "expected one of RcvData, IQData, ImgData (optionally {n})");
  if (!file.has(choice.variable)) fail(file.path(), choice.variable, "missing");
  return choice;
}

// Replay order of a circular buffer of `frames` frames whose newest frame is `last` (1-based):
// the oldest frame is the one after it.
std::vector<std::size_t> circular_order(std::size_t frames, const std::optional<mat::Value>& last_frame) {
  std::vector<std::size_t> order(frames);
  std::size_t first = 0;
  if (last_frame) {
    const double last = last_frame->scalar();
    if (!(last >= 1 && last <= static_cast<double>(frames)) || last != std::floor(last))
      last_frame->fail(number_text(last) + " is not a frame of the buffer's " + std::to_string(frames));
    first = static_cast<std::size_t>(last) % frames;
  }
  for (std::size_t k = 0; k < frames; ++k) order[k] = (first + k) % frames;
  return order;
}

// Resource.<buffer>(n).lastFrame, when saved.
std::optional<mat::Value> last_frame_of(mat::File& file, const char* buffer, std::size_t index) {
  auto resource = file.find("Resource");
  if (!resource) return std::nullopt;
  auto buffers = resource->find_field(buffer);
  if (!buffers || !buffers->is_struct() || index >= buffers->count()) return std::nullopt;
  return buffers->find_field("lastFrame", index);
}

// One receive as far as the reader uses it.
struct ReceiveEntry {
  std::size_t index = 0;  // 0-based into Receive
  std::size_t buffer = 1, frame = 1, acquisition = 0;
  int mode = 0;
  std::size_t start_sample = 0, end_sample = 0;  // 1-based, inclusive
  double start_depth_wavelengths = 0.0;
  double sampling_frequency_hz = 0.0;
  double demodulation_frequency_mhz = 0.0;
  double samples_per_wave = 0.0;
  double decim_sample_rate_mhz = 0.0, quad_decim = 1.0;
  std::string sample_mode;
};

std::size_t whole_number(const mat::Value& value, double minimum) {
  const double number = value.scalar();
  if (!(number >= minimum) || number != std::floor(number) || number > 1e12)
    value.fail("expected a whole number >= " + number_text(minimum) + ", found " + number_text(number));
  return static_cast<std::size_t>(number);
}

ReceiveEntry read_receive(const mat::Value& receives, std::size_t i) {
  ReceiveEntry entry;
  entry.index = i;
  if (auto v = receives.find_field("bufnum", i)) entry.buffer = whole_number(*v, 1);
  entry.frame = whole_number(receives.field("framenum", i), 1);
  if (auto v = receives.find_field("acqNum", i)) entry.acquisition = whole_number(*v, 1);
  if (auto v = receives.find_field("mode", i)) {
    const double mode = v->scalar();
    if (mode != 0 && mode != 1) v->fail("expected 0 (replace) or 1 (accumulate), found " + number_text(mode));
    entry.mode = static_cast<int>(mode);
  }
  entry.start_sample = whole_number(receives.field("startSample", i), 1);
  const mat::Value end = receives.field("endSample", i);
  entry.end_sample = whole_number(end, static_cast<double>(entry.start_sample));
  entry.start_depth_wavelengths = optional_scalar(receives.find_field("startDepth", i), 0.0);
  const mat::Value rate = receives.field("decimSampleRate", i);
  entry.decim_sample_rate_mhz = rate.scalar();
  // quadDecim is absent on the Vantage NXT, whose decimSampleRate is already the output rate.
  entry.quad_decim = optional_scalar(receives.find_field("quadDecim", i), 1.0);
  entry.sampling_frequency_hz = entry.decim_sample_rate_mhz / entry.quad_decim * kMegahertz;
  if (!(entry.sampling_frequency_hz > 0) || !std::isfinite(entry.sampling_frequency_hz))
    rate.fail("decimSampleRate / quadDecim must be a positive rate, found " + number_text(entry.decim_sample_rate_mhz) +
              " / " + number_text(entry.quad_decim));
  entry.demodulation_frequency_mhz = optional_scalar(receives.find_field("demodFrequency", i), 0.0);
  entry.samples_per_wave = optional_scalar(receives.find_field("samplesPerWave", i), 0.0);
  if (auto v = receives.find_field("sampleMode", i); v && v->is_text()) entry.sample_mode = v->text();
  return entry;
}

// Element positions and units of Trans.
struct Probe {
  std::string name, units;
  double center_frequency_hz = 0.0;
  double metres_per_unit = 0.0;
  std::vector<double> x_m, y_m, z_m;
  std::vector<std::size_t> connector;  // element -> 0-based channel (RcvData column)
  double lens_correction = 0.0;        // in Trans.units, one way
};

Probe read_probe(mat::File& file, double speed_of_sound) {
  Probe probe;
  const mat::Value trans = file.read("Trans");
  if (auto v = trans.find_field("name"); v && v->is_text()) probe.name = v->text();
  const mat::Value frequency = trans.field("frequency");
  const double f_mhz = frequency.scalar();
  if (!(f_mhz > 0) || !std::isfinite(f_mhz)) frequency.fail("expected a positive frequency in MHz, found " + number_text(f_mhz));
  probe.center_frequency_hz = f_mhz * kMegahertz;
  const double wavelength_m = speed_of_sound / probe.center_frequency_hz;
  const mat::Value units = trans.field("units");
  probe.units = units.text();
  if (probe.units == "mm")
    probe.metres_per_unit = kMillimetre;
  else if (probe.units == "wavelengths")
    probe.metres_per_unit = wavelength_m;
  else
    units.fail("'" + probe.units + "', expected 'mm' or 'wavelengths'");

  const mat::Value positions = trans.field("ElementPos");
  const std::vector<std::size_t> dims = positions.dims();
  const std::vector<double> values = positions.numbers();
  if (dims.size() != 2 || dims[0] == 0 || dims[1] < 3)
    positions.fail("expected [elements x 3..5] (x, y, z[, azimuth, elevation])");
  const std::size_t elements = dims[0];
  for (std::size_t e = 0; e < elements; ++e) {
    // Column-major: column 1 = x, 2 = y, 3 = z.
    probe.x_m.push_back(values[e] * probe.metres_per_unit);
    probe.y_m.push_back(values[elements + e] * probe.metres_per_unit);
    probe.z_m.push_back(values[2 * elements + e] * probe.metres_per_unit);
  }
  if (auto v = trans.find_field("numelements"); v && v->scalar() != static_cast<double>(elements))
    v->fail(number_text(v->scalar()) + " elements, but ElementPos has " + std::to_string(elements) + " rows");
  if (auto v = trans.find_field("Connector")) {
    const std::vector<double> channels = v->numbers();
    if (channels.size() != elements)
      v->fail(std::to_string(channels.size()) + " entries, expected one per element (" + std::to_string(elements) + ")");
    for (double channel : channels) {
      if (!(channel >= 1) || channel != std::floor(channel) || channel > 1e6)
        v->fail("expected 1-based channel numbers, found " + number_text(channel));
      probe.connector.push_back(static_cast<std::size_t>(channel) - 1);
    }
  } else {
    for (std::size_t e = 0; e < elements; ++e) probe.connector.push_back(e);
  }
  probe.lens_correction = optional_scalar(trans.find_field("lensCorrection"), 0.0);
  return probe;
}

double read_speed_of_sound(mat::File& file) {
  const mat::Value speed = file.read("Resource").field("Parameters").field("speedOfSound");
  const double c = speed.scalar();
  if (!(c > 0) || !std::isfinite(c)) speed.fail("expected a positive speed in m/s, found " + number_text(c));
  return c;
}

// Axis spacing of the element positions: the pitch when uniform, else 0 (positions in the vectors).
double uniform_pitch(const std::vector<double>& x) {
  if (x.size() < 2) return 0.0;
  const double pitch = x[1] - x[0];
  for (std::size_t e = 1; e < x.size(); ++e)
    if (std::abs((x[e] - x[e - 1]) - pitch) > 1e-9 * std::max(1.0, std::abs(pitch)) + 1e-12) return 0.0;
  return pitch;
}

class VerasonicsReader final : public AcquisitionReader {
 public:
  VerasonicsReader(const std::string& path, const ImportOptions& options) : file_(path), options_(options) {
    choice_ = choose_object(file_, options.object);
    attributes_["source_format"] = "verasonics";  // "format" is the recording's own (sonopipe-import)
    attributes_["mat_version"] = file_.version();
    attributes_["object"] = choice_.name();
    if (choice_.variable == "RcvData")
      open_channel_data();
    else
      open_image_data();
    if (options_.ensemble > 1) {
      const std::size_t groups = order_.size() / options_.ensemble;
      if (groups == 0)
        fail(file_.path(), choice_.name(), std::to_string(order_.size()) + " frames, fewer than one ensemble of " +
                                               std::to_string(options_.ensemble));
      attributes_["ensemble"] = std::to_string(options_.ensemble);
      attributes_["frames_left_out"] = std::to_string(order_.size() - groups * options_.ensemble);
    }
    meta_.stream_id = options_.stream_id;
    meta_.attributes["source_format"] = "verasonics";
    meta_.attributes["source_object"] = choice_.name();
  }

  std::string description() const override {
    return "verasonics .mat " + file_.version() + " (" + choice_.name() + ", " +
           std::string(frame_kind_name(meta_.kind)) + ")";
  }

  std::size_t frame_count() const override {
    return options_.ensemble > 1 ? order_.size() / options_.ensemble : order_.size();
  }

  recording::Frame read_frame(std::size_t index) override {
    if (index >= frame_count())
      fail(file_.path(), choice_.name(), "frame " + std::to_string(index) + " asked for, the file has " +
                                             std::to_string(frame_count()));
    recording::Frame frame;
    frame.meta = meta_;
    frame.meta.sequence = index;
    const std::size_t group = std::max<std::size_t>(options_.ensemble, 1);
    frame.meta.acquisition_time_ns = frame_time_ns_[index * group];
    if (options_.ensemble > 1)
      frame.meta.payload.axes.insert(frame.meta.payload.axes.begin(),
                                     Axis{"time", static_cast<std::int64_t>(group), 0.0, "", 0.0});
    const std::size_t bytes = meta_.payload.byte_size();
    frame.payload.resize(bytes * group);
    for (std::size_t k = 0; k < group; ++k) read_buffer_frame(order_[index * group + k], frame.payload.data() + k * bytes);
    return frame;
  }

  FrameInfo frame_info(std::size_t index) override {
    if (index >= frame_count())
      fail(file_.path(), choice_.name(), "frame " + std::to_string(index) + " asked for, the file has " +
                                             std::to_string(frame_count()));
    return {meta_.stream_id, frame_time_ns_[index * std::max<std::size_t>(options_.ensemble, 1)]};
  }

  std::map<std::string, std::string> source_attributes() const override { return attributes_; }

 private:
  // ------------------------------------------------------------ RcvData -> channel_rf
  void open_channel_data() {
    const double c = read_speed_of_sound(file_);
    const Probe probe = read_probe(file_, c);
    const double wavelength_m = c / probe.center_frequency_hz;
    const std::size_t elements = probe.x_m.size();
    // A multiplexed probe switches elements between channels per transmit (TX.aperture selects a
    // column of HVMux.Aperture); the reader maps elements to channels through one table (Connector).
    if (auto hvmux = file_.read("Trans").find_field("HVMux"); hvmux && hvmux->is_struct())
      if (auto aperture = hvmux->find_field("Aperture")) {
        const std::vector<std::size_t> dims = aperture->dims();
        aperture->fail(std::to_string(dims.size() >= 2 ? dims[1] : 1) +
                       " aperture(s): multiplexed (HVMux) apertures are not supported");
      }

    array_ = file_.cell_array("RcvData", choice_.buffer);
    if (array_.element() != mat::MatArray::Element::int16)
      fail(file_.path(), array_.path(), "expected int16 samples [samples x channels x frames]");
    const auto& dims = array_.dims();
    for (std::size_t d = 3; d < dims.size(); ++d)
      if (dims[d] != 1) fail(file_.path(), array_.path(), "expected rank 2 or 3 [samples x channels x frames]");
    if (dims.size() < 2 || dims[0] == 0 || dims[1] == 0)
      fail(file_.path(), array_.path(), "expected [samples x channels x frames], found an empty array");
    rows_ = dims[0];
    const std::size_t channels = dims[1];
    const std::size_t buffer_frames = dims.size() >= 3 ? dims[2] : 1;
    for (std::size_t e = 0; e < elements; ++e)
      if (probe.connector[e] >= channels)
        fail(file_.path(), "Trans.Connector", "element " + std::to_string(e + 1) + " on channel " +
                                                  std::to_string(probe.connector[e] + 1) + ", but " + array_.path() +
                                                  " has " + std::to_string(channels) + " channels");
    if (elements > channels)
      fail(file_.path(), "Trans.ElementPos", std::to_string(elements) + " elements, more than the " +
                                                 std::to_string(channels) + " channels of " + array_.path());
    element_column_ = probe.connector;

    // The receives that fill this buffer, and the layout of one frame (taken from frame 1).
    const mat::Value receives = file_.read("Receive");
    if (!receives.is_struct() || receives.count() == 0) receives.fail("expected a struct array of receives");
    std::vector<ReceiveEntry> entries;
    for (std::size_t i = 0; i < receives.count(); ++i) {
      ReceiveEntry entry = read_receive(receives, i);
      if (entry.buffer != choice_.buffer + 1) continue;
      if (entry.end_sample > rows_)
        fail(file_.path(), "Receive(" + std::to_string(i + 1) + ").endSample",
             std::to_string(entry.end_sample) + " beyond the " + std::to_string(rows_) + " rows of " + array_.path());
      if (entry.frame > buffer_frames)
        fail(file_.path(), "Receive(" + std::to_string(i + 1) + ").framenum",
             std::to_string(entry.frame) + " beyond the " + std::to_string(buffer_frames) + " frames of " + array_.path());
      entries.push_back(entry);
    }
    if (entries.empty()) fail(file_.path(), "Receive", "no receive fills " + array_.path());
    std::size_t frames_used = 0;
    for (const ReceiveEntry& entry : entries) frames_used = std::max(frames_used, entry.frame);

    std::vector<const ReceiveEntry*> transmits;  // mode-0 receives of frame 1, in Receive order
    std::size_t accumulated = 0;
    for (const ReceiveEntry& entry : entries) {
      if (entry.frame != 1) continue;
      if (entry.mode == 0) {
        transmits.push_back(&entry);
        continue;
      }
      // Accumulate: summed by the hardware into the rows an earlier acquisition wrote.
      const bool onto_earlier = std::any_of(transmits.begin(), transmits.end(), [&](const ReceiveEntry* t) {
        return t->start_sample == entry.start_sample && t->end_sample == entry.end_sample;
      });
      if (!onto_earlier)
        fail(file_.path(), "Receive(" + std::to_string(entry.index + 1) + ").mode",
             "1 (accumulate) onto rows " + std::to_string(entry.start_sample) + ":" + std::to_string(entry.end_sample) +
                 " that no earlier acquisition of frame 1 wrote");
      ++accumulated;
    }
    if (transmits.empty()) fail(file_.path(), "Receive", "frame 1 of " + array_.path() + " has no mode-0 acquisition");
    // Every frame must repeat frame 1's layout (rows, modes), as Verasonics sequences do.
    for (std::size_t f = 2; f <= frames_used; ++f) {
      std::vector<const ReceiveEntry*> frame_entries, first_entries;
      for (const ReceiveEntry& entry : entries) {
        if (entry.frame == f) frame_entries.push_back(&entry);
        if (entry.frame == 1) first_entries.push_back(&entry);
      }
      bool same = frame_entries.size() == first_entries.size();
      for (std::size_t k = 0; same && k < frame_entries.size(); ++k)
        same = frame_entries[k]->start_sample == first_entries[k]->start_sample &&
               frame_entries[k]->end_sample == first_entries[k]->end_sample &&
               frame_entries[k]->mode == first_entries[k]->mode;
      if (!same)
        fail(file_.path(), "Receive", "frame " + std::to_string(f) + " of " + array_.path() +
                                          " is laid out unlike frame 1 (frames of one buffer must repeat one sequence)");
    }

    const ReceiveEntry& first = *transmits.front();
    samples_ = first.end_sample - first.start_sample + 1;
    for (const ReceiveEntry* t : transmits) {
      const std::string where = "Receive(" + std::to_string(t->index + 1) + ")";
      if (t->end_sample - t->start_sample + 1 != samples_)
        fail(file_.path(), where, std::to_string(t->end_sample - t->start_sample + 1) + " samples, but Receive(" +
                                      std::to_string(first.index + 1) + ") has " + std::to_string(samples_));
      if (t->sampling_frequency_hz != first.sampling_frequency_hz)
        fail(file_.path(), where + ".decimSampleRate", "sampling rate differs from Receive(" +
                                                           std::to_string(first.index + 1) + ")'s");
      if (t->sample_mode.rfind("BS", 0) == 0)
        fail(file_.path(), where + ".sampleMode",
             "'" + t->sample_mode + "' (interleaved baseband samples) is not supported; expected an RF mode (NS200BW, ...)");
      transmit_first_row_.push_back(t->start_sample - 1);
    }
    // Replace-mode acquisitions own disjoint rows (only mode 1 adds onto written rows); this also
    // bounds a frame's payload by the buffer frame it comes from.
    std::vector<const ReceiveEntry*> by_row = transmits;
    std::sort(by_row.begin(), by_row.end(),
              [](const ReceiveEntry* a, const ReceiveEntry* b) { return a->start_sample < b->start_sample; });
    for (std::size_t k = 1; k < by_row.size(); ++k)
      if (by_row[k]->start_sample <= by_row[k - 1]->end_sample)
        fail(file_.path(), "Receive(" + std::to_string(by_row[k]->index + 1) + ")",
             "rows overlap those of Receive(" + std::to_string(by_row[k - 1]->index + 1) +
                 ") in a mode-0 (replace) acquisition of the same frame");
    const double fs = first.sampling_frequency_hz;

    // Each acquisition's transmit: TX(Event(e).tx) for the event that acquires it, else TX(acqNum).
    const mat::Value tx = file_.read("TX");
    if (!tx.is_struct() || tx.count() == 0) tx.fail("expected a struct array of transmits");
    std::optional<mat::Value> events = file_.find("Event");
    std::optional<mat::Value> waveforms = file_.find("TW");
    const double lens_s = probe.lens_correction * probe.metres_per_unit / c;
    std::vector<double> wavefront, angle, source_x, source_z, transmit_delay, tw_peaks;
    for (std::size_t k = 0; k < transmits.size(); ++k) {
      const ReceiveEntry& receive = *transmits[k];
      std::size_t tx_index = 0;  // 0-based
      if (events) {
        bool found = false;
        for (std::size_t e = 0; e < events->count() && !found; ++e) {
          auto rcv = events->find_field("rcv", e);
          if (rcv && rcv->count() == 1 && rcv->scalar() == static_cast<double>(receive.index + 1)) {
            tx_index = whole_number(events->field("tx", e), 1) - 1;
            found = true;
          }
        }
        if (!found) events->fail("no event acquires Receive(" + std::to_string(receive.index + 1) + ")");
      } else {
        const std::size_t acquisition = receive.acquisition ? receive.acquisition : k + 1;
        if (acquisition <= tx.count())
          tx_index = acquisition - 1;
        else if (tx.count() != 1)
          fail(file_.path(), "TX", std::to_string(tx.count()) + " transmits and no Event structure: cannot tell which one "
                                   "Receive(" + std::to_string(receive.index + 1) + ") (acqNum " +
                                   std::to_string(acquisition) + ") used");
      }
      if (tx_index >= tx.count())
        fail(file_.path(), "Event", "refers to TX(" + std::to_string(tx_index + 1) + "), TX has " +
                                        std::to_string(tx.count()) + " elements");
      VerasonicsTransmit transmit;
      transmit.focus_wavelengths = optional_scalar(tx.find_field("focus", tx_index), 0.0);
      if (auto steer = tx.find_field("Steer", tx_index)) {
        const std::vector<double> values = steer->numbers();
        if (values.empty()) steer->fail("expected [theta, alpha] in radians");
        transmit.steer_rad = values[0];
      }
      if (auto origin = tx.find_field("Origin", tx_index)) {
        const std::vector<double> values = origin->numbers();
        if (values.size() != 3) origin->fail("expected [x, y, z] in wavelengths");
        transmit.origin_x_wavelengths = values[0];
        transmit.origin_z_wavelengths = values[2];
      }
      const mat::Value delay = tx.field("Delay", tx_index);
      transmit.delay_wavelengths = delay.numbers();
      if (transmit.delay_wavelengths.size() != elements)
        delay.fail(std::to_string(transmit.delay_wavelengths.size()) + " values, expected one per element (" +
                   std::to_string(elements) + ")");
      if (auto apod = tx.find_field("Apod", tx_index))
        transmit.apodization = apod->numbers();
      else
        transmit.apodization.assign(elements, 1.0);
      TransmitGeometry geometry;
      try {
        geometry = transmit_geometry(transmit, probe.x_m, probe.z_m, wavelength_m, c);
      } catch (const std::invalid_argument& error) {
        fail(file_.path(), "TX(" + std::to_string(tx_index + 1) + ")", error.what());
      }
      // The peak of the transmit waveform (TW.peak, wavelengths) is Verasonics' reference for echoes.
      double peak_wavelengths = 0.0;
      if (waveforms && waveforms->is_struct()) {
        std::size_t tw_index = 0;
        if (auto w = tx.find_field("waveform", tx_index)) tw_index = whole_number(*w, 1) - 1;
        if (tw_index < waveforms->count()) peak_wavelengths = optional_scalar(waveforms->find_field("peak", tw_index), 0.0);
      }
      tw_peaks.push_back(peak_wavelengths);
      wavefront.push_back(geometry.wavefront);
      angle.push_back(geometry.angle_rad);
      source_x.push_back(geometry.source_x_m);
      source_z.push_back(geometry.source_z_m);
      // Our clock: t = 0 when the wavefront (its peak, out of the lens) passes the origin. A later
      // startDepth of this receive moves its first sample later than the axis origin says.
      const double start_shift_s = 2.0 * (receive.start_depth_wavelengths - first.start_depth_wavelengths) * wavelength_m / c;
      transmit_delay.push_back(start_shift_s - geometry.wavefront_at_origin_s - peak_wavelengths * wavelength_m / c - lens_s);
    }

    // Frame description (stages/beamform/channel_conventions.h).
    meta_.kind = FrameKind::channel_rf;
    meta_.sampling_frequency_hz = fs;
    meta_.center_frequency_hz = probe.center_frequency_hz;
    meta_.demodulation_frequency_hz = 0.0;  // RF samples
    meta_.speed_of_sound_m_per_s = c;
    meta_.payload.dtype = DType::int16;
    meta_.payload.axes = {
        {std::string(channel::transmit_axis), static_cast<std::int64_t>(transmits.size())},
        {std::string(channel::element_axis), static_cast<std::int64_t>(elements), uniform_pitch(probe.x_m), "m",
         probe.x_m.front()},
        {std::string(channel::sample_axis), static_cast<std::int64_t>(samples_), 1.0 / fs, "s",
         2.0 * first.start_depth_wavelengths * wavelength_m / c},
    };
    auto& vectors = meta_.vectors;
    vectors[std::string(channel::element_x_m)] = probe.x_m;
    vectors[std::string(channel::element_y_m)] = probe.y_m;
    vectors[std::string(channel::element_z_m)] = probe.z_m;
    vectors[std::string(channel::element_delay_s)] = std::vector<double>(elements, lens_s);
    vectors[std::string(channel::transmit_wavefront)] = wavefront;
    vectors[std::string(channel::transmit_angle_rad)] = angle;
    vectors[std::string(channel::transmit_source_x_m)] = source_x;
    vectors[std::string(channel::transmit_source_z_m)] = source_z;
    vectors[std::string(channel::transmit_delay_s)] = transmit_delay;

    const std::size_t frames = std::min(frames_used, buffer_frames);
    std::optional<mat::Value> last = last_frame_of(file_, "RcvBuffer", choice_.buffer);
    order_ = circular_order(frames, last);
    frame_elements_ = rows_ * channels;
    scratch_.resize(frame_elements_);

    attributes_["trans_name"] = probe.name;
    attributes_["trans_units"] = probe.units;
    attributes_["lens_correction"] = number_text(probe.lens_correction) + " " + probe.units + " (one way)";
    attributes_["tw_peak_wavelengths"] = number_text(tw_peaks.front());
    attributes_["sample_mode"] = first.sample_mode;
    attributes_["samples_per_wave"] = number_text(first.samples_per_wave);
    attributes_["decim_sample_rate_mhz"] = number_text(first.decim_sample_rate_mhz);
    attributes_["quad_decim"] = number_text(first.quad_decim);
    attributes_["demod_frequency_mhz"] = number_text(first.demodulation_frequency_mhz);
    attributes_["accumulated_receives_per_frame"] = std::to_string(accumulated);
    attributes_["buffer_frames"] = std::to_string(buffer_frames);
    attributes_["frame_order"] = last ? "circular, oldest first (lastFrame " + number_text(last->scalar()) + ")"
                                      : "as stored (no lastFrame saved)";
    // The first receive of each frame (Receive order) marks when the sequence starts that frame.
    std::vector<std::size_t> frame_start_receive(frames, 0);
    for (const ReceiveEntry& entry : entries)
      if (entry.frame <= frames && frame_start_receive[entry.frame - 1] == 0)
        frame_start_receive[entry.frame - 1] = entry.index + 1;
    time_frames_from_sequence(frame_start_receive, receives.count());
  }

  // ------------------------------------------------------------ frame times
  // acquisition_time_ns of each replayed frame: what Event/SeqControl program (verasonics_timing.h),
  // else kAssumedFramePeriodNs apart; attribute frame_period says which and why.
  void time_frames_from_sequence(const std::vector<std::size_t>& frame_start_receive, std::size_t receive_count) {
    try {
      for (std::size_t f = 0; f < frame_start_receive.size(); ++f)
        if (frame_start_receive[f] == 0)
          throw SequenceTimingUnknown("Receive: no receive fills frame " + std::to_string(f + 1) + " of " +
                                      array_.path());
      auto event_value = file_.find("Event");
      auto control_value = file_.find("SeqControl");
      if (!event_value || !control_value)
        throw SequenceTimingUnknown(std::string(event_value ? "SeqControl" : "Event") + ": not saved");
      const ProgrammedFrameTimes programmed =
          programmed_frame_times(read_events(*event_value, receive_count), read_controls(*control_value),
                                 frame_start_receive);
      // Replay order starts at order_[0]; a frame the sequence acquired earlier in its cycle comes
      // one cycle later.
      const std::int64_t origin = programmed.frame_start_ns[order_.front()];
      frame_time_ns_.clear();
      for (std::size_t k = 0; k < order_.size(); ++k) {
        std::int64_t time = programmed.frame_start_ns[order_[k]] - origin;
        if (time < 0) {
          if (!programmed.cycle_ns)
            throw SequenceTimingUnknown("Event: the sequence ends before it acquires frame " +
                                        std::to_string(order_.front() + 1) + " again, which lastFrame needs");
          time += *programmed.cycle_ns;
        }
        if (k > 0 && time <= frame_time_ns_.back())
          throw SequenceTimingUnknown("Event: the sequence acquires the buffer's frames in another order than "
                                      "lastFrame implies (frame " + std::to_string(order_[k] + 1) + ")");
        frame_time_ns_.push_back(time);
      }
      std::vector<std::int64_t> periods;
      for (std::size_t k = 1; k < frame_time_ns_.size(); ++k) periods.push_back(frame_time_ns_[k] - frame_time_ns_[k - 1]);
      if (periods.empty() && programmed.cycle_ns) periods.push_back(*programmed.cycle_ns);
      std::string text;
      if (periods.empty()) {
        text = "one frame";
      } else {
        const auto [shortest, longest] = std::minmax_element(periods.begin(), periods.end());
        // Whole-nanosecond rounding of fractional microsecond arguments can differ by 1 ns per frame.
        text = *longest - *shortest <= 1
                   ? number_text(static_cast<double>(periods.front()) / kNanosecondsPerMillisecond) + " ms"
                   : "from " + number_text(static_cast<double>(*shortest) / kNanosecondsPerMillisecond) + " to " +
                         number_text(static_cast<double>(*longest) / kNanosecondsPerMillisecond) + " ms";
      }
      attributes_["frame_period"] =
          text + ", programmed by Event/SeqControl (the hardware runs later when the host holds it back" +
          (programmed.waits_for_host ? "; this sequence waits for the host (sync)" : "") + ")";
    } catch (const SequenceTimingUnknown& error) {
      assume_frame_period(error.what());
    } catch (const FormatError& error) {
      // "<file>: <variable>: <reason>": the attribute names the variable; the file is the source itself.
      const std::string message = error.what(), prefix = file_.path() + ": ";
      assume_frame_period(message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message);
    }
    spdlog::info("verasonics: {}: frame period {}", file_.path(), attributes_["frame_period"]);
  }

  void assume_frame_period(const std::string& why) {
    frame_time_ns_.clear();
    for (std::size_t k = 0; k < order_.size(); ++k)
      frame_time_ns_.push_back(static_cast<std::int64_t>(k) * kAssumedFramePeriodNs);
    attributes_["frame_period"] =
        number_text(static_cast<double>(kAssumedFramePeriodNs) / kNanosecondsPerMillisecond) + " ms assumed (" + why + ")";
  }

  // Event(n).tx, .rcv, .seqControl (absent or empty = 0 / none).
  static std::vector<SequenceEvent> read_events(const mat::Value& events, std::size_t receive_count) {
    if (!events.is_struct()) events.fail("expected a struct array of events");
    std::vector<SequenceEvent> out(events.count());
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (auto tx = events.find_field("tx", i)) out[i].transmits = index_or_zero(*tx) > 0;
      if (auto rcv = events.find_field("rcv", i)) {
        out[i].receive = index_or_zero(*rcv);
        if (out[i].receive > receive_count)
          rcv->fail("refers to Receive(" + std::to_string(out[i].receive) + "), Receive has " +
                    std::to_string(receive_count) + " elements");
      }
      if (auto controls = events.find_field("seqControl", i); controls && !is_empty(*controls))
        for (double control : controls->numbers()) out[i].controls.push_back(whole_index(*controls, control));
    }
    return out;
  }

  // SeqControl(n).command and .argument (absent or empty = no argument).
  static std::vector<SequenceCommand> read_controls(const mat::Value& controls) {
    if (!controls.is_struct()) controls.fail("expected a struct array of sequence controls");
    std::vector<SequenceCommand> out(controls.count());
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i].command = controls.field("command", i).text();
      auto argument = controls.find_field("argument", i);
      if (!argument || is_empty(*argument)) continue;
      const std::vector<double> values = argument->numbers();
      if (values.size() > 1) argument->fail("expected one number, found " + std::to_string(values.size()));
      if (!values.empty()) out[i].argument = values.front();
    }
    return out;
  }

  // MATLAB's [] of no class (v7.3 writes unset fields so); an empty double has no numbers.
  static bool is_empty(const mat::Value& value) {
    return !value.is_numeric() && !value.is_text() && !value.is_struct() && !value.is_cell();
  }

  static std::size_t whole_index(const mat::Value& value, double number) {
    if (!(number >= 0 && number <= 1e9) || number != std::floor(number))
      value.fail("expected whole numbers >= 0, found " + number_text(number));
    return static_cast<std::size_t>(number);
  }

  static std::size_t index_or_zero(const mat::Value& value) {
    if (is_empty(value)) return 0;
    const std::vector<double> values = value.numbers();
    if (values.empty()) return 0;
    if (values.size() != 1) value.fail("expected one number, found " + std::to_string(values.size()));
    return whole_index(value, values.front());
  }

  // ------------------------------------------------------------ IQData / ImgData -> iq / rf
  void open_image_data() {
    const double c = read_speed_of_sound(file_);
    const Probe probe = read_probe(file_, c);
    const double wavelength_m = c / probe.center_frequency_hz;
    const bool iq = choice_.variable == "IQData";
    array_ = file_.cell_array(choice_.variable, choice_.buffer);
    const auto element = array_.element();
    if (iq && element != mat::MatArray::Element::complex128 && element != mat::MatArray::Element::complex64)
      fail(file_.path(), array_.path(), "expected complex double or single [rows x columns x pages x frames]");
    if (!iq && element != mat::MatArray::Element::float64 && element != mat::MatArray::Element::float32)
      fail(file_.path(), array_.path(), "expected real double or single [rows x columns x pages x frames]");
    const auto& dims = array_.dims();
    for (std::size_t d = 4; d < dims.size(); ++d)
      if (dims[d] != 1) fail(file_.path(), array_.path(), "expected rank 2 to 4 [rows x columns x pages x frames]");
    if (dims.size() < 2 || dims[0] == 0 || dims[1] == 0) fail(file_.path(), array_.path(), "expected a non-empty image");
    // MATLAB drops trailing singletons: rank 3 is [rows x columns x pages] of one frame.
    const std::size_t rows = dims[0], columns = dims[1];
    const std::size_t pages = dims.size() >= 3 ? dims[2] : 1;
    const std::size_t frames = dims.size() >= 4 ? dims[3] : 1;

    // Pixel grid: PData(n) (else PData(1)), in wavelengths: PDelta [dx dy dz], Origin [x y z].
    double dx = 0, dy = 0, dz = 0, x0 = 0, y0 = 0, z0 = 0;
    std::string length_unit;
    if (auto pdata = file_.find("PData"); pdata && pdata->is_struct()) {
      const std::size_t n = choice_.buffer < pdata->count() ? choice_.buffer : 0;
      const mat::Value delta = pdata->field("PDelta", n), origin = pdata->field("Origin", n);
      const std::vector<double> d = delta.numbers(), o = origin.numbers();
      if (d.size() != 3) delta.fail("expected [dx, dy, dz] in wavelengths");
      if (o.size() != 3) origin.fail("expected [x, y, z] in wavelengths");
      dx = d[0] * wavelength_m, dy = d[1] * wavelength_m, dz = d[2] * wavelength_m;
      x0 = o[0] * wavelength_m, y0 = o[1] * wavelength_m, z0 = o[2] * wavelength_m;
      length_unit = "m";
      attributes_["pdata"] = "PData(" + std::to_string(n + 1) + ")";
    }
    meta_.kind = iq ? FrameKind::iq : FrameKind::rf;
    meta_.payload.dtype = iq ? DType::complex64
                             : (element == mat::MatArray::Element::float64 ? DType::float64 : DType::float32);
    meta_.payload.axes.clear();
    if (pages > 1) meta_.payload.axes.push_back({"elevation", static_cast<std::int64_t>(pages), dy, length_unit, y0});
    meta_.payload.axes.push_back({"location", static_cast<std::int64_t>(columns), dx, length_unit, x0});
    meta_.payload.axes.push_back({std::string(channel::sample_axis), static_cast<std::int64_t>(rows), dz, length_unit, z0});
    meta_.center_frequency_hz = probe.center_frequency_hz;
    meta_.speed_of_sound_m_per_s = c;
    meta_.sampling_frequency_hz = dz > 0 ? c / (2.0 * dz) : 0.0;  // depth step dz = c / (2 f_s)
    if (auto receives = file_.find("Receive"); iq && receives && receives->is_struct() && receives->count() > 0)
      meta_.demodulation_frequency_hz = optional_scalar(receives->find_field("demodFrequency", 0), 0.0) * kMegahertz;

    std::optional<mat::Value> last = last_frame_of(file_, iq ? "InterBuffer" : "ImageBuffer", choice_.buffer);
    order_ = circular_order(frames, last);
    frame_elements_ = rows * columns * pages;
    attributes_["trans_name"] = probe.name;
    attributes_["frame_order"] = last ? "circular, oldest first (lastFrame " + number_text(last->scalar()) + ")"
                                      : "as stored (no lastFrame saved)";
    assume_frame_period("frame times are derived from the sequence for RcvData only");
    if (iq && element == mat::MatArray::Element::complex128)
      attributes_["precision"] = "complex double in the file, complex64 in the frames";
  }

  // ------------------------------------------------------------ one buffer frame -> payload bytes
  void read_buffer_frame(std::size_t buffer_frame, std::byte* out) {
    const std::size_t start = buffer_frame * frame_elements_;
    switch (meta_.kind) {
      case FrameKind::channel_rf: {
        array_.read_linear(start, frame_elements_, scratch_.data());
        // Column-major [rows x channels]: channel ch's row r at ch * rows + r. Out: [transmit][element][sample].
        auto* samples = reinterpret_cast<std::int16_t*>(out);
        std::size_t k = 0;
        for (std::size_t first_row : transmit_first_row_)
          for (std::size_t column : element_column_) {
            std::memcpy(samples + k, scratch_.data() + column * rows_ + first_row, samples_ * sizeof(std::int16_t));
            k += samples_;
          }
        return;
      }
      case FrameKind::iq:
        if (array_.element() == mat::MatArray::Element::complex128) {
          std::vector<double> values(2 * frame_elements_);
          array_.read_linear(start, frame_elements_, values.data());
          auto* target = reinterpret_cast<float*>(out);
          for (std::size_t k = 0; k < values.size(); ++k) target[k] = static_cast<float>(values[k]);
        } else {
          array_.read_linear(start, frame_elements_, out);
        }
        return;
      default:  // rf image: the file's own precision, column-major = our [page][column][row]
        array_.read_linear(start, frame_elements_, out);
        return;
    }
  }

  mat::File file_;
  ImportOptions options_;
  ObjectChoice choice_;
  mat::MatArray array_;
  FrameMeta meta_;
  std::vector<std::size_t> order_;  // buffer frame (0-based) of each acquisition frame, oldest first
  std::vector<std::int64_t> frame_time_ns_;  // acquisition time of each entry of order_
  std::size_t frame_elements_ = 0;  // array elements per buffer frame
  std::size_t rows_ = 0, samples_ = 0;
  std::vector<std::size_t> transmit_first_row_;  // 0-based first RcvData row of each transmit
  std::vector<std::size_t> element_column_;      // 0-based RcvData column of each element
  std::vector<std::int16_t> scratch_;
  std::map<std::string, std::string> attributes_;
};

}  // namespace

namespace {

// The limits of libmatio's child process: v7.3 files get an hour per step, since libmatio reads
// their struct arrays in time that grows with the square of their elements (minutes for real
// saves); a damaged one that makes it loop is still stopped. SONOPIPE_READER_SECONDS_PER_STEP,
// when set, applies to them too.
constexpr int kMat73SecondsPerStep = 3600;

isolation::Limits child_limits(const std::string& path) {
  isolation::Limits limits = isolation::limits();
  if (mat::is_mat73_file(path) && !isolation::time_limit_from_environment()) limits.seconds_per_step = kMat73SecondsPerStep;
  return limits;
}

}  // namespace

bool is_verasonics_mat(const std::string& path) {
  if (!mat::is_mat_file(path)) return false;
  // libmatio parses the whole file to list its variables: in a child process (isolated_reader.h).
  // A MAT file whose listing kills the child is taken for a save, so that opening it says why.
  const std::optional<bool> answer = isolation::check_in_child(
      [&] {
        mat::File file(path);
        if (!file.has("Trans")) return false;
        return std::any_of(std::begin(kDataVariables), std::end(kDataVariables),
                           [&](const char* name) { return file.has(name); });
      },
      child_limits(path));
  return answer.value_or(true);
}

std::unique_ptr<AcquisitionReader> open_verasonics(const std::string& path, const ImportOptions& options) {
  if (!mat::is_mat_file(path)) fail(path, "", "not a MAT file (no MATLAB v5/v7.3 header)");
  // libmatio 1.5.23 can crash, loop or exhaust memory on a damaged file (docs/formats.md, "Bad files"):
  // it runs in a child process, and whatever happens there ends in a FormatError here.
  return isolation::open_in_child(
      path, options,
      [](const std::string& file, const ImportOptions& choices) {
        try {
          return std::unique_ptr<AcquisitionReader>(std::make_unique<VerasonicsReader>(file, choices));
        } catch (const std::bad_alloc&) {
          // A damaged header can declare sizes past every bound checked above (libmatio allocates them).
          fail(file, "", "declares sizes too large to allocate (damaged file)");
        }
      },
      "libmatio", child_limits(path));
}

}  // namespace sonopipe::formats
