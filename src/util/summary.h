// Long lists on a terminal, summarised one way everywhere: a list of at most
// k_list_full items is printed whole; a longer one as its count, min / median /
// max and its first few items, the full data going to JSON (and plans). Used by
// reap plan, compare and sweep so that a 92-layer, 896-expert model reads in a
// screenful.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace reap::util {

// Lists up to this many items are printed whole; longer ones are summarised.
constexpr size_t k_list_full  = 12;
// How many items a summarised list shows before "... (+N more)".
constexpr size_t k_list_first = 6;

struct summary {
    size_t count = 0;
    double min = 0, median = 0, max = 0, mean = 0;   // all 0 when count == 0
};

// Count, min, median (the mean of the two middle values for an even count),
// max and mean of `v`.
summary summarize(std::vector<double> v);

// The items joined by ", " when there are at most k_list_full of them, else
// the first k_list_first and "... (+N more)".
std::string first_few(const std::vector<std::string> & items);

// "min 1.5, median 2, max 7" with each value printed by `fmt` (printf style,
// one double).
std::string min_median_max(const summary & s, const char * fmt = "%g");

} // namespace reap::util
