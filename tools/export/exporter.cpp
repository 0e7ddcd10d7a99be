#include "tools/export/exporter.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <stdexcept>

#include "wire/wire.h"
#include "stages/arfi/arfi_conventions.h"
#include "stages/beamform/channel_conventions.h"
#include "tools/common/recording.h"
#include "tools/formats/uff_writer.h"

namespace sonopipe::exporter {

namespace {

struct SourceFrame {
  FrameMeta meta;
  std::vector<std::byte> payload;
};

// A result seen as a frame: its axes, element type, stream, sequence, time, vectors and attributes.
SourceFrame frame_of(const recording::Result& result) {
  SourceFrame frame;
  const v1::ResultHeader& h = result.header;
  frame.meta.stream_id = h.stream_id();
  frame.meta.sequence = h.input_sequence();
  frame.meta.acquisition_time_ns = h.acquisition_time_ns();
  frame.meta.payload = wire::tensor_spec_from_result(h);
  frame.meta.kind = frame.meta.payload.dtype == DType::complex64 ? FrameKind::iq : FrameKind::rf;
  for (const auto& v : h.vectors()) frame.meta.vectors[v.name()] = {v.values().begin(), v.values().end()};
  for (const auto& [key, value] : h.attributes()) frame.meta.attributes[key] = value;
  frame.payload = result.payload;
  return frame;
}

// The payload's values as double (real parts, and imaginary parts for complex data).
void values_of(const SourceFrame& frame, bool complex, std::vector<double>& real, std::vector<double>& imag) {
  const TensorSpec& spec = frame.meta.payload;
  const std::byte* bytes = frame.payload.data();
  const std::size_t scalars = frame.payload.size() / (spec.dtype == DType::complex64 ? 4 : dtype_size(spec.dtype));
  std::vector<double> all(scalars);
  for (std::size_t i = 0; i < scalars; ++i) {
    switch (spec.dtype) {
      case DType::int16: {
        std::int16_t v;
        std::memcpy(&v, bytes + 2 * i, 2);
        all[i] = v;
        break;
      }
      case DType::uint8:
        all[i] = static_cast<double>(static_cast<std::uint8_t>(bytes[i]));
        break;
      case DType::float16: {
        std::uint16_t v;
        std::memcpy(&v, bytes + 2 * i, 2);
        all[i] = arfi::half_bits_to_float(v);
        break;
      }
      case DType::float32:
      case DType::complex64: {
        float v;
        std::memcpy(&v, bytes + 4 * i, 4);
        all[i] = v;
        break;
      }
      case DType::float64: {
        double v;
        std::memcpy(&v, bytes + 8 * i, 8);
        all[i] = v;
        break;
      }
    }
  }
  if (!complex) {
    real = std::move(all);
    imag.clear();
    return;
  }
  real.resize(scalars / 2);
  imag.resize(scalars / 2);
  for (std::size_t i = 0; i < scalars / 2; ++i) {
    real[i] = all[2 * i];
    imag[i] = all[2 * i + 1];
  }
}

std::vector<double> positions(const Axis& axis) {
  std::vector<double> values(static_cast<std::size_t>(axis.size));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = axis.origin + static_cast<double>(i) * (axis.spacing > 0 ? axis.spacing : 1.0);
  return values;
}

// Depth in m of an axial axis: metres as they are, a time axis as c t / 2 (the two-way echo time).
std::vector<double> depths_m(const Axis& axis, const FrameMeta& meta) {
  std::vector<double> values = positions(axis);
  const double c = meta.speed_of_sound_m_per_s;
  if (axis.unit == "s") {
    for (double& v : values) v = c * v / 2;
  } else if (axis.unit != "m" && axis.spacing <= 0 && meta.sampling_frequency_hz > 0) {
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<double>(i) * c / (2 * meta.sampling_frequency_hz);
  }
  return values;
}

const std::vector<double>& vector_or_empty(const FrameMeta& meta, std::string_view name) {
  static const std::vector<double> empty;
  const std::vector<double>* v = meta.vector(std::string(name));
  return v ? *v : empty;
}

}  // namespace

ExportReport export_uff(const std::string& recording_path, const std::string& output_path,
                        const ExportOptions& options) {
  recording::Reader reader(recording_path);
  ExportReport report;
  std::size_t count = 0;
  std::function<SourceFrame(std::size_t)> read;
  if (!options.result.empty()) {
    const std::size_t slash = options.result.find('/');
    if (slash == std::string::npos)
      throw std::invalid_argument("--result '" + options.result + "': expected pipeline/output");
    const std::string pipeline = options.result.substr(0, slash), output = options.result.substr(slash + 1);
    count = reader.result_count(pipeline, output);
    read = [&reader, pipeline, output](std::size_t i) { return frame_of(reader.read_result(pipeline, output, i)); };
    report.source = "result " + options.result;
  } else {
    const std::vector<std::uint32_t> streams = reader.streams();
    if (streams.empty()) throw std::invalid_argument(recording_path + ": /streams: no stream to export");
    const std::uint32_t stream = options.stream.value_or(streams.front());
    count = reader.frame_count(stream);
    read = [&reader, stream](std::size_t i) {
      recording::Frame f = reader.read_frame(stream, i);
      return SourceFrame{f.meta, std::move(f.payload)};
    };
    report.source = "stream " + std::to_string(stream);
  }
  if (count == 0) throw std::invalid_argument(recording_path + ": " + report.source + " holds no frames");

  const SourceFrame first = read(0);
  const FrameMeta& meta = first.meta;
  std::vector<Axis> axes = meta.payload.axes;
  const bool int16_iq =
      meta.payload.dtype == DType::int16 && !axes.empty() && axes.back().name == "iq" && axes.back().size == 2;
  if (int16_iq) axes.pop_back();
  const bool complex = int16_iq || meta.payload.dtype == DType::complex64;
  const bool channel = meta.kind == FrameKind::channel_rf || meta.kind == FrameKind::channel_iq;
  const std::string where = recording_path + ": " + report.source;

  formats::UffSonopipeAttributes extra{.stream_id = meta.stream_id,
                                       .sound_speed_m_per_s = meta.speed_of_sound_m_per_s,
                                       .center_frequency_hz = meta.center_frequency_hz,
                                       .vectors = meta.vectors,
                                       .attributes = meta.attributes};
  std::size_t per_frame = 1;  // UFF frames per sonopipe frame
  std::size_t lateral = 0, middle = 1, axial = 0;
  const std::string temporary = output_path + ".partial-" + std::to_string(::getpid());
  std::unique_ptr<formats::UffWriter> writer;
  try {
    if (channel) {
      if (axes.size() != 3 || axes[0].name != channel::transmit_axis || axes[1].name != channel::element_axis)
        throw std::invalid_argument(where + ": channel frames " + meta.payload.shape_string() +
                                    ": expected [transmit, element, sample]");
      formats::UffChannelLayout layout{.transmits = static_cast<std::size_t>(axes[0].size),
                                       .elements = static_cast<std::size_t>(axes[1].size),
                                       .samples = static_cast<std::size_t>(axes[2].size),
                                       .complex = complex,
                                       .sampling_frequency_hz = meta.sampling_frequency_hz,
                                       .initial_time_s = axes[2].origin,
                                       .modulation_frequency_hz = meta.demodulation_frequency_hz,
                                       .sound_speed_m_per_s = meta.speed_of_sound_m_per_s,
                                       .center_frequency_hz = meta.center_frequency_hz};
      layout.element_x_m = vector_or_empty(meta, channel::element_x_m);
      layout.element_y_m = vector_or_empty(meta, channel::element_y_m);
      layout.element_z_m = vector_or_empty(meta, channel::element_z_m);
      layout.wavefront = vector_or_empty(meta, channel::transmit_wavefront);
      layout.angle_rad = vector_or_empty(meta, channel::transmit_angle_rad);
      layout.source_x_m = vector_or_empty(meta, channel::transmit_source_x_m);
      layout.source_z_m = vector_or_empty(meta, channel::transmit_source_z_m);
      layout.delay_s = vector_or_empty(meta, channel::transmit_delay_s);
      writer = std::make_unique<formats::UffWriter>(temporary, layout, count, options.double_precision);
      report.object = "/channel_data";
    } else {
      if (axes.size() != 2 && axes.size() != 3)
        throw std::invalid_argument(where + ": frames " + meta.payload.shape_string() +
                                    ": expected [lateral, axial] or [lateral, ensemble, axial] for beamformed_data");
      lateral = static_cast<std::size_t>(axes.front().size);
      axial = static_cast<std::size_t>(axes.back().size);
      if (axes.size() == 3) {
        middle = static_cast<std::size_t>(axes[1].size);
        per_frame = middle;
        extra.ensemble = middle;
      }
      formats::UffBeamformedLayout layout{.sector = axes.front().unit == "rad",
                                          .lateral = positions(axes.front()),
                                          .axial = depths_m(axes.back(), meta),
                                          .complex = complex,
                                          .sampling_frequency_hz = meta.sampling_frequency_hz,
                                          .modulation_frequency_hz = meta.demodulation_frequency_hz,
                                          .center_frequency_hz = meta.center_frequency_hz};
      writer = std::make_unique<formats::UffWriter>(temporary, layout, count * per_frame, options.double_precision);
      report.object = "/beamformed_data";
    }
    std::vector<double> real, imag, frame_real, frame_imag;
    for (std::size_t i = 0; i < count; ++i) {
      const SourceFrame frame = i == 0 ? first : read(i);
      if (frame.meta.payload != meta.payload)
        throw std::invalid_argument(where + ": frame " + std::to_string(i) + " is " +
                                    frame.meta.payload.shape_string() + ", the first " + meta.payload.shape_string() +
                                    " (a UFF object keeps one shape)");
      values_of(frame, complex, real, imag);
      if (per_frame == 1) {
        writer->append_frame(real, imag, frame.meta.acquisition_time_ns, frame.meta.sequence);
        continue;
      }
      // [lateral, middle, axial] -> one UFF frame of pixels (lateral, axial), z fastest, per middle index.
      frame_real.resize(lateral * axial);
      frame_imag.resize(complex ? lateral * axial : 0);
      for (std::size_t m = 0; m < middle; ++m) {
        for (std::size_t x = 0; x < lateral; ++x)
          for (std::size_t z = 0; z < axial; ++z) {
            const std::size_t from = (x * middle + m) * axial + z, to = x * axial + z;
            frame_real[to] = real[from];
            if (complex) frame_imag[to] = imag[from];
          }
        writer->append_frame(frame_real, frame_imag, frame.meta.acquisition_time_ns, frame.meta.sequence);
      }
    }
    writer->finish(extra);
    writer.reset();
    std::filesystem::rename(temporary, output_path);
  } catch (...) {
    writer.reset();
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
  report.frames = count;
  report.uff_frames = count * per_frame;
  return report;
}

}  // namespace sonopipe::exporter
