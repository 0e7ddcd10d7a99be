// USTB UFF (v1.0.x, v1.1.x, v1.2.x) and the original PICMUS layout as an AcquisitionReader.
// What maps onto which header field is documented in docs/formats.md (one table); the
// channel-data side follows stages/beamform/channel_conventions.h, beamformed data the
// beamform stage's output axes, and an ensemble of beamformed frames the ARFI set
// (stages/arfi/arfi_conventions.h).
#include "tools/formats/uff_reader.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>

#include "stages/arfi/arfi_conventions.h"
#include "stages/beamform/channel_conventions.h"
#include "tools/formats/uff_file.h"
#include "tools/formats/uff_names.h"

namespace sonopipe::formats {

namespace {

using uff::DataArray;
using uff::UffFile;

struct Point {
  double x = 0, y = 0, z = 0;
};

// A uff.point (spherical: distance, azimuth, elevation) in Cartesian metres; USTB's own rule
// (x = d sin(az) cos(el), y = d sin(el), z = d cos(az) cos(el)) with its zero for az = 0 or pi.
Point read_point(const UffFile& file, const std::string& path) {
  const double distance = file.optional_scalar(path + "/distance").value_or(0.0);
  const double azimuth = file.optional_scalar(path + "/azimuth").value_or(0.0);
  const double elevation = file.optional_scalar(path + "/elevation").value_or(0.0);
  Point p;
  if (distance == 0 || std::isinf(distance)) return p;
  p.x = (azimuth == 0 || azimuth == arfi::kPi) ? 0.0 : distance * std::sin(azimuth) * std::cos(elevation);
  p.y = elevation == 0 ? 0.0 : distance * std::sin(elevation);
  p.z = distance * std::cos(azimuth) * std::cos(elevation);
  return p;
}

// The members of an array of objects of `class_name` (`<name>_0001`, ... sorted), or the object itself.
std::vector<std::string> members(const UffFile& file, const std::string& path, const std::string& class_name) {
  std::vector<std::string> found;
  if (file.is_group(path))
    for (const std::string& child : file.children(path))
      if (file.class_of(path + "/" + child) == class_name) found.push_back(path + "/" + child);
  if (found.empty()) found.push_back(path);
  return found;
}

// First of `names` that exists under `parent` (current name first, then the older ones), or "".
std::string first_existing(const UffFile& file, const std::string& parent, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (file.exists(parent + "/" + name)) return parent + "/" + name;
  return "";
}

double step_of(const std::vector<double>& axis) {
  return axis.size() > 1 ? (axis.back() - axis.front()) / static_cast<double>(axis.size() - 1) : 0.0;
}

class UffReader final : public AcquisitionReader {
 public:
  UffReader(const std::string& path, const ImportOptions& options) : file_(path), options_(options) {
    if (file_.exists(uff_names::picmus_group) && file_.class_of(uff_names::picmus_group).empty())
      open_picmus();
    else
      open_uff();
    finish();
  }

  std::string description() const override { return description_; }
  std::size_t frame_count() const override { return frame_count_; }

  FrameInfo frame_info(std::size_t index) override {
    check_index(index);
    return {base_.stream_id, times_ns_[index]};
  }

  recording::Frame read_frame(std::size_t index) override {
    check_index(index);
    recording::Frame frame;
    frame.meta = base_;
    frame.meta.sequence = sequences_[index];
    frame.meta.acquisition_time_ns = times_ns_[index];
    const hsize_t per_frame = ensemble_ > 0 ? ensemble_ : 1;  // UFF frames per sonopipe frame
    std::vector<std::byte> raw = data_->read(index * per_frame, per_frame);
    if (ensemble_ > 0 && !channel_) {
      // [ensemble, location, sample] as stored -> [location, ensemble, sample], the ARFI set.
      const std::size_t element = data_->element_bytes();
      const std::size_t locations = lateral_size_, samples = axial_size_;
      frame.payload.resize(raw.size());
      for (std::size_t entry = 0; entry < ensemble_; ++entry)
        for (std::size_t location = 0; location < locations; ++location)
          std::memcpy(frame.payload.data() + ((location * ensemble_ + entry) * samples) * element,
                      raw.data() + ((entry * locations + location) * samples) * element, samples * element);
    } else {
      frame.payload = std::move(raw);
    }
    return frame;
  }

  std::map<std::string, std::string> source_attributes() const override { return source_; }

 private:
  UffFile file_;
  ImportOptions options_;
  std::string object_;  // the channel_data / beamformed_data group
  std::string version_;
  bool channel_ = true;
  std::unique_ptr<DataArray> data_;
  FrameMeta base_;  // everything but sequence and time
  std::size_t frame_count_ = 0, ensemble_ = 0, lateral_size_ = 0, axial_size_ = 0;
  std::vector<std::int64_t> times_ns_;
  std::vector<std::uint64_t> sequences_;
  std::map<std::string, std::string> source_;
  std::string description_;

  void check_index(std::size_t index) const {
    if (index >= frame_count_)
      throw std::out_of_range(file_.path() + ": frame " + std::to_string(index) + " of " +
                              std::to_string(frame_count_));
  }

  // ---- layouts ---------------------------------------------------------------------------

  void open_uff() {
    version_ = file_.string_attribute("/", "version");
    if (version_.empty())
      file_.fail("/",
                 "missing root attribute 'version' (USTB writes e.g. \"v1.2.0\"; accepted: v1.0.x, v1.1.x, v1.2.x)");
    if (!std::regex_match(version_, std::regex(R"(v1\.[012]\.[0-9]+)")))
      file_.fail("/", "unsupported version '" + version_ + "' (accepted: v1.0.x, v1.1.x, v1.2.x)");
    object_ = options_.object;
    if (object_.empty()) {
      for (const std::string& child : file_.children("/")) {
        const std::string c = file_.class_of("/" + child);
        if (c == uff_names::channel_data_class || c == uff_names::beamformed_data_class) {
          object_ = "/" + child;
          break;
        }
      }
      if (object_.empty()) file_.fail("/", "no uff.channel_data or uff.beamformed_data object at the root");
    } else if (object_.front() != '/') {
      object_ = "/" + object_;
    }
    if (!file_.exists(object_)) file_.fail(object_, "does not exist (--object)");
    const std::string class_name = file_.class_of(object_);
    if (class_name == uff_names::channel_data_class)
      channel_ = true;
    else if (class_name == uff_names::beamformed_data_class)
      channel_ = false;
    else
      file_.fail(object_, "class '" + class_name + "': expected uff.channel_data or uff.beamformed_data");
    data_ = std::make_unique<DataArray>(file_, object_ + "/data");
    if (channel_)
      map_channel_data();
    else
      map_beamformed_data();
    source_["source_format"] = "uff";
    source_["uff_version"] = version_;
    source_["uff_object"] = object_;
    source_["uff_class"] = class_name;
    for (const char* field : {"name", "reference", "author", "version"}) {
      const std::string text = file_.text(object_ + "/" + field);
      if (!text.empty()) source_[std::string("uff_") + field] = text;
    }
    description_ = "uff " + version_ + " (" + object_ + ": " + class_name + ")";
  }

  void open_picmus() {
    const std::string group = uff_names::picmus_group;
    object_ = group;
    version_ = "PICMUS";
    const double modulation = file_.optional_scalar(group + "/modulation_frequency").value_or(0.0);
    // PICMUS RF files carry an all-zero imag beside real: with f_dem = 0 only real is read.
    data_ = std::make_unique<DataArray>(file_, group + "/data", modulation == 0);
    const auto& dims = data_->dims();  // [1, angles, elements, samples]
    base_.kind = data_->is_complex() ? FrameKind::channel_iq : FrameKind::channel_rf;
    base_.sampling_frequency_hz = positive_scalar(group + "/sampling_frequency");
    base_.demodulation_frequency_hz = modulation;
    base_.center_frequency_hz = modulation;
    base_.speed_of_sound_m_per_s = file_.optional_scalar(group + "/sound_speed").value_or(1540.0);
    const double initial_time = file_.optional_scalar(group + "/initial_time").value_or(0.0);
    std::vector<hsize_t> angle_dims;
    const std::vector<double> angles = file_.values(group + "/angles", &angle_dims);
    if (angles.size() != dims[1])
      file_.fail(group + "/angles", "inconsistent sizes: " + std::to_string(angles.size()) + " angles, data has " +
                                        std::to_string(dims[1]) + " transmits");
    base_.vectors[std::string(channel::transmit_wavefront)].assign(angles.size(), channel::wavefront_plane);
    base_.vectors[std::string(channel::transmit_angle_rad)] = angles;
    read_geometry(group + "/probe_geometry", dims[2]);
    channel_axes(initial_time);
    source_["source_format"] = "picmus";
    source_["uff_object"] = group;
    description_ = "PICMUS dataset (" + group + ")";
  }

  // ---- channel data ----------------------------------------------------------------------

  void map_channel_data() {
    const auto& dims = data_->dims();  // [frame, wave, channel, sample]
    base_.kind = data_->is_complex() ? FrameKind::channel_iq : FrameKind::channel_rf;
    base_.sampling_frequency_hz = positive_scalar(object_ + "/sampling_frequency");
    base_.demodulation_frequency_hz = file_.optional_scalar(object_ + "/modulation_frequency").value_or(0.0);
    base_.speed_of_sound_m_per_s = file_.optional_scalar(object_ + "/sound_speed").value_or(1540.0);
    if (!file_.exists(object_ + "/initial_time"))
      file_.fail(object_ + "/initial_time", "missing dataset (time of the first sample)");
    const double initial_time = file_.scalar(object_ + "/initial_time");
    if (!file_.exists(object_ + "/probe")) file_.fail(object_ + "/probe", "missing object (the element positions)");
    read_probe(object_ + "/probe", dims[2]);
    if (!file_.exists(object_ + "/sequence"))
      file_.fail(object_ + "/sequence", "missing object (the transmitted waves)");
    read_sequence(object_ + "/sequence", dims[1]);
    read_pulse();
    if (auto prf = file_.optional_scalar(object_ + "/PRF")) source_["uff_prf_hz"] = std::to_string(*prf);
    if (auto active = file_.optional_scalar(object_ + "/N_active_elements"))
      source_["uff_active_elements"] = std::to_string(*active);
    channel_axes(initial_time);
  }

  // [transmit, element, sample] (+ iq for int16), ensemble outermost when grouped.
  void channel_axes(double initial_time) {
    const auto& dims = data_->dims();
    channel_ = true;
    base_.payload.dtype = data_->element_type();
    Axis element{.name = std::string(channel::element_axis), .size = static_cast<std::int64_t>(dims[2])};
    // Elements equally spaced along x (a linear array): the axis says so too (pitch, first x).
    if (const std::vector<double>* x = base_.vector(std::string(channel::element_x_m)); x && x->size() > 1) {
      const double step = step_of(*x);
      bool uniform = step != 0;
      for (std::size_t i = 0; i < x->size() && uniform; ++i)
        uniform = std::abs((*x)[i] - (x->front() + static_cast<double>(i) * step)) <= 1e-9 * std::abs(step);
      if (uniform)
        element = Axis{.name = element.name, .size = element.size, .spacing = step, .unit = "m", .origin = x->front()};
    }
    base_.payload.axes = {Axis{.name = std::string(channel::transmit_axis), .size = static_cast<std::int64_t>(dims[1])},
                          element,
                          Axis{.name = std::string(channel::sample_axis),
                               .size = static_cast<std::int64_t>(dims[3]),
                               .spacing = 1.0 / base_.sampling_frequency_hz,
                               .unit = "s",
                               .origin = initial_time}};
  }

  void read_probe(const std::string& probe, hsize_t channels) {
    if (file_.exists(probe + "/geometry")) {
      read_geometry(probe + "/geometry", channels);
      return;
    }
    // A linear_array written without its geometry: N elements at `pitch`, centred (USTB's rule).
    const auto count = file_.optional_scalar(probe + "/N");
    const auto pitch = file_.optional_scalar(probe + "/pitch");
    if (!count || !pitch) file_.fail(probe, "expected a 'geometry' dataset or linear_array N and pitch");
    if (static_cast<hsize_t>(*count) != channels)
      file_.fail(probe + "/N", "inconsistent sizes: " + std::to_string(static_cast<long long>(*count)) +
                                   " elements, data has " + std::to_string(channels) + " channels");
    std::vector<double> x(channels);
    for (hsize_t i = 0; i < channels; ++i)
      x[i] = (static_cast<double>(i) - (static_cast<double>(channels) - 1) / 2) * *pitch;
    base_.vectors[std::string(channel::element_x_m)] = x;
  }

  // MATLAB [elements x (x y z theta phi width height)] reads as (columns, elements).
  void read_geometry(const std::string& path, hsize_t channels) {
    std::vector<hsize_t> dims;
    const std::vector<double> geometry = file_.values(path, &dims);
    if (dims.size() != 2 || dims[0] < 3 || dims[0] > 7)
      file_.fail(path, "wrong rank: expected MATLAB [elements x 3..7] (x y z theta phi width height)");
    if (dims[1] != channels)
      file_.fail(path, "inconsistent sizes: " + std::to_string(dims[1]) + " elements, data has " +
                           std::to_string(channels) + " channels");
    static const char* const names[] = {"element_x_m",     "element_y_m",     "element_z_m",     "element_theta_rad",
                                        "element_phi_rad", "element_width_m", "element_height_m"};
    for (hsize_t column = 0; column < dims[0]; ++column)
      base_.vectors[names[column]] =
          std::vector<double>(geometry.begin() + column * channels, geometry.begin() + (column + 1) * channels);
  }

  void read_sequence(const std::string& sequence, hsize_t waves) {
    const std::vector<std::string> list = members(file_, sequence, uff_names::wave_class);
    if (list.size() != waves)
      file_.fail(sequence, "inconsistent sizes: " + std::to_string(list.size()) + " waves, data has " +
                               std::to_string(waves) + " transmits");
    std::vector<double> wavefront, angle, elevation, source_x, source_y, source_z, delay, origin_x, origin_y, origin_z;
    bool any_origin = false;
    for (const std::string& wave : list) {
      const double code = file_.optional_scalar(wave + "/wavefront").value_or(channel::wavefront_spherical);
      wavefront.push_back(code);
      const std::string source = wave + "/source";
      angle.push_back(file_.optional_scalar(source + "/azimuth").value_or(0.0));
      elevation.push_back(file_.optional_scalar(source + "/elevation").value_or(0.0));
      const Point s = code == channel::wavefront_plane ? Point{} : read_point(file_, source);
      source_x.push_back(s.x);
      source_y.push_back(s.y);
      source_z.push_back(s.z);
      delay.push_back(file_.optional_scalar(wave + "/delay").value_or(0.0));
      const std::string origin = first_existing(file_, wave, {"origin", "origo", "apex"});
      const Point o = origin.empty() ? Point{} : read_point(file_, origin);
      any_origin = any_origin || !origin.empty();
      origin_x.push_back(o.x);
      origin_y.push_back(o.y);
      origin_z.push_back(o.z);
      if (base_.speed_of_sound_m_per_s == 0)
        base_.speed_of_sound_m_per_s = file_.optional_scalar(wave + "/sound_speed").value_or(0);
    }
    auto& v = base_.vectors;
    v[std::string(channel::transmit_wavefront)] = wavefront;
    v[std::string(channel::transmit_angle_rad)] = angle;
    v["transmit_elevation_rad"] = elevation;
    v[std::string(channel::transmit_source_x_m)] = source_x;
    v["transmit_source_y_m"] = source_y;
    v[std::string(channel::transmit_source_z_m)] = source_z;
    v[std::string(channel::transmit_delay_s)] = delay;
    if (any_origin) {
      v["transmit_origin_x_m"] = origin_x;
      v["transmit_origin_y_m"] = origin_y;
      v["transmit_origin_z_m"] = origin_z;
    }
  }

  void read_pulse() {
    const auto center = file_.optional_scalar(object_ + "/pulse/center_frequency");
    base_.center_frequency_hz = center ? *center : base_.demodulation_frequency_hz;
  }

  // ---- beamformed data -------------------------------------------------------------------

  void map_beamformed_data() {
    const auto& dims = data_->dims();  // [frame, wave, channel, pixel]
    base_.kind = data_->is_complex() ? FrameKind::iq : FrameKind::rf;
    base_.demodulation_frequency_hz = file_.optional_scalar(object_ + "/modulation_frequency").value_or(0.0);
    base_.speed_of_sound_m_per_s = 0;  // beamformed_data has no sound_speed: from the sequence, else 1540
    if (file_.exists(object_ + "/probe")) read_probe(object_ + "/probe", probe_elements(object_ + "/probe"));
    if (file_.exists(object_ + "/sequence")) {
      const std::vector<std::string> list = members(file_, object_ + "/sequence", uff_names::wave_class);
      read_sequence(object_ + "/sequence", list.size());
    }
    if (base_.speed_of_sound_m_per_s == 0) base_.speed_of_sound_m_per_s = 1540.0;
    read_pulse();

    const std::string scan = object_ + "/scan";
    if (!file_.exists(scan)) file_.fail(scan, "missing object (the pixel grid)");
    const std::string scan_class = file_.class_of(scan);
    Axis lateral, axial;
    if (scan_class == uff_names::linear_scan_class) {
      const std::vector<double> x = axis_values(scan + "/x_axis"), z = axis_values(scan + "/z_axis");
      lateral = Axis{.name = "lateral",
                     .size = static_cast<std::int64_t>(x.size()),
                     .spacing = step_of(x),
                     .unit = "m",
                     .origin = x.front()};
      axial = Axis{.name = "axial",
                   .size = static_cast<std::int64_t>(z.size()),
                   .spacing = step_of(z),
                   .unit = "m",
                   .origin = z.front()};
      base_.vectors["scan_x_m"] = x;
      base_.vectors["scan_z_m"] = z;
    } else if (scan_class == uff_names::sector_scan_class) {
      const std::vector<double> a = axis_values(scan + "/azimuth_axis"), r = axis_values(scan + "/depth_axis");
      lateral = Axis{.name = "angle",
                     .size = static_cast<std::int64_t>(a.size()),
                     .spacing = step_of(a),
                     .unit = "rad",
                     .origin = a.front()};
      axial = Axis{.name = "radius",
                   .size = static_cast<std::int64_t>(r.size()),
                   .spacing = step_of(r),
                   .unit = "m",
                   .origin = r.front()};
      base_.vectors["scan_azimuth_rad"] = a;
      base_.vectors["scan_depth_m"] = r;
      // v1.2 `origin` (one point or one per line); v1.0/v1.1 `apex`; `origo` in some writers.
      const std::string origin = first_existing(file_, scan, {"origin", "apex", "origo"});
      std::vector<double> ox, oy, oz;
      if (!origin.empty())
        for (const std::string& point : members(file_, origin, uff_names::point_class)) {
          const Point p = read_point(file_, point);
          ox.push_back(p.x);
          oy.push_back(p.y);
          oz.push_back(p.z);
        }
      if (ox.empty()) ox = oy = oz = {0.0};
      base_.vectors["scan_origin_x_m"] = ox;
      base_.vectors["scan_origin_y_m"] = oy;
      base_.vectors["scan_origin_z_m"] = oz;
      source_["uff_scan_origin"] = origin.empty() ? "(none: 0, 0, 0)" : origin;
    } else {
      file_.fail(scan, "class '" + scan_class + "': expected uff.linear_scan or uff.sector_scan");
    }
    if (static_cast<hsize_t>(lateral.size * axial.size) != dims[3])
      file_.fail(object_ + "/data", "inconsistent sizes: " + std::to_string(dims[3]) + " pixels, the scan has " +
                                        std::to_string(lateral.size) + " x " + std::to_string(axial.size));
    lateral_size_ = static_cast<std::size_t>(lateral.size);
    axial_size_ = static_cast<std::size_t>(axial.size);
    // Sampling in depth: UFF's own field, else USTB's rule c / (2 dz).
    const auto fs = file_.optional_scalar(object_ + "/sampling_frequency");
    base_.sampling_frequency_hz =
        fs ? *fs : (axial.spacing > 0 ? base_.speed_of_sound_m_per_s / (2 * axial.spacing) : 0.0);
    base_.payload.dtype = data_->element_type();
    if (dims[1] > 1)
      base_.payload.axes.push_back(
          Axis{.name = std::string(channel::transmit_axis), .size = static_cast<std::int64_t>(dims[1])});
    if (dims[2] > 1) base_.payload.axes.push_back(Axis{.name = "channel", .size = static_cast<std::int64_t>(dims[2])});
    base_.payload.axes.push_back(lateral);
    base_.payload.axes.push_back(axial);
    source_["uff_scan"] = scan_class;
  }

  hsize_t probe_elements(const std::string& probe) {
    std::vector<hsize_t> dims;
    if (file_.exists(probe + "/geometry")) {
      file_.values(probe + "/geometry", &dims);
      return dims.size() == 2 ? dims[1] : 0;
    }
    return static_cast<hsize_t>(file_.optional_scalar(probe + "/N").value_or(0));
  }

  // A scan axis: MATLAB column vector [N x 1], read as (1, N) or (N,).
  std::vector<double> axis_values(const std::string& path) {
    std::vector<hsize_t> dims;
    std::vector<double> v = file_.values(path, &dims);
    if (v.empty()) file_.fail(path, "expected a non-empty vector");
    if (dims.size() > 2 || (dims.size() == 2 && dims[0] != 1 && dims[1] != 1))
      file_.fail(path, "wrong rank: expected a vector (MATLAB N x 1)");
    return v;
  }

  double positive_scalar(const std::string& path) {
    if (!file_.exists(path)) file_.fail(path, "missing dataset");
    const double value = file_.scalar(path);
    if (!(value > 0) || !std::isfinite(value))
      file_.fail(path, "expected a positive number, found " + std::to_string(value));
    return value;
  }

  // ---- frames, times, ensembles, sonopipe's own attributes -------------------------------

  void finish() {
    const auto& dims = data_->dims();
    const std::size_t acquisition_frames = dims[0];
    apply_sonopipe_attributes();
    base_.attributes["source_format"] = source_.at("source_format");
    if (data_->narrowed()) {
      source_["uff_narrowed"] = "float64 complex data stored as complex64";
      base_.attributes["uff_narrowed"] = "float64 -> complex64";
    }
    source_["uff_stored_type"] = data_->stored_type();
    ensemble_ = options_.ensemble;
    if (ensemble_ > 0) {
      if (acquisition_frames % ensemble_ != 0)
        file_.fail(object_ + "/data", "inconsistent sizes: " + std::to_string(acquisition_frames) +
                                          " frames do not divide into ensembles of " + std::to_string(ensemble_));
      const Axis ensemble_axis{.name = arfi::kEnsembleAxis, .size = static_cast<std::int64_t>(ensemble_)};
      auto& axes = base_.payload.axes;
      if (channel_) {
        axes.insert(axes.begin(), ensemble_axis);
      } else {
        if (dims[1] > 1 || dims[2] > 1)
          file_.fail(object_ + "/data", "an ensemble (ARFI set) needs one wave and one channel per frame, found " +
                                            std::to_string(dims[1]) + " x " + std::to_string(dims[2]));
        axes[0].name = arfi::kLocationAxis;
        axes[1].name = arfi::kSampleAxis;
        axes.insert(axes.begin() + 1, ensemble_axis);
      }
      source_["import_ensemble"] = std::to_string(ensemble_);
    }
    if (data_->is_complex() && data_->element_type() == DType::int16)
      base_.payload.axes.push_back(Axis{.name = "iq", .size = 2});
    const std::size_t group = ensemble_ > 0 ? ensemble_ : 1;
    frame_count_ = acquisition_frames / group;
    times_ns_.resize(frame_count_);
    sequences_.resize(frame_count_);
    for (std::size_t i = 0; i < frame_count_; ++i) {
      const std::size_t first = i * group;
      times_ns_[i] = first < frame_times_ns_.size()
                         ? frame_times_ns_[first]
                         : static_cast<std::int64_t>(std::llround(static_cast<double>(first) * frame_period_ns_));
      sequences_[i] = first < frame_sequences_.size() ? frame_sequences_[first] : i;
    }
    if (options_.stream_id != 0) base_.stream_id = options_.stream_id;
  }

  std::vector<std::int64_t> frame_times_ns_;
  std::vector<std::uint64_t> frame_sequences_;
  double frame_period_ns_ = 0;

  // Attributes sonopipe-export adds to the data object (ignored by USTB): what UFF has no field
  // for, so that an exported recording imports back as it was.
  void apply_sonopipe_attributes() {
    if (auto prf = source_.find("uff_prf_hz"); prf != source_.end() && channel_) {
      // USTB's PRF is per transmit event: one frame of W waves takes W / PRF.
      const double value = std::stod(prf->second);
      const double period_ns = static_cast<double>(data_->dims()[1]) / value * 1e9;
      if (value > 0 && std::isfinite(period_ns) && period_ns < 1e15) frame_period_ns_ = period_ns;  // < 11.6 days
    }
    for (const std::string& name : file_.attribute_names(object_)) {
      if (name.rfind(uff_names::sonopipe_prefix, 0) != 0) continue;
      const std::string key = name.substr(std::strlen(uff_names::sonopipe_prefix));
      auto single_value = [&] {
        const std::vector<double> values = file_.double_list_attribute(object_, name);
        if (values.size() != 1)
          file_.fail(object_, "attribute '" + name + "': " + std::to_string(values.size()) + " values, expected one");
        return values[0];
      };
      // An integer attribute value within [low, high) (converting a double outside an integer's
      // range is undefined behaviour; NaN fails the test too).
      auto integer_value = [&](double value, double low, double high) {
        if (!(value >= low && value < high))
          file_.fail(object_, "attribute '" + name + "': " + std::to_string(value) + " is not a valid value");
        return value;
      };
      constexpr double kTwoTo32 = 4294967296.0, kTwoTo63 = 9223372036854775808.0, kTwoTo64 = 18446744073709551616.0;
      if (key == uff_names::stream_id_key) {
        base_.stream_id = static_cast<std::uint32_t>(integer_value(single_value(), 0, kTwoTo32));
      } else if (key == uff_names::acquisition_time_key) {
        for (double t : file_.double_list_attribute(object_, name))
          frame_times_ns_.push_back(static_cast<std::int64_t>(integer_value(t, -kTwoTo63, kTwoTo63)));
      } else if (key == uff_names::sequence_key) {
        for (double s : file_.double_list_attribute(object_, name))
          frame_sequences_.push_back(static_cast<std::uint64_t>(integer_value(s, 0, kTwoTo64)));
      } else if (key == uff_names::sound_speed_key) {
        base_.speed_of_sound_m_per_s = single_value();
      } else if (key == uff_names::center_frequency_key) {
        base_.center_frequency_hz = single_value();
      } else if (key.rfind(uff_names::vector_prefix, 0) == 0) {
        base_.vectors[key.substr(std::strlen(uff_names::vector_prefix))] = file_.double_list_attribute(object_, name);
      } else if (key.rfind(uff_names::attribute_prefix, 0) == 0) {
        base_.attributes[key.substr(std::strlen(uff_names::attribute_prefix))] = file_.string_attribute(object_, name);
      }
    }
  }
};

}  // namespace

bool is_uff_file(const std::string& path) {
  recording::hdf5::quiet_errors();
  if (!std::filesystem::is_regular_file(path) || H5Fis_hdf5(path.c_str()) <= 0) return false;
  try {
    const UffFile file(path);
    if (!file.string_attribute("/", "version").empty()) return true;
    if (file.exists(uff_names::picmus_group)) return true;
    for (const std::string& child : file.children("/"))
      if (file.class_of("/" + child).rfind("uff.", 0) == 0) return true;
  } catch (const FormatError&) {
    return false;
  }
  return false;
}

std::unique_ptr<AcquisitionReader> open_uff(const std::string& path, const ImportOptions& options) {
  return std::make_unique<UffReader>(path, options);
}

}  // namespace sonopipe::formats
