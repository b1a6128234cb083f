// Fuzzes the GGUF reader on one file: header, KVs and tensor infos, then what
// every command does next with a model it accepted (layout, census, tensor
// reads). The file reader (bounded preads) and the in-memory parser must agree
// on every input: same verdict, same tensor count.
#include "fuzz_util.h"
#include "gguf_model_checks.h"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string path = reap_fuzz::write_scratch("model.gguf", data, size);

    reap::gguf::file_header from_file, from_memory;
    std::string err_file, err_memory;
    const bool ok_file   = reap::gguf::read_header(path, from_file, err_file);
    const bool ok_memory = reap::gguf::parse_header(data, size, path, from_memory, err_memory);
    if (ok_file != ok_memory || (ok_file && from_file.tensors.size() != from_memory.tensors.size())) {
        fprintf(stderr, "read_header and parse_header disagree: file %d '%s', memory %d '%s'\n", ok_file,
                err_file.c_str(), ok_memory, err_memory.c_str());
        abort();
    }
    reap_fuzz::exercise_model(path);
    return 0;
}
