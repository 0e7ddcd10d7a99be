// Orchestration of the ncc_track CUDA path: buffers (allocated once), the launch sequence of each
// method, batching of the Lewis spectra and the Luo cross tables, and the auto timing.
#include "stages/strain/ncc_track/ncc_track.cuh"

#include <cufft.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "stages/common/cuda_check.h"
#include "stages/strain/ncc_track/cufft_helper.h"
#include "stages/strain/ncc_track/fft_size.h"
#include "stages/strain/ncc_track/ncc_kernels.cuh"

namespace sonopipe::cuda {
namespace {

using ncc::kDims;
namespace k = ncc_kernels;

void check_cufft(cufftResult result, const char* what) {
  if (result != CUFFT_SUCCESS)
    throw CudaError(std::string("cuFFT ") + what + " failed with code " + std::to_string(result));
}

// Where the trackers' buffers come from: a stream-ordered pool of ncc_track's own per device, which
// keeps what it has reserved. cudaMalloc takes the driver's locks (every stream's launches on the
// device wait meanwhile) and cudaFree waits for the whole device; a live change of the kernel paid
// both, on the `set` (a new tracker) and on the retire thread (the old one). A block is taken here
// with cudaMallocFromPoolAsync on a side stream (the calling thread waits for that stream only: the
// block is then ready for every stream) and given back with cudaFreeAsync there, so once the pool
// holds the memory neither waits for the device. The rule: a block is given back only when no work
// on the device uses it any more, as the host has seen (an event or stream synchronised after that
// work): the free is ordered after nothing the other streams do (see ~NccTracker). The pool keeps up
// to kKeepBytes it no longer hands out (more goes back to the driver when the side stream is waited
// for), room for more trackers once it has grown (make_room), and none after an allocation it could
// not make. Never destroyed (the CUDA context may be
// gone at exit).
class TrackerMemory {
 public:
  static TrackerMemory& of_current_device() {
    int device = 0;
    SONOPIPE_CUDA_CHECK(cudaGetDevice(&device));
    return of_device(device);
  }
  static TrackerMemory& of_device(int device) {
    static std::mutex mutex;
    static std::map<int, TrackerMemory*> pools;  // deliberately leaked, see above
    std::lock_guard lock(mutex);
    TrackerMemory*& pool = pools[device];
    if (!pool) pool = new TrackerMemory(device);
    return *pool;
  }
  void* allocate(std::size_t bytes) {
    const std::uint64_t reserved_before = attribute(cudaMemPoolAttrReservedMemCurrent);
    void* block = nullptr;
    const cudaError_t status = cudaMallocFromPoolAsync(&block, bytes, pool_, stream_);
    if (status != cudaSuccess) {
      cudaGetLastError();
      cudaStreamSynchronize(stream_);
      cudaMemPoolTrimTo(pool_, 0);  // what a failed attempt reserved goes back (ncc_track_test)
      check(status, "cudaMallocFromPoolAsync (the ncc_track tracker's block)", __FILE__, __LINE__);
    }
    SONOPIPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (attribute(cudaMemPoolAttrReservedMemCurrent) > reserved_before) make_room();
    return block;
  }
  void release(void* block) { cudaFreeAsync(block, stream_); }

 private:
  explicit TrackerMemory(int device) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    SONOPIPE_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
    std::uint64_t keep = kKeepBytes;
    SONOPIPE_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));
    SONOPIPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  std::uint64_t attribute(cudaMemPoolAttr which) const {
    std::uint64_t value = 0;
    cudaMemPoolGetAttribute(pool_, which, &value);
    return value;
  }
  // The pool just grew (the driver mapped memory for it): it takes room for what follows now, at
  // least 4 x what is in use (at most kKeepBytes), so that a live change, which makes its tracker
  // while the one it replaces (and other pipelines' ones) still hold theirs, grows it only past that
  // room. (Session 10 blamed the run's first kernel change's stall, 66 ms, on the pool growing; it was
  // cuFFT compiling kernels for the new size, see PlanCache. A pool growing by 64 MiB while frames run
  // takes 0.3-0.4 ms and holds no frame: H100, session 11 result-1.) Best effort: without the memory,
  // later allocations grow it as needed.
  void make_room() {
    const std::uint64_t room = std::min<std::uint64_t>(std::max<std::uint64_t>(4 * attribute(cudaMemPoolAttrUsedMemCurrent), kLeastRoom), kKeepBytes);
    const std::uint64_t reserved = attribute(cudaMemPoolAttrReservedMemCurrent);
    if (reserved >= room) return;
    void* extra = nullptr;
    if (cudaMallocFromPoolAsync(&extra, room - reserved, pool_, stream_) == cudaSuccess) cudaFreeAsync(extra, stream_);
    cudaGetLastError();
    cudaStreamSynchronize(stream_);
  }
  static constexpr std::uint64_t kKeepBytes = std::uint64_t(256) << 20;
  static constexpr std::uint64_t kLeastRoom = std::uint64_t(64) << 20;
  cudaMemPool_t pool_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// The tracker's buffers, carved from one block (TrackerMemory): one allocation when it is
// configured and one free when it goes, instead of one per buffer. Each buffer starts on 256 bytes,
// as cudaMalloc's would (cuFFT, vector loads).
class Carver {
 public:
  template <typename T>
  void add(T*& target, std::size_t count, std::size_t& total) {
    if (count == 0) return;
    constexpr std::size_t kAlignment = 256;
    offset_ = (offset_ + kAlignment - 1) / kAlignment * kAlignment;
    const std::size_t at = offset_;
    places_.push_back([&target, at](std::byte* block) { target = reinterpret_cast<T*>(block + at); });
    offset_ += count * sizeof(T);
    total += count * sizeof(T);
  }
  // Allocates the block (null when nothing was added) and points every buffer into it.
  void* allocate(TrackerMemory& memory) {
    if (offset_ == 0) return nullptr;
    void* block = memory.allocate(offset_);
    for (const auto& place : places_) place(static_cast<std::byte*>(block));
    return block;
  }

 private:
  std::size_t offset_ = 0;
  std::vector<std::function<void(std::byte*)>> places_;
};

// cuFFT plans kept for reuse, by device and shape. Making a plan takes milliseconds (H100: 0.6-0.7
// ms for lewis' two) and destroying one waits for the device, so a live change of ncc_track's kernel
// paid both on every change (session 9: set -> next frame 14-19 ms at 250 Hz). A tracker takes a plan
// for its shape here and gives it back when it goes; a plan is held by one tracker at a time (its
// stream is the holder's), and the trackers of one shape in turn reuse it. A plan is made with a
// work area from TrackerMemory (cufftSetAutoAllocation 0, then cufftSetWorkArea once) that stays
// with it. At most kKeptPlans are kept (further ones are destroyed when given back). Never destroyed
// at exit (the CUDA context may be gone by then): a process holds these few plans until it ends.
class PlanCache {
 public:
  struct Key {
    int device = 0, type = 0, rank = 0, batch = 0;
    std::array<int, 3> n{};
    bool operator<(const Key& other) const {
      return std::tie(device, type, rank, batch, n) < std::tie(other.device, other.type, other.rank, other.batch, other.n);
    }
  };
  // A plan with the work area it was given when made (from TrackerMemory, kept with it): a plan
  // taken again is used as it is, without cufftSetWorkArea.
  struct Plan {
    cufftHandle handle = 0;
    void* work = nullptr;
  };
  static PlanCache& instance() {
    static PlanCache* cache = new PlanCache;  // deliberately leaked, see above
    return *cache;
  }
  // A kept plan of `key`'s shape (made on the current device), or a new one.
  Plan take(const Key& key) {
    bool first_of_shape = false;
    {
      std::lock_guard lock(mutex_);
      auto found = kept_.find(key);
      if (found != kept_.end()) {
        const Plan plan = found->second;
        kept_.erase(found);
        return plan;
      }
      first_of_shape = compiled_.insert(key).second;
    }
    if (first_of_shape) compile_elsewhere(key);
    Plan plan;
    check_cufft(cufftCreate(&plan.handle), "create");
    try {
      check_cufft(cufftSetAutoAllocation(plan.handle, 0), "set auto allocation");
      int n[3] = {key.n[0], key.n[1], key.n[2]};
      std::size_t work_bytes = 0;
      check_cufft(cufftMakePlanMany(plan.handle, key.rank, n, nullptr, 1, 0, nullptr, 1, 0,
                                    static_cast<cufftType>(key.type), key.batch, &work_bytes),
                  key.type == CUFFT_R2C ? "plan R2C" : "plan C2R");
      if (work_bytes > 0) {
        plan.work = TrackerMemory::of_current_device().allocate(work_bytes);
        check_cufft(cufftSetWorkArea(plan.handle, plan.work), "set work area");
      }
    } catch (...) {
      if (plan.work) TrackerMemory::of_current_device().release(plan.work);
      cufftDestroy(plan.handle);
      throw;
    }
    return plan;
  }
  // As for a tracker's memory: only once the host has seen the work that used the plan finish.
  void give_back(const Key& key, Plan plan) {
    {
      std::lock_guard lock(mutex_);
      if (kept_.size() < kKeptPlans) {
        kept_.emplace(key, plan);
        return;
      }
    }
    cufftDestroy(plan.handle);
    if (plan.work) TrackerMemory::of_device(key.device).release(plan.work);
  }

 private:
  static constexpr std::size_t kKeptPlans = 16;
  std::mutex mutex_;
  std::multimap<Key, Plan> kept_;
  std::set<Key> compiled_;  // shapes this process has planned (their kernels are in the JIT cache)

  // cuFFT compiles kernels for a size it has not seen on this machine when it plans it (the CUDA
  // driver's JIT: 20-90 ms per size on the H100 with CUDA 13, cached in CUDA_CACHE_PATH), holding
  // the driver's lock meanwhile: every launch of this process waits, so a live change to a new
  // kernel shape held every pipeline's frames on the device (33-51 ms, session 11 result-1/2;
  // CUDA_MODULE_LOADING=EAGER and the patient-JIT property change nothing). So the first plan of
  // each shape in this process is made first by sonopipe-cufft-plan (tools/cufft_plan), a process
  // of its own with this one's environment: the kernels are compiled there, without our lock, and
  // our plan finds them in the cache (about 1 ms, no frame held; result-2: 0.96 ms after the other
  // process, frames at most 0.48 ms meanwhile). One helper serves the whole process (CufftHelper,
  // `sonopipe-cufft-plan --serve`, started at the first shape): a new process per shape cost each
  // shape's first `set` that process's start and CUDA context, 0.36-0.48 s (result-3, result-4);
  // now a shape the JIT cache holds costs the request's round trip, the helper's plan and ours (the
  // first change's configure 3.7 ms), one new to the machine its compilation (46 ms, in the helper,
  // frames at most 0.37 ms meanwhile; s11-cufft result-1). A helper that does not answer in
  // 2 s is killed, one that ends (or is killed) is restarted once at the next shape. The helper is $SONOPIPE_CUFFT_PLAN, or sonopipe-cufft-plan beside this program; without it (or
  // with the JIT cache off, CUDA_CACHE_DISABLE=1), the plan is made here as before.
  static void compile_elsewhere(const Key& key) {
    const std::string helper = [] {  // looked up each time: a test (or a user) may point elsewhere
      if (const char* path = std::getenv("SONOPIPE_CUFFT_PLAN")) return std::string(path);  // "": none
      char self[PATH_MAX] = {};
      const ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
      if (length <= 0) return std::string();
      std::string path(self, static_cast<std::size_t>(length));
      return path.substr(0, path.rfind('/') + 1) + "sonopipe-cufft-plan";
    }();
    const char* cache_off = std::getenv("CUDA_CACHE_DISABLE");
    if (helper.empty() || access(helper.c_str(), X_OK) != 0 || (cache_off && std::string(cache_off) == "1")) return;
    std::string request = std::to_string(key.device) + " " + std::to_string(key.type);
    for (int d = 0; d < key.rank; ++d) request += " " + std::to_string(key.n[d]);
    request += " " + std::to_string(key.batch);
    ncc::CufftHelper::of_process().make(helper, request);
    // A helper that failed (or none) compiled nothing: the plan below compiles here, as without it.
  }
};

}  // namespace

struct NccTracker::Impl {
  ncc::Geometry geo{};
  std::size_t common_bytes = 0, luo_bytes = 0, lewis_bytes = 0;
  float* maps = nullptr;
  unsigned* point_flags = nullptr;
  double* sum = nullptr;
  double *f2 = nullptr, *f1 = nullptr, *g2 = nullptr, *g1 = nullptr;
  int reference_extent[kDims], target_extent[kDims];
  // luo
  double* cross = nullptr;
  int luo_batch = 1;
  // lewis
  int fft_size[kDims] = {1, 1, 1};
  int lewis_batch = 1;
  std::size_t fft_total = 0, spectrum_total = 0;
  float *windows = nullptr, *regions = nullptr;
  cufftComplex *window_spectra = nullptr, *region_spectra = nullptr;
  cufftHandle forward = 0, inverse = 0;
  bool forward_plan = false, inverse_plan = false;
  PlanCache::Key forward_key{}, inverse_key{};
  PlanCache::Plan forward_cached{}, inverse_cached{};  // with their work areas (PlanCache)
  void* block = nullptr;          // every buffer above (Carver), from `memory`
  TrackerMemory* memory = nullptr;
  // standard
  k::StandardLaunch standard{};
  k::StandardSums standard_sums{};
  float* standard_scratch = nullptr;
  std::size_t standard_bytes = 0;
  bool standard_ok = false;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  // Frees what exists, also after a constructor that threw half-way (the unique_ptr holding this
  // Impl is a finished member, so it is destroyed even though ~NccTracker never runs).
  ~Impl() {
    if (forward_plan) PlanCache::instance().give_back(forward_key, forward_cached);
    if (inverse_plan) PlanCache::instance().give_back(inverse_key, inverse_cached);
    if (block) memory->release(block);
  }

  k::EnergyTables energy() const { return {f2, f1, g2, g1}; }

  void build_energy_tables(const float* f, const float* g, cudaStream_t stream) const {
    int reference_origin[kDims], target_origin[kDims];
    for (int d = 0; d < kDims; ++d) {
      reference_origin[d] = geo.start[d];
      target_origin[d] = geo.target_origin(d);
    }
    build_energy_table(f, reference_origin, reference_extent, f2, f1, stream);  // eq. (A2)
    build_energy_table(g, target_origin, target_extent, g2, g1, stream);        // eq. (A3)
  }

  // Sum-tables of signal^2 over the box, and of signal for Pearson (zero_mean).
  void build_energy_table(const float* signal, const int* origin, const int* extent, double* squares,
                          double* sums, cudaStream_t stream) const {
    k::TableSpec spec{};
    spec.tables = 1;
    for (int d = 0; d < kDims; ++d) {
      spec.origin[d] = origin[d];
      spec.extent[d] = extent[d];
    }
    spec.a = signal;
    spec.b = signal;
    k::build_tables(spec, geo, squares, stream);
    if (geo.zero_mean) {
      spec.b = nullptr;
      k::build_tables(spec, geo, sums, stream);
    }
  }
};

NccTracker::NccTracker(const ncc::Geometry& geometry, std::size_t batch_bytes, ncc::Method method)
    : impl_(std::make_unique<Impl>()), method_(method) {
  const bool all = method == ncc::Method::auto_select;
  const bool luo = all || method == ncc::Method::luo, lewis = all || method == ncc::Method::lewis;
  const bool standard = all || method == ncc::Method::standard;
  Impl& m = *impl_;
  m.geo = geometry;
  const ncc::Geometry& g = m.geo;
  for (int d = 0; d < kDims; ++d) {
    m.reference_extent[d] = g.reference_extent(d);
    m.target_extent[d] = g.target_extent(d);
  }
  const std::size_t points = static_cast<std::size_t>(g.point_count());
  const std::size_t shifts = static_cast<std::size_t>(g.shift_count());
  Carver carve;
  carve.add(m.maps, points * shifts, m.common_bytes);
  carve.add(m.point_flags, points, m.common_bytes);
  carve.add(m.sum, 1, m.common_bytes);
  std::size_t table_bytes = 0;
  const std::size_t reference_elements = k::table_elements(m.reference_extent);
  const std::size_t target_elements = k::table_elements(m.target_extent);
  if (luo || lewis) {  // the energy tables (standard sums its own)
    carve.add(m.f2, reference_elements, table_bytes);
    carve.add(m.g2, target_elements, table_bytes);
    if (g.zero_mean) {
      carve.add(m.f1, reference_elements, table_bytes);
      carve.add(m.g1, target_elements, table_bytes);
    }
  }
  // luo: as many cross tables as fit in batch_bytes (at least one, at most one per shift).
  const std::size_t cross_bytes = reference_elements * sizeof(double);
  m.luo_batch = static_cast<int>(std::clamp<std::size_t>(batch_bytes / cross_bytes, 1, shifts));
  if (luo) carve.add(m.cross, reference_elements * m.luo_batch, m.luo_bytes);
  m.luo_bytes += table_bytes;
  // lewis: FFT boxes W + S - 1 per dimension, cuFFT-friendly sizes; batch of points.
  for (int d = 0; d < kDims; ++d)
    m.fft_size[d] = g.kernel[d] + g.shifts(d) - 1 > 1 ? ncc::good_fft_size(g.kernel[d] + g.shifts(d) - 1) : 1;
  m.fft_total = static_cast<std::size_t>(m.fft_size[0]) * m.fft_size[1] * m.fft_size[2];
  m.spectrum_total = static_cast<std::size_t>(m.fft_size[0] / 2 + 1) * m.fft_size[1] * m.fft_size[2];
  const std::size_t per_point = 2 * m.fft_total * sizeof(float) + 2 * m.spectrum_total * sizeof(cufftComplex);
  m.lewis_batch = static_cast<int>(std::clamp<std::size_t>(batch_bytes / per_point, 1, points));
  if (lewis) {
    carve.add(m.windows, m.fft_total * m.lewis_batch, m.lewis_bytes);
    carve.add(m.regions, m.fft_total * m.lewis_batch, m.lewis_bytes);
    carve.add(m.window_spectra, m.spectrum_total * m.lewis_batch, m.lewis_bytes);
    carve.add(m.region_spectra, m.spectrum_total * m.lewis_batch, m.lewis_bytes);
    PlanCache::Key key{.rank = 0, .batch = m.lewis_batch};
    SONOPIPE_CUDA_CHECK(cudaGetDevice(&key.device));
    for (int d = kDims - 1; d >= 0; --d)  // slowest first, dropping leading size-1 dimensions
      if (key.rank > 0 || m.fft_size[d] > 1 || d == 0) key.n[key.rank++] = m.fft_size[d];
    m.forward_key = key;
    m.forward_key.type = CUFFT_R2C;
    m.inverse_key = key;
    m.inverse_key.type = CUFFT_C2R;
    m.forward_cached = PlanCache::instance().take(m.forward_key);
    m.forward = m.forward_cached.handle;
    m.forward_plan = true;
    m.inverse_cached = PlanCache::instance().take(m.inverse_key);
    m.inverse = m.inverse_cached.handle;
    m.inverse_plan = true;
    for (const cufftHandle plan : {m.forward, m.inverse}) {
      std::size_t work_bytes = 0;
      cufftGetSize(plan, &work_bytes);
      m.lewis_bytes += work_bytes;
    }
  }
  m.lewis_bytes += table_bytes;
  m.standard_ok = k::configure_standard(g, m.standard);
  const std::size_t sums_floats = k::standard_sums_floats(g, m.standard_sums);
  if (standard) carve.add(m.standard_scratch, sums_floats, m.standard_bytes);
  m.memory = &TrackerMemory::of_current_device();
  m.block = carve.allocate(*m.memory);
  if (!m.standard_scratch) return;
  k::StandardSums& s = m.standard_sums;
  s.reference_energy = m.standard_scratch;
  s.reference_sum = s.reference_energy + s.reference_elements;
  s.target_energy = s.reference_sum + s.reference_elements;
  s.target_sum = s.target_energy + s.target_elements;
  s.run2 = s.target_sum + s.target_elements;
  s.run1 = s.run2 + s.run_elements;
}

NccTracker::~NccTracker() = default;  // Impl frees

void NccTracker::normalise(const float* in, float* out, std::size_t count, cudaStream_t stream) {
  k::normalise(in, out, count, impl_->sum, stream);
}

void NccTracker::correlate(ncc::Method method, const float* f, const float* g, cudaStream_t stream) {
  Impl& m = *impl_;
  if (method_ != ncc::Method::auto_select && method != method_)
    throw CudaError("ncc_track: correlate() with a method this tracker did not allocate for");
  const ncc::Geometry& geo = m.geo;
  if (method == ncc::Method::luo || method == ncc::Method::lewis)  // standard zeroes them in its first kernel
    SONOPIPE_CUDA_CHECK(cudaMemsetAsync(m.point_flags, 0, sizeof(unsigned) * geo.point_count(), stream));
  switch (method) {
    case ncc::Method::standard:
    case ncc::Method::auto_select:
      if (!m.standard_ok) throw CudaError("ncc_track standard: the tile does not fit in shared memory");
      k::standard_ncc(geo, m.standard, f, g, m.standard_sums, m.maps, m.point_flags, stream);
      break;
    case ncc::Method::luo: {
      m.build_energy_tables(f, g, stream);
      k::TableSpec spec{};
      spec.a = f;
      spec.b = g;
      spec.cross = true;
      for (int d = 0; d < kDims; ++d) {
        spec.origin[d] = geo.start[d];
        spec.extent[d] = m.reference_extent[d];
      }
      for (int first = 0; first < geo.shift_count(); first += m.luo_batch) {
        spec.first_shift = first;
        spec.tables = std::min(m.luo_batch, geo.shift_count() - first);
        k::build_tables(spec, geo, m.cross, stream);  // eq. (A4), one table per shift
        k::luo_ncc(geo, m.cross, first, spec.tables, m.energy(), m.maps, m.point_flags, stream);
      }
      break;
    }
    case ncc::Method::lewis: {
      m.build_energy_tables(f, g, stream);
      check_cufft(cufftSetStream(m.forward, stream), "set stream");
      check_cufft(cufftSetStream(m.inverse, stream), "set stream");
      const float scale = 1.f / static_cast<float>(m.fft_total);
      for (int first = 0; first < geo.point_count(); first += m.lewis_batch) {
        k::lewis_gather(geo, m.fft_size, first, m.lewis_batch, f, g, m.windows, m.regions, stream);
        check_cufft(cufftExecR2C(m.forward, m.windows, m.window_spectra), "R2C");
        check_cufft(cufftExecR2C(m.forward, m.regions, m.region_spectra), "R2C");
        k::lewis_cross_spectrum(reinterpret_cast<const float2*>(m.window_spectra),
                                reinterpret_cast<float2*>(m.region_spectra),
                                m.spectrum_total * m.lewis_batch, scale, stream);
        check_cufft(cufftExecC2R(m.inverse, m.region_spectra, m.regions), "C2R");  // eq. (3)
        k::lewis_ncc(geo, m.fft_size, first, m.lewis_batch, m.regions, m.energy(), m.maps,
                     m.point_flags, stream);
      }
      break;
    }
  }
}

void NccTracker::find_peaks(int rank, const float spacing[kDims], float* displacement,
                            float* displacement_samples, float* correlation, std::uint8_t* flags,
                            cudaStream_t stream) {
  k::find_peaks(impl_->geo, impl_->maps, impl_->point_flags, rank, spacing, displacement,
                displacement_samples, correlation, flags, stream);
}

ncc::Method NccTracker::fastest_method(std::string& why) {
  if (method_ != ncc::Method::auto_select) throw CudaError("ncc_track: fastest_method() needs a tracker for auto");
  const ncc::Geometry& geo = impl_->geo;
  const std::size_t count = static_cast<std::size_t>(geo.frame[0]) * geo.frame[1] * geo.frame[2];
  std::vector<float> host(2 * count);
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal;
  for (auto& v : host) v = normal(rng);
  float* frames = nullptr;
  SONOPIPE_CUDA_CHECK(cudaMalloc(&frames, host.size() * sizeof(float)));
  SONOPIPE_CUDA_CHECK(cudaMemcpy(frames, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  cudaEvent_t start, stop;
  SONOPIPE_CUDA_CHECK(cudaEventCreate(&start));
  SONOPIPE_CUDA_CHECK(cudaEventCreate(&stop));
  ncc::Method best = ncc::Method::luo;
  float best_ms = 0.f;
  bool first = true;
  for (ncc::Method method : {ncc::Method::standard, ncc::Method::lewis, ncc::Method::luo}) {
    if (method == ncc::Method::standard && !impl_->standard_ok) continue;
    correlate(method, frames, frames + count, nullptr);  // warm-up (module load, cuFFT)
    SONOPIPE_CUDA_CHECK(cudaEventRecord(start, nullptr));
    correlate(method, frames, frames + count, nullptr);
    SONOPIPE_CUDA_CHECK(cudaEventRecord(stop, nullptr));
    SONOPIPE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.f;
    SONOPIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    char line[96];
    std::snprintf(line, sizeof line, " %s %.3f ms",
                  method == ncc::Method::standard ? "standard" : method == ncc::Method::lewis ? "lewis" : "luo", ms);
    why += line;
    if (first || ms < best_ms) {
      best = method;
      best_ms = ms;
      first = false;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(frames);
  return best;
}

const float* NccTracker::maps() const { return impl_->maps; }

std::size_t NccTracker::device_bytes(ncc::Method method) const {
  const Impl& m = *impl_;
  switch (method) {
    case ncc::Method::luo: return m.common_bytes + m.luo_bytes;
    case ncc::Method::lewis: return m.common_bytes + m.lewis_bytes;
    default: return m.common_bytes + m.standard_bytes;
  }
}

int NccTracker::luo_shifts_per_batch() const { return impl_->luo_batch; }
int NccTracker::lewis_points_per_batch() const { return impl_->lewis_batch; }

}  // namespace sonopipe::cuda
