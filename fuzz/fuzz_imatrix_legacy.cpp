// Fuzzes the legacy llama-imatrix .dat reader, from memory and through the
// file reader (which must agree), with and without the model's expert count.
#include "fuzz_util.h"
#include "saliency/imatrix.h"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    reap::saliency::imatrix_file from_memory, from_file;
    std::string err_memory, err_file;
    const bool ok_memory = reap::saliency::parse_imatrix_legacy(data, size, "imatrix.dat", from_memory, err_memory, 16);
    // A legacy file never starts with the GGUF magic; the file reader would
    // take such an input as GGUF, so only the others are compared.
    if (size >= 4 && data[0] == 'G' && data[1] == 'G' && data[2] == 'U' && data[3] == 'F') {
        return 0;
    }
    const std::string path = reap_fuzz::write_scratch("imatrix.dat", data, size);
    const bool ok_file = reap::saliency::read_imatrix(path, from_file, err_file, 16);
    if (ok_memory != ok_file || (ok_file && from_file.entries.size() != from_memory.entries.size())) {
        fprintf(stderr, "legacy imatrix: memory %d '%s' vs file %d '%s'\n", ok_memory, err_memory.c_str(), ok_file,
                err_file.c_str());
        abort();
    }
    (void) reap::saliency::parse_imatrix_legacy(data, size, "imatrix.dat", from_memory, err_memory, 0);
    return 0;
}
