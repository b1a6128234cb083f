// What plan.cpp's parser and plan_validate.cpp's validator share, and nothing
// else includes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace reap {

// Checks keep[k] == e of the layer that `who` names: an expert id in
// [0, n_expert) that the layer has not listed before (`seen`, n_expert
// entries, marks the ids listed so far).
bool check_keep_id(const std::string & who, size_t k, int64_t e, int64_t n_expert, std::vector<uint8_t> & seen, std::string & err);

} // namespace reap
