// The daemon's Status as a short human-readable report (what `sonopipe-ctl status` prints).
#pragma once

#include <string>

#include "sonopipe/v1/result.pb.h"

namespace sonopipe::ctl {

std::string status_text(const v1::Status& status);

}  // namespace sonopipe::ctl
