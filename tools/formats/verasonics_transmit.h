// One Verasonics transmit (a TX structure element) in the channel-data conventions of
// stages/beamform/channel_conventions.h: its wavefront, and the moment the wavefront passes the
// origin on Verasonics' clock (t = 0 when the element with TX.Delay 0 starts to fire).
//
// Verasonics: TX.focus and TX.Origin in wavelengths; focus 0 = plane wave, > 0 = focused at
// Origin + focus (sin theta, cos theta), < 0 = diverging from that virtual point behind the array;
// Steer(1) = theta in radians, positive towards +x (the element at larger x fires later, as
// computeTXDelays makes them), which is our sign; TX.Delay per element in wavelengths.
#pragma once

#include <vector>

namespace sonopipe::formats {

struct VerasonicsTransmit {
  double focus_wavelengths = 0.0;
  double steer_rad = 0.0;
  double origin_x_wavelengths = 0.0;
  double origin_z_wavelengths = 0.0;
  std::vector<double> delay_wavelengths;  // one per element
  std::vector<double> apodization;        // one per element; elements with 0 do not fire
};

struct TransmitGeometry {
  double wavefront = 0.0;    // channel::wavefront_plane or wavefront_spherical
  double angle_rad = 0.0;    // plane waves
  double source_x_m = 0.0;   // spherical waves: focus (z > 0) or virtual source (z < 0)
  double source_z_m = 0.0;
  // Time on Verasonics' clock at which the wavefront passes (0, 0), from the fired elements'
  // delays: each element fires as the wavefront passes it.
  double wavefront_at_origin_s = 0.0;
};

// Throws std::invalid_argument when no element fires or the vectors disagree in length.
TransmitGeometry transmit_geometry(const VerasonicsTransmit& transmit, const std::vector<double>& element_x_m,
                                   const std::vector<double>& element_z_m, double wavelength_m,
                                   double speed_of_sound_m_per_s);

}  // namespace sonopipe::formats
