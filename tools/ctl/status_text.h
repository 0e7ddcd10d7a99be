// The daemon's Status as a short human-readable report (what `sonopipe-ctl status` prints).
#pragma once

#include <string>

#include "sonopipe/v1/result.pb.h"

namespace sonopipe::ctl {

std::string status_text(const v1::Status& status);
// One parameter: "arfi.loupas.kernel_wavelengths = 2 wavelengths (real, range [0.1, 100], live)".
std::string parameter_text(const v1::Parameter& parameter);

}  // namespace sonopipe::ctl
