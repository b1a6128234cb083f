// Fuzzes the importance-matrix reader on llama-imatrix's GGUF format
// (NAME.in_sum2 / NAME.counts tensors, imatrix.* keys), with and without the
// model's expert count for the legacy split rule.
#include "fuzz_util.h"
#include "saliency/imatrix.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string path = reap_fuzz::write_scratch("imatrix.gguf", data, size);
    reap::saliency::imatrix_file f;
    std::string err;
    (void) reap::saliency::read_imatrix(path, f, err);
    (void) reap::saliency::read_imatrix(path, f, err, 16);
    return 0;
}
