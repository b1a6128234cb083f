// Fuzzes the split-set reader: the input is two shard files, the first
// 4 bytes giving the length of shard 1 (little-endian, taken modulo what is
// left), written as m-00001-of-00002.gguf and m-00002-of-00002.gguf; the
// model is opened from shard 1 as every command does.
#include "fuzz_util.h"
#include "gguf_model_checks.h"

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size < 4) {
        return 0;
    }
    uint32_t n1 = 0;
    memcpy(&n1, data, 4);
    data += 4;
    size -= 4;
    n1 = size ? (uint32_t) (n1 % (size + 1)) : 0;
    const std::string first = reap_fuzz::write_scratch("m-00001-of-00002.gguf", data, n1);
    reap_fuzz::write_scratch("m-00002-of-00002.gguf", data + n1, size - n1);
    reap_fuzz::exercise_model(first);
    return 0;
}
