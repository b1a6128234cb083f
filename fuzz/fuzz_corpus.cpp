// Fuzzes the JSONL corpus format: every line through parse_corpus_line (the
// checks calibrate and eval make before tokenizing), and the JSONL-or-text
// decision on the whole input.
#include "corpus/corpus_line.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string text((const char *) data, size);
    (void) reap::looks_like_jsonl_corpus("corpus.txt", text);
    size_t start = 0, line_no = 0;
    while (start <= text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        reap::corpus_line line;
        bool blank = false;
        std::string err;
        (void) reap::parse_corpus_line(text.substr(start, end - start), "corpus.jsonl:" + std::to_string(++line_no),
                                       line, blank, err);
        start = end + 1;
    }
    return 0;
}
