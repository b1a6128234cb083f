// The options of reap plan that reap sweep shares, declared once: how the
// experts are ranked (--method, --domains, --consensus, --seed,
// --no-protect-super), how a width cut ranks channels (--channel-score) and
// how the pruned file is sized (--split-max-size).
#pragma once

#include "cli/args.h"
#include "plan/planners.h"
#include "plan/width_planner.h"

#include <cstdint>
#include <string>
#include <vector>

namespace reap::cli {

// The ranking rows and the prose after them; `method_given` records --method.
// `seed_help` is --seed's row (reap sweep's seed also draws its needles and samples).
void declare_ranking(options & t, planner::rank_options & rank, bool & method_given,
                     const char * seed_help = "seed of --method random (default 0)");

// --methods M,M,... (reap sweep, reap fit): the criteria as an axis, each once.
// Declare --method too, then t.excludes("--methods", "--method", ...).
void declare_methods(options & t, std::vector<planner::method> & methods, const std::string & help);

// --width K and --down-type T of a width plan.
void declare_width(options & t, int64_t & width, std::string & down_type);

// --channel-score S: which of the archive's channel statistics ranks each
// kept expert's channels in a width cut; `given` records it.
void declare_channel_score(options & t, planner::channel_score & by, bool & given);

// --split-max-size SIZE (units as --budget) into `split_max_bytes`.
void declare_split_max_size(options & t, uint64_t & split_max_bytes);

} // namespace reap::cli
