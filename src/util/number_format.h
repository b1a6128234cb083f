// How reap writes numbers for people: byte sizes (text and chart axes) and
// digit groups. One rule each, used by every command, the planner's messages,
// the model card and the figures.
//
// Sizes use decimal units (kB, MB, GB, TB = 10^3 ... 10^12, as disk vendors,
// gguf-split and `reap plan --budget 512G` count), the largest one not above the
// value, up to TB; text adds the binary size (KiB ... TiB, 2^10 ... 2^40) in
// brackets, since llama.cpp and memory sizes count in those:
//   format_size(999)              "999 B"
//   format_size(1500)             "1.50 kB (1.46 KiB)"
//   format_size(512000000000)     "512.00 GB (476.84 GiB)"
//   format_size(2000000000000)    "2.00 TB (1.82 TiB)"
// Both unit names parse back with planner::parse_size.
#pragma once

#include <cstdint>
#include <string>

namespace reap::util {

// A decimal size unit: its size in bytes and its name ("B", "kB", "MB", "GB", "TB").
struct size_unit {
    double      bytes = 1;
    const char * name = "B";
};

// The decimal unit for `bytes`: the largest of kB, MB, GB, TB not above it
// ("B" below 1000). A chart axis takes the unit of its largest value.
size_unit decimal_unit(uint64_t bytes);

// "N B" below 1000 bytes, else "X.XX <decimal unit> (Y.YY <binary unit>)".
std::string format_size(uint64_t bytes);

// Digits in groups of three: 1234567 -> "1,234,567", -1234 -> "-1,234".
std::string group_digits(int64_t v);

} // namespace reap::util
