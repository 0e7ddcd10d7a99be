// The HDF5 recording format (layout in recording.h). A "series" is one group of frames or results
// with the same shape: an extensible payload dataset (one frame per chunk) plus per-frame header,
// sequence and time datasets that grow together.
#include "tools/common/recording.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "wire/wire.h"
#include "tools/common/hdf5_util.h"

namespace sonopipe::recording {

namespace {

using hdf5::check;
using hdf5::Id;

constexpr char kFormatName[] = "sonopipe-recording";
constexpr hsize_t kIndexChunk = 256;  // elements per chunk of the small per-frame datasets

// The per-axis attributes that let readers without protobuf interpret a series or a truth array.
void write_axis_attributes(hid_t object, const TensorSpec& spec) {
  std::vector<std::string> names, units;
  std::vector<double> spacing, origin;
  for (const Axis& axis : spec.axes) {
    names.push_back(axis.name);
    units.push_back(axis.unit);
    spacing.push_back(axis.spacing);
    origin.push_back(axis.origin);
  }
  hdf5::write_string_attribute(object, "element_type", std::string(dtype_name(spec.dtype)));
  hdf5::write_string_list_attribute(object, "axis_names", names);
  hdf5::write_string_list_attribute(object, "axis_units", units);
  hdf5::write_double_list_attribute(object, "axis_spacing", spacing);
  hdf5::write_double_list_attribute(object, "axis_origin", origin);
  hdf5::write_string_attribute(object, "unit", spec.unit);
}

std::vector<hsize_t> dataset_dims(hid_t dataset) {
  Id space(check(H5Dget_space(dataset), "H5Dget_space"), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  check(rank, "H5Sget_simple_extent_ndims");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

// An extensible dataset [N, frame_dims...] chunked one frame per chunk.
Id create_growing_dataset(hid_t group, const std::string& name, hid_t type,
                          const std::vector<hsize_t>& frame_dims, hsize_t frames_per_chunk) {
  std::vector<hsize_t> dims{0}, max_dims{H5S_UNLIMITED}, chunk{frames_per_chunk};
  for (hsize_t d : frame_dims) {
    dims.push_back(d);
    max_dims.push_back(d);
    chunk.push_back(d);
  }
  Id space(check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), max_dims.data()),
                 "H5Screate_simple"),
           H5Sclose);
  Id properties(check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"), H5Pclose);
  check(H5Pset_chunk(properties.get(), static_cast<int>(chunk.size()), chunk.data()), "H5Pset_chunk");
  return Id(check(H5Dcreate2(group, name.c_str(), type, space.get(), H5P_DEFAULT, properties.get(), H5P_DEFAULT),
                  "create dataset '" + name + "'"),
            H5Dclose);
}

// The file and memory spaces of frame `index` of `dataset` ([N, frame_dims...]).
struct FrameSelection {
  Id file_space;
  Id memory_space;
};

FrameSelection select_frame(hid_t dataset, hsize_t index, const std::vector<hsize_t>& frame_dims) {
  std::vector<hsize_t> start{index}, count{1};
  for (hsize_t d : frame_dims) {
    start.push_back(0);
    count.push_back(d);
  }
  Id file_space(check(H5Dget_space(dataset), "H5Dget_space"), H5Sclose);
  check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
        "H5Sselect_hyperslab");
  Id memory_space(check(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr),
                        "H5Screate_simple"),
                  H5Sclose);
  return {std::move(file_space), std::move(memory_space)};
}

// Grows `dataset` to index+1 frames and writes one frame at `index`.
void write_frame_at(hid_t dataset, hsize_t index, hid_t memory_type, const void* data,
                    const std::vector<hsize_t>& frame_dims) {
  std::vector<hsize_t> extent{index + 1};
  extent.insert(extent.end(), frame_dims.begin(), frame_dims.end());
  check(H5Dset_extent(dataset, extent.data()), "H5Dset_extent");
  const FrameSelection frame = select_frame(dataset, index, frame_dims);
  check(H5Dwrite(dataset, memory_type, frame.memory_space.get(), frame.file_space.get(), H5P_DEFAULT, data),
        "H5Dwrite");
}

// Reads frame `index` of `dataset` ([N, frame_dims...]) into `data`.
void read_frame_at(hid_t dataset, hsize_t index, hid_t memory_type, void* data,
                   const std::vector<hsize_t>& frame_dims) {
  const FrameSelection frame = select_frame(dataset, index, frame_dims);
  check(H5Dread(dataset, memory_type, frame.memory_space.get(), frame.file_space.get(), H5P_DEFAULT, data),
        "H5Dread");
}

std::vector<hsize_t> frame_dims_of(const TensorSpec& spec) {
  std::vector<hsize_t> dims;
  for (const Axis& axis : spec.axes) dims.push_back(static_cast<hsize_t>(axis.size));
  return dims;
}

// Group names must be one path component: HDF5 would nest on '/' and '.' names the group itself.
void check_component(const std::string& name, const std::string& what) {
  if (name.empty() || name == "." || name.find('/') != std::string::npos)
    throw RecordingError(what + " '" + name + "' cannot name an HDF5 group (empty, '.' or contains '/')");
}

// The datasets of one group being appended to.
struct SeriesWriter {
  std::string path;
  TensorSpec spec;
  std::vector<hsize_t> frame_dims;
  Id group, payload, header, sequence, acquisition_time, received;
  Id payload_memory_type, bytes_type;
  hsize_t count = 0;

  SeriesWriter(hid_t file, const std::string& path_, const TensorSpec& spec_)
      : path(path_), spec(spec_), frame_dims(frame_dims_of(spec_)) {
    if (spec.axes.empty()) throw RecordingError(path + ": payload has no axes");
    group = hdf5::create_group(file, path);
    write_axis_attributes(group.get(), spec);
    Id payload_type = hdf5::file_type(spec.dtype);
    payload_memory_type = hdf5::memory_type(spec.dtype);
    bytes_type = hdf5::variable_bytes_type();
    payload = create_growing_dataset(group.get(), "payload", payload_type.get(), frame_dims, 1);
    header = create_growing_dataset(group.get(), "header", bytes_type.get(), {}, 64);
    sequence = create_growing_dataset(group.get(), "sequence", H5T_STD_U64LE, {}, kIndexChunk);
    acquisition_time = create_growing_dataset(group.get(), "acquisition_time_ns", H5T_STD_I64LE, {}, kIndexChunk);
    received = create_growing_dataset(group.get(), "received_ns", H5T_STD_I64LE, {}, kIndexChunk);
  }

  void append(const TensorSpec& frame_spec, const std::string& header_bytes, const void* payload_bytes,
              std::size_t bytes, std::uint64_t sequence_number, std::int64_t acquisition_time_ns,
              std::int64_t received_ns) {
    if (frame_dims_of(frame_spec) != frame_dims || frame_spec.dtype != spec.dtype)
      throw RecordingError(path + ": frame " + frame_spec.shape_string() + " differs from the series' " +
                           spec.shape_string() + " (a series keeps one shape)");
    if (bytes != spec.byte_size())
      throw RecordingError(path + ": payload has " + std::to_string(bytes) + " bytes, " +
                           spec.shape_string() + " needs " + std::to_string(spec.byte_size()));
    write_frame_at(payload.get(), count, payload_memory_type.get(), payload_bytes, frame_dims);
    hvl_t header_value{header_bytes.size(), const_cast<char*>(header_bytes.data())};
    write_frame_at(header.get(), count, bytes_type.get(), &header_value, {});
    write_frame_at(sequence.get(), count, H5T_NATIVE_UINT64, &sequence_number, {});
    write_frame_at(acquisition_time.get(), count, H5T_NATIVE_INT64, &acquisition_time_ns, {});
    write_frame_at(received.get(), count, H5T_NATIVE_INT64, &received_ns, {});
    ++count;
  }
};

std::string stream_path(std::uint32_t stream_id) { return "/streams/" + std::to_string(stream_id); }

std::string result_path(const std::string& pipeline, const std::string& output) {
  return "/results/" + pipeline + "/" + output;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Writer

struct Writer::Impl {
  std::string path;
  Id file;
  std::map<std::string, SeriesWriter> series;  // by group path
};

Writer::Writer(const std::string& path) : impl_(std::make_unique<Impl>()) {
  hdf5::quiet_errors();
  impl_->path = path;
  impl_->file = Id(check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                         "cannot create recording '" + path + "'"),
                   H5Fclose);
  hdf5::write_string_attribute(impl_->file.get(), "format", kFormatName);
  hdf5::write_int64_attribute(impl_->file.get(), "format_version", kFormatVersion);
  hdf5::write_string_attribute(impl_->file.get(), "created_by", "sonopipe");
}

Writer::~Writer() {
  if (!impl_) return;
  impl_->series.clear();  // close datasets before the file
  if (impl_->file.valid()) H5Fflush(impl_->file.get(), H5F_SCOPE_GLOBAL);
}

void Writer::set_attribute(const std::string& key, const std::string& value) {
  if (key == "format" || key == "format_version")
    throw RecordingError("attribute '" + key + "' is reserved for the recording format");
  hdf5::write_string_attribute(impl_->file.get(), key, value);
}

void Writer::append_frame(const FrameMeta& meta, const void* payload, std::size_t bytes,
                          std::int64_t received_ns) {
  const std::string path = stream_path(meta.stream_id);
  auto it = impl_->series.find(path);
  if (it == impl_->series.end()) {
    if (hdf5::link_exists(impl_->file.get(), path))
      throw RecordingError(path + " exists but is not open for appending");
    it = impl_->series.try_emplace(path, impl_->file.get(), path, meta.payload).first;
    hdf5::write_int64_attribute(it->second.group.get(), "stream_id", meta.stream_id);
    hdf5::write_string_attribute(it->second.group.get(), "kind", std::string(frame_kind_name(meta.kind)));
  }
  const std::string header = wire::frame_header_from_meta(meta).SerializeAsString();
  it->second.append(meta.payload, header, payload, bytes, meta.sequence, meta.acquisition_time_ns, received_ns);
}

void Writer::append_result(const v1::ResultHeader& header, const void* payload, std::size_t bytes) {
  check_component(header.pipeline(), "pipeline name");
  check_component(header.output(), "output name");
  const TensorSpec spec = wire::tensor_spec_from_result(header);
  const std::string path = result_path(header.pipeline(), header.output());
  auto it = impl_->series.find(path);
  if (it == impl_->series.end()) {
    if (hdf5::link_exists(impl_->file.get(), path))
      throw RecordingError(path + " exists but is not open for appending");
    it = impl_->series.try_emplace(path, impl_->file.get(), path, spec).first;
    hdf5::write_string_attribute(it->second.group.get(), "pipeline", header.pipeline());
    hdf5::write_string_attribute(it->second.group.get(), "output", header.output());
  }
  it->second.append(spec, header.SerializeAsString(), payload, bytes, header.input_sequence(),
                    header.acquisition_time_ns(), header.timing().received_ns());
}

void Writer::write_truth(const std::string& name, const TensorSpec& spec, const std::vector<double>& values,
                         std::int64_t stream_id) {
  if (name.empty() || name.front() == '/' || name.back() == '/')
    throw RecordingError("truth name '" + name + "' is empty or starts/ends with '/'");
  if (spec.axes.empty()) throw RecordingError("truth '" + name + "' has no axes");
  if (values.size() != static_cast<std::size_t>(spec.element_count()))
    throw RecordingError("truth '" + name + "' has " + std::to_string(values.size()) + " values, " +
                         spec.shape_string() + " needs " + std::to_string(spec.element_count()));
  const std::string path = "/truth/" + name;
  if (hdf5::link_exists(impl_->file.get(), path)) throw RecordingError("truth '" + name + "' written twice");
  const std::vector<hsize_t> dims = frame_dims_of(spec);
  Id space(check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "H5Screate_simple"),
           H5Sclose);
  Id links(check(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate"), H5Pclose);
  check(H5Pset_create_intermediate_group(links.get(), 1), "H5Pset_create_intermediate_group");
  Id dataset(check(H5Dcreate2(impl_->file.get(), path.c_str(), H5T_IEEE_F64LE, space.get(), links.get(),
                              H5P_DEFAULT, H5P_DEFAULT),
                   "create truth '" + name + "'"),
             H5Dclose);
  check(H5Dwrite(dataset.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
        "write truth '" + name + "'");
  TensorSpec stored = spec;
  stored.dtype = DType::float64;
  write_axis_attributes(dataset.get(), stored);
  if (stream_id >= 0) hdf5::write_int64_attribute(dataset.get(), "stream_id", stream_id);
}

void Writer::flush() { check(H5Fflush(impl_->file.get(), H5F_SCOPE_GLOBAL), "flush '" + impl_->path + "'"); }

// ---------------------------------------------------------------------------------------------
// Reader

namespace {

// Deflate, the strongest filter in common HDF5 use, expands at most ~1032:1.
constexpr double kMaxFilterExpansion = 1100.0;

// A damaged or hostile file can declare any shape; before memory is allocated for a read, its size
// must be one the file could hold: at most the file's size for an unfiltered dataset, that times
// kMaxFilterExpansion for a compressed one. (Without this check a dataset of 2^40 elements, which
// HDF5 stores in a few hundred bytes when it is never written, ended the reader in std::bad_alloc.)
void check_readable_bytes(hid_t dataset, double bytes, const std::string& path) {
  hsize_t file_bytes = 0;
  Id file(check(H5Iget_file_id(dataset), "H5Iget_file_id"), H5Fclose);
  check(H5Fget_filesize(file.get(), &file_bytes), "H5Fget_filesize");
  Id properties(check(H5Dget_create_plist(dataset), "H5Dget_create_plist"), H5Pclose);
  const double limit = static_cast<double>(file_bytes) * (H5Pget_nfilters(properties.get()) > 0 ? kMaxFilterExpansion : 1.0);
  if (bytes > limit)
    throw RecordingError(path + " declares " + std::to_string(bytes) + " bytes to read, more than its file of " +
                         std::to_string(file_bytes) + " bytes can hold (damaged recording?)");
}

// Elements of a dataset's shape, as a double so that no product of dimensions can overflow.
double element_count_of(const std::vector<hsize_t>& dims) {
  double count = 1.0;
  for (hsize_t d : dims) count *= static_cast<double>(d);
  return count;
}

// The datasets of one series opened for reading, plus the frame shape stored in the file.
struct SeriesReader {
  std::string path;
  Id payload, header, received;
  std::vector<hsize_t> frame_dims;
  hsize_t count = 0;

  SeriesReader(hid_t file, const std::string& path_) : path(path_) {
    payload = Id(check(H5Dopen2(file, (path + "/payload").c_str(), H5P_DEFAULT), path + "/payload"), H5Dclose);
    header = Id(check(H5Dopen2(file, (path + "/header").c_str(), H5P_DEFAULT), path + "/header"), H5Dclose);
    if (hdf5::link_exists(file, path + "/received_ns"))
      received = Id(check(H5Dopen2(file, (path + "/received_ns").c_str(), H5P_DEFAULT), path + "/received_ns"),
                    H5Dclose);
    std::vector<hsize_t> dims = dataset_dims(payload.get());
    if (dims.empty()) throw RecordingError(path + "/payload has no frame axis");
    count = dims.front();
    frame_dims.assign(dims.begin() + 1, dims.end());
    if (dataset_dims(header.get()) != std::vector<hsize_t>{count})
      throw RecordingError(path + ": header and payload hold different frame counts");
  }

  void check_index(std::size_t index) const {
    if (index >= count)
      throw RecordingError(path + ": frame " + std::to_string(index) + " of " + std::to_string(count) +
                           " does not exist");
  }

  std::string read_header(std::size_t index) const {
    check_index(index);
    Id type = hdf5::variable_bytes_type();
    hvl_t value{0, nullptr};
    read_frame_at(header.get(), index, type.get(), &value, {});
    std::string bytes(static_cast<const char*>(value.p), value.len);
    hsize_t one = 1;
    Id space(check(H5Screate_simple(1, &one, nullptr), "H5Screate_simple"), H5Sclose);
    H5Dvlen_reclaim(type.get(), space.get(), H5P_DEFAULT, &value);
    return bytes;
  }

  std::vector<std::byte> read_payload(std::size_t index, const TensorSpec& spec) const {
    check_index(index);
    if (frame_dims_of(spec) != frame_dims)
      throw RecordingError(path + ": frame " + std::to_string(index) + " header says " + spec.shape_string() +
                           " but the payload dataset has another shape");
    check_readable_bytes(payload.get(), element_count_of(frame_dims) * static_cast<double>(dtype_size(spec.dtype)),
                         path + "/payload");
    std::vector<std::byte> bytes(spec.byte_size());
    Id type = hdf5::memory_type(spec.dtype);
    read_frame_at(payload.get(), index, type.get(), bytes.data(), frame_dims);
    return bytes;
  }

  std::int64_t read_received_ns(std::size_t index) const {
    check_index(index);
    std::int64_t value = 0;
    if (received.valid() && dataset_dims(received.get()) == std::vector<hsize_t>{count})
      read_frame_at(received.get(), index, H5T_NATIVE_INT64, &value, {});
    return value;
  }
};

std::vector<std::int64_t> read_int64_dataset(hid_t file, const std::string& path) {
  Id dataset(check(H5Dopen2(file, path.c_str(), H5P_DEFAULT), path), H5Dclose);
  const std::vector<hsize_t> dims = dataset_dims(dataset.get());
  if (dims.size() != 1) throw RecordingError(path + " is not one-dimensional");
  check_readable_bytes(dataset.get(), element_count_of(dims) * sizeof(std::int64_t), path);
  std::vector<std::int64_t> values(dims[0]);
  if (!values.empty())
    check(H5Dread(dataset.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), path);
  return values;
}

// Relative paths of every dataset below `group` (truth may be nested: "displacement/axial").
void collect_datasets(hid_t group, const std::string& prefix, std::vector<std::string>& out) {
  for (const std::string& name : hdf5::child_names(group)) {
    H5O_info_t info;
    check(H5Oget_info_by_name(group, name.c_str(), &info, H5P_DEFAULT), "H5Oget_info_by_name " + name);
    if (info.type == H5O_TYPE_DATASET) {
      out.push_back(prefix + name);
    } else if (info.type == H5O_TYPE_GROUP) {
      Id child = hdf5::open_group(group, name);
      collect_datasets(child.get(), prefix + name + "/", out);
    }
  }
}

}  // namespace

struct Reader::Impl {
  std::string path;
  Id file;
  mutable std::map<std::string, SeriesReader> series;  // opened on first use

  const SeriesReader& open(const std::string& group_path) const {
    auto it = series.find(group_path);
    if (it == series.end()) {
      if (!hdf5::link_exists(file.get(), group_path))
        throw RecordingError("'" + path + "' has no " + group_path);
      it = series.try_emplace(group_path, file.get(), group_path).first;
    }
    return it->second;
  }
};

Reader::Reader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  hdf5::quiet_errors();
  impl_->path = path;
  if (!std::filesystem::exists(path)) throw RecordingError("recording '" + path + "' does not exist");
  if (H5Fis_hdf5(path.c_str()) <= 0) throw RecordingError("'" + path + "' is not an HDF5 file");
  impl_->file = Id(check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "cannot open '" + path + "'"),
                   H5Fclose);
  const hid_t file = impl_->file.get();
  if (!hdf5::has_attribute(file, "format") || hdf5::read_string_attribute(file, "format") != kFormatName)
    throw RecordingError("'" + path + "' is not a sonopipe recording (no format = \"" + kFormatName + "\")");
  const std::int64_t version = hdf5::read_int64_attribute(file, "format_version");
  if (version < 1 || version > kFormatVersion)
    throw RecordingError("'" + path + "' has format_version " + std::to_string(version) +
                         ", this build reads up to " + std::to_string(kFormatVersion));
}

Reader::~Reader() {
  if (impl_) impl_->series.clear();
}

std::string Reader::attribute(const std::string& key) const {
  const hid_t file = impl_->file.get();
  if (!hdf5::has_attribute(file, key)) return "";
  if (key == "format_version") return std::to_string(hdf5::read_int64_attribute(file, key));
  return hdf5::read_string_attribute(file, key);
}

std::vector<std::uint32_t> Reader::streams() const {
  std::vector<std::uint32_t> ids;
  if (!hdf5::link_exists(impl_->file.get(), "/streams")) return ids;
  Id group = hdf5::open_group(impl_->file.get(), "/streams");
  for (const std::string& name : hdf5::child_names(group.get())) {
    char* end = nullptr;
    const unsigned long id = std::strtoul(name.c_str(), &end, 10);
    if (name.empty() || *end != '\0' || id > UINT32_MAX)
      throw RecordingError("'" + impl_->path + "': /streams/" + name + " is not a stream id");
    ids.push_back(static_cast<std::uint32_t>(id));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::size_t Reader::frame_count(std::uint32_t stream_id) const {
  return impl_->open(stream_path(stream_id)).count;
}

Frame Reader::read_frame(std::uint32_t stream_id, std::size_t index) const {
  const SeriesReader& series = impl_->open(stream_path(stream_id));
  const std::string header_bytes = series.read_header(index);
  v1::FrameHeader header;
  if (!header.ParseFromString(header_bytes))
    throw RecordingError(series.path + ": header " + std::to_string(index) + " is not a FrameHeader");
  Frame frame;
  try {
    frame.meta = wire::frame_meta_from_header(header);
  } catch (const wire::WireError& e) {
    throw RecordingError(series.path + ": header " + std::to_string(index) + ": " + e.what());
  }
  frame.payload = series.read_payload(index, frame.meta.payload);
  frame.received_ns = series.read_received_ns(index);
  return frame;
}

std::vector<FrameRef> Reader::frame_order() const {
  std::vector<FrameRef> order;
  for (std::uint32_t stream_id : streams()) {
    const std::vector<std::int64_t> times =
        read_int64_dataset(impl_->file.get(), stream_path(stream_id) + "/acquisition_time_ns");
    for (std::size_t i = 0; i < times.size(); ++i) order.push_back({stream_id, i, times[i]});
  }
  // Stable: equal times keep stream order, then arrival order within a stream.
  std::stable_sort(order.begin(), order.end(), [](const FrameRef& a, const FrameRef& b) {
    return a.acquisition_time_ns < b.acquisition_time_ns;
  });
  return order;
}

std::vector<std::pair<std::string, std::string>> Reader::result_outputs() const {
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!hdf5::link_exists(impl_->file.get(), "/results")) return outputs;
  Id results = hdf5::open_group(impl_->file.get(), "/results");
  for (const std::string& pipeline : hdf5::child_names(results.get())) {
    Id group = hdf5::open_group(results.get(), pipeline);
    for (const std::string& output : hdf5::child_names(group.get())) outputs.emplace_back(pipeline, output);
  }
  return outputs;
}

std::size_t Reader::result_count(const std::string& pipeline, const std::string& output) const {
  return impl_->open(result_path(pipeline, output)).count;
}

Result Reader::read_result(const std::string& pipeline, const std::string& output, std::size_t index) const {
  const SeriesReader& series = impl_->open(result_path(pipeline, output));
  Result result;
  if (!result.header.ParseFromString(series.read_header(index)))
    throw RecordingError(series.path + ": header " + std::to_string(index) + " is not a ResultHeader");
  TensorSpec spec;
  try {
    spec = wire::tensor_spec_from_result(result.header);
  } catch (const wire::WireError& e) {
    throw RecordingError(series.path + ": header " + std::to_string(index) + ": " + e.what());
  }
  result.payload = series.read_payload(index, spec);
  return result;
}

std::vector<std::string> Reader::truth_names() const {
  std::vector<std::string> names;
  if (!hdf5::link_exists(impl_->file.get(), "/truth")) return names;
  Id group = hdf5::open_group(impl_->file.get(), "/truth");
  collect_datasets(group.get(), "", names);
  return names;
}

Truth Reader::read_truth(const std::string& name) const {
  const std::string path = "/truth/" + name;
  if (!hdf5::link_exists(impl_->file.get(), path))
    throw RecordingError("'" + impl_->path + "' has no truth '" + name + "'");
  Id dataset(check(H5Dopen2(impl_->file.get(), path.c_str(), H5P_DEFAULT), path), H5Dclose);
  const hid_t id = dataset.get();
  const std::vector<hsize_t> dims = dataset_dims(id);
  check_readable_bytes(id, element_count_of(dims) * sizeof(double), path);
  Truth truth;
  truth.spec.dtype = DType::float64;
  const auto names = hdf5::has_attribute(id, "axis_names") ? hdf5::read_string_list_attribute(id, "axis_names")
                                                           : std::vector<std::string>{};
  const auto units = hdf5::has_attribute(id, "axis_units") ? hdf5::read_string_list_attribute(id, "axis_units")
                                                           : std::vector<std::string>{};
  const auto spacing = hdf5::has_attribute(id, "axis_spacing") ? hdf5::read_double_list_attribute(id, "axis_spacing")
                                                               : std::vector<double>{};
  const auto origin = hdf5::has_attribute(id, "axis_origin") ? hdf5::read_double_list_attribute(id, "axis_origin")
                                                             : std::vector<double>{};
  for (std::size_t i = 0; i < dims.size(); ++i) {
    Axis axis;
    axis.name = i < names.size() ? names[i] : "axis" + std::to_string(i);
    axis.size = static_cast<std::int64_t>(dims[i]);
    axis.unit = i < units.size() ? units[i] : "";
    axis.spacing = i < spacing.size() ? spacing[i] : 0.0;
    axis.origin = i < origin.size() ? origin[i] : 0.0;
    truth.spec.axes.push_back(axis);
  }
  if (hdf5::has_attribute(id, "unit")) truth.spec.unit = hdf5::read_string_attribute(id, "unit");
  if (hdf5::has_attribute(id, "stream_id")) truth.stream_id = hdf5::read_int64_attribute(id, "stream_id");
  truth.values.resize(static_cast<std::size_t>(truth.spec.element_count()));
  if (!truth.values.empty())
    check(H5Dread(id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, truth.values.data()), path);
  return truth;
}

}  // namespace sonopipe::recording
