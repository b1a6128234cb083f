// Fuzzes the saliency archive reader (read_archive: a GGUF file with the
// reap.saliency.* keys and per-domain f64 tensors), then what plan and merge do
// with an archive that was accepted: the count invariant, the sum over all
// domains, the output spec, and merging the archive into a copy of itself.
#include "fuzz_util.h"
#include "saliency/archive.h"
#include "saliency/merge.h"

#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string path = reap_fuzz::write_scratch("saliency.gguf", data, size);
    reap::saliency::archive a;
    std::string err;
    if (!reap::saliency::read_archive(path, a, err)) {
        return 0;
    }
    (void) reap::saliency::validate(a, err);
    (void) reap::saliency::check_count_invariant(a, err, 1e-6);
    std::vector<std::string> names;
    for (const auto & d : a.domains) names.push_back(d.name);
    reap::saliency::domain_stats sum;
    (void) reap::saliency::sum_domains(a, names, sum, err);
    reap::gguf::output_spec spec;
    (void) reap::saliency::archive_spec(a, spec, err);
    reap::saliency::archive twice = a;
    (void) reap::saliency::merge_into(twice, a, err);
    return 0;
}
