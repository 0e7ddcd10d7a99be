// Names of the USTB UFF format used by both the reader and the writer (one place), and the
// attributes sonopipe-export adds to a data object for what UFF has no field for (USTB ignores
// attributes it does not know; the reader applies them so an export imports back unchanged).
#pragma once

namespace sonopipe::formats::uff_names {

inline constexpr char written_version[] = "v1.2.0";  // the version sonopipe-export writes

inline constexpr char channel_data_class[] = "uff.channel_data";
inline constexpr char beamformed_data_class[] = "uff.beamformed_data";
inline constexpr char linear_scan_class[] = "uff.linear_scan";
inline constexpr char sector_scan_class[] = "uff.sector_scan";
inline constexpr char wave_class[] = "uff.wave";
inline constexpr char point_class[] = "uff.point";
inline constexpr char probe_class[] = "uff.probe";
inline constexpr char pulse_class[] = "uff.pulse";
inline constexpr char wavefront_class[] = "uff.wavefront";

// The original PICMUS challenge layout (before UFF objects).
inline constexpr char picmus_group[] = "/US/US_DATASET0000";

// sonopipe's attributes on the channel_data / beamformed_data group: "sonopipe_" + key.
inline constexpr char sonopipe_prefix[] = "sonopipe_";
inline constexpr char stream_id_key[] = "stream_id";                    // one number
inline constexpr char acquisition_time_key[] = "acquisition_time_ns";   // one per UFF frame
inline constexpr char sequence_key[] = "sequence";                      // one per UFF frame
inline constexpr char sound_speed_key[] = "speed_of_sound_m_per_s";     // beamformed_data has none
inline constexpr char center_frequency_key[] = "center_frequency_hz";
inline constexpr char ensemble_key[] = "ensemble";                      // UFF frames per sonopipe frame
inline constexpr char vector_prefix[] = "vector_";                      // header vectors by name
inline constexpr char attribute_prefix[] = "attribute_";                // header attributes by key

}  // namespace sonopipe::formats::uff_names
