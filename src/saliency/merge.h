// Merging saliency archives: the sum of archives measured on disjoint parts
// of a corpus (or on different corpora) of one model, and the rule that one
// calibration, and one sample, is counted once. `reap merge` is
// merge_archives(); merge_into() is the sum of two archives in memory.
#pragma once

#include "saliency/archive.h"
#include "util/error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace reap::saliency {

// Adds `other` into `into`: fingerprints must be equal (every field; the
// message names the differing field), the metric sets the same, and both
// with channel statistics of the same width or both without, and both with
// the shared expert's or both without. Domains
// with the same name are summed (n_tokens, count, sums; max_norm takes the
// max); others are appended in `other`'s order. Provenance keys whose values
// differ between the two are dropped from `into`; keys only in `other` are
// not added (callers record their own provenance of the merge). An archive
// without squared norms (made before version 4) makes the sum one without
// them. Weights archives (reap score) are refused: scores do not add.
bool merge_into(archive & into, const archive & other, std::string & err);

// ---- what a merged archive was made of ----
//
// reap merge records, under k_key_merge_sources, the data_sha256 of every
// archive that went into it (an input that was itself merged contributes the
// list it records), so that one calibration cannot be counted twice: given
// twice, as a byte-identical copy, or inside an archive merged from it.
constexpr const char * k_key_merge_sources = "reap.saliency.merge.sources";
// The file sha256 of each input (what merges recorded before the sources).
constexpr const char * k_key_merge_inputs = "reap.saliency.merge.inputs";
// What the merged calibrations covered: "CORPUS_SHA256 i/n" per calibration
// (its corpus file and --shard), so that two parts sharing samples are refused.
constexpr const char * k_key_merge_coverage = "reap.saliency.merge.coverage";
// The samples a calibration decoded (a window of them or more), each as the
// corpus's 64-bit hash of its line (llama/corpus.h; a plain text file: of its
// text), ascending, stored as int64 bit patterns. A merge records the union of
// its inputs' when every input has them. Two inputs sharing a sample are
// refused whatever their corpus files (one the other plus a line, say).
constexpr const char * k_key_sample_hashes = "reap.saliency.sample_hashes";

// The sample hashes `a` records (ascending, distinct); false with no error
// when it records none (an older archive, an imatrix import), false with
// `err` when the value is malformed.
bool sample_hashes_of(const archive & a, std::vector<uint64_t> & out, std::string & err);
void set_sample_hashes(archive & a, std::vector<uint64_t> hashes);

// SHA-256 over an archive's statistics: the metric set, then per domain in
// name order its name, token count and every metric vector (the F64 values
// as stored). Equal for two files that hold the same measurements whatever
// their provenance keys. Channel statistics, when present, follow each
// domain's vectors, the shared expert's after them (an archive without
// them hashes as before).
std::string data_sha256(const archive & a);

// The archives `a` holds, as data_sha256 values: the list `a` records under
// k_key_merge_sources, or `a`'s own data_sha256 when it records none. False,
// naming the key, when the recorded list is not an array of distinct 64-digit
// lowercase hex strings.
bool merge_sources(const archive & a, std::vector<std::string> & out, std::string & err);

// The samples one calibration read: those of the corpus file with this
// sha256 whose hash is shard_index mod shard_count (calibrate --shard; 0/1 is
// every sample). --max-tokens caps take a prefix of these, so two parts of one
// shard always share samples.
struct coverage {
    std::string corpus_sha256;
    uint64_t    shard_index = 0, shard_count = 1;

    std::string text() const;   // "CORPUS_SHA256 i/n"
};

// What `a` covers: the list it records under k_key_merge_coverage, else, for
// an archive of reap calibrate, its corpus sha256 and --shard (from its
// options), else nothing (an imatrix import, an older archive: not known).
// False, naming the key, when a recorded value is malformed.
bool coverage_of(const archive & a, std::vector<coverage> & out, std::string & err);

// Whether two calibrations read a sample in common: the same corpus file and
// shards i/n, j/m with i = j mod gcd(n, m) (some hash is i mod n and j mod m).
bool coverages_overlap(const coverage & a, const coverage & b);

// ---- reap merge ----

struct merge_request {
    std::vector<std::string> inputs;        // at least two archives
    std::string              output;
    bool                     force = false;   // replace an existing output (never an input)
    std::string              tool;            // recorded as reap.saliency.tool
};

struct merge_input_summary {
    std::string path, arch;
    size_t      n_domains = 0;
    metric_set  metrics = metric_set::reap;
};

struct merge_result {
    std::vector<merge_input_summary>              inputs;
    std::vector<std::pair<std::string, int64_t>> domains;   // the merged archive's, tokens each
    bool        count_invariant = true;                      // check_count_invariant on the sum
    std::string invariant_note;                              // why not, when not
};

// Reads every input, refuses what would count a calibration or a sample twice
// (the same archive twice, a copy, an archive beside one merged from it, two
// calibrations whose coverage overlaps), sums them (merge_into) and writes
// the output (temp file + rename; the output rule of util/output_rule.h),
// recording the inputs' file hashes, the sources and the coverage.
bool merge_archives(const merge_request & req, merge_result & out, util::error & err);

} // namespace reap::saliency
