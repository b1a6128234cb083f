// Shared by the libFuzzer harnesses: the readers under test take paths (they
// pread bounded pieces of files rather than mapping them), so each input is
// written to a scratch file first. One scratch folder per process, removed at
// exit.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace reap_fuzz {

inline const std::string & scratch_dir() {
    static const std::string dir = [] {
        const char * t = getenv("TMPDIR");
        std::string tmpl = std::string(t && *t ? t : "/tmp") + "/reap-fuzz-XXXXXX";
        if (!mkdtemp(tmpl.data())) {
            perror("reap fuzz: mkdtemp");
            abort();
        }
        static std::string removed;
        removed = tmpl;
        atexit([] { std::string cmd = "rm -rf '" + removed + "'"; if (system(cmd.c_str())) {} });
        return tmpl;
    }();
    return dir;
}

// Writes `data` to scratch_dir()/name (replacing it) and returns the path.
inline std::string write_scratch(const std::string & name, const uint8_t * data, size_t size) {
    const std::string path = scratch_dir() + "/" + name;
    FILE * f = fopen(path.c_str(), "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror("reap fuzz: write scratch file");
        abort();
    }
    return path;
}

}  // namespace reap_fuzz
