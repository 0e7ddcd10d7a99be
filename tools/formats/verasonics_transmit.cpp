#include "tools/formats/verasonics_transmit.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "stages/beamform/channel_conventions.h"

namespace sonopipe::formats {

TransmitGeometry transmit_geometry(const VerasonicsTransmit& transmit, const std::vector<double>& element_x_m,
                                   const std::vector<double>& element_z_m, double wavelength_m,
                                   double speed_of_sound_m_per_s) {
  const std::size_t elements = element_x_m.size();
  if (element_z_m.size() != elements || transmit.delay_wavelengths.size() != elements ||
      transmit.apodization.size() != elements)
    throw std::invalid_argument("Delay and Apod need one value per element (" + std::to_string(elements) + ")");
  const double c = speed_of_sound_m_per_s;
  const double sin_a = std::sin(transmit.steer_rad), cos_a = std::cos(transmit.steer_rad);
  TransmitGeometry geometry;
  const bool plane = transmit.focus_wavelengths == 0.0;
  const double source_x = (transmit.origin_x_wavelengths + transmit.focus_wavelengths * sin_a) * wavelength_m;
  const double source_z = (transmit.origin_z_wavelengths + transmit.focus_wavelengths * cos_a) * wavelength_m;
  if (plane) {
    geometry.wavefront = channel::wavefront_plane;
    geometry.angle_rad = transmit.steer_rad;
  } else {
    geometry.wavefront = channel::wavefront_spherical;
    geometry.source_x_m = source_x;
    geometry.source_z_m = source_z;
  }
  // Each fired element e starts at t_e = Delay_e lambda / c, when the wavefront passes it:
  //   plane:      t_e = T0 + (x_e sin a + z_e cos a) / c           (T0: front at the origin)
  //   converging: t_e = T_F - |p_e - F| / c,  T0 = T_F - |F| / c    (focus F, z_F > 0)
  //   diverging:  t_e = T_V + |p_e - V| / c,  T0 = T_V + |V| / c    (virtual source V, z_V < 0)
  // T0 is the mean over fired elements (equal for each when the delays are exact).
  const double source_distance = std::hypot(source_x, source_z);
  double sum = 0.0;
  std::size_t fired = 0;
  for (std::size_t e = 0; e < elements; ++e) {
    if (transmit.apodization[e] == 0.0) continue;
    const double t_e = transmit.delay_wavelengths[e] * wavelength_m / c;
    const double to_source = std::hypot(element_x_m[e] - source_x, element_z_m[e] - source_z) / c;
    if (plane)
      sum += t_e - (element_x_m[e] * sin_a + element_z_m[e] * cos_a) / c;
    else if (source_z > 0)
      sum += t_e + to_source - source_distance / c;
    else
      sum += t_e - to_source + source_distance / c;
    ++fired;
  }
  if (fired == 0) throw std::invalid_argument("no element fires (Apod is all zero)");
  geometry.wavefront_at_origin_s = sum / static_cast<double>(fired);
  return geometry;
}

}  // namespace sonopipe::formats
