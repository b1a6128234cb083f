// reap verify as one library call: everything `reap verify` checks, for the
// command, for reap report's audit and for reap fit, so that the three run the
// same verify. It opens the source and the plan, checks the plan against the
// source (fingerprint; another model's only with allow_other_model), prepares
// the imatrix slice a width cut's down audit needs, holds the output folder's
// shared lock (a publish into it in progress is waited for, never seen half
// done) and runs verify_pruned (prune.h), SHA256SUMS included.
//
// Core library: no llama.cpp dependency. Errors carry a kind; an output that
// is not the source pruned by the plan is a failure with report.differs set.
#pragma once

#include "prune/prune.h"
#include "util/error.h"

#include <functional>
#include <string>

namespace reap::prune {

struct verify_request {
    std::string model;                 // the source (or the first shard of a split set)
    std::string plan;                  // the plan OUT was pruned with
    std::string output;                // OUT (a single file, or the first shard)
    std::string sums;                  // the SHA256SUMS to check ("" = beside OUT)
    std::string imatrix;               // width cuts: the source imatrix given to prune ("" = none)
    bool        check_sums = true;
    bool        allow_other_model = false;
    double      publish_wait_s = 120;  // how long to wait for a publish into OUT's folder
    std::function<void(const std::string & dir)> on_wait;   // told once when it waits
};

struct verify_run_result {
    verify_report report;
    std::string   warning;        // a plan without a fingerprint, or another model's (allowed)
    std::string   plan_sha256;    // of the plan file's bytes
};

// False with err when the check cannot be made (usage/input: exit 2) or when
// OUT differs (out.report.differs; exit 1); err names the first difference.
bool run_verify(const verify_request & req, verify_run_result & out, util::error & err);

} // namespace reap::prune
