#pragma once
// How a hung rank's circumstances are said, by the health API and, when it cannot be asked, by
// the scheduler, which ends the attempt itself: one wording in `mcli describe run` either way.

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace tessera {

// "before its first step: ready at step 36", "last step 37", ... (RankHang's fields).
inline std::string HangCircumstance(bool before_first_report, bool before_first_step,
                                    int64_t last_step) {
  if (before_first_report) {
    return "before its first report: stopped or stuck in the kernel, no CPU used";
  }
  if (before_first_step) return absl::StrCat("in its first step: ready at step ", last_step);
  return absl::StrCat("last step ", last_step);
}

}  // namespace tessera
