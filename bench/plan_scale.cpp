// bench/plan_scale.cpp: what a width plan costs at Kimi-K3 scale (92 MoE
// layers x 720 kept experts x 1536 of 3072 channels: ~100M channel ids), made
// here (random channels, seeded), never from a model: `write PATH` writes it
// with reap's plan writer, `read PATH` reads it back with reap's plan reader
// (the parse every command that takes a plan does). Each prints its own wall
// and CPU time (making the plan not counted), the file's size and the process's peak RSS; run them as separate
// processes so that each peak is its own. `mask PATH` (built with llama.cpp)
// reads it and makes its eval mask (llama/mask.h mask_of_plan, what reap eval
// --mask and reap sweep hold while they run), printing the peak RSS after the
// read and after the mask. docs/commands.md quotes the numbers.
//
// usage: bench_plan_scale (write|read|mask) PATH [--layers N] [--keep N] [--n-ff N] [--width K]
#include "plan/plan.h"
#ifdef REAP_BENCH_MASK
#include "llama/mask.h"
#endif

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>

namespace {

long peak_rss_kib() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

// User + system CPU seconds so far (the wall time of a shared machine says little).
double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

reap::plan make_plan(int n_layer, int64_t n_keep, int64_t n_ff, int64_t K) {
    reap::plan p;
    p.arch = "kimi-k3";
    p.n_layer = n_layer + 1;   // block 0 dense, as in the DeepSeek-V3 family
    p.n_expert = 896;
    p.n_expert_used = 8;
    p.n_keep = n_keep;
    p.width_n_ff = n_ff;
    p.width_keep = K;
    std::mt19937 rng(1);
    std::vector<int64_t> ids(static_cast<size_t>(n_ff));
    for (int l = 1; l <= n_layer; ++l) {
        reap::plan_layer pl;
        pl.layer = l;
        for (int64_t e = 0; e < n_keep; ++e) pl.keep.push_back(e);
        for (int64_t e = 0; e < n_keep; ++e) {
            std::iota(ids.begin(), ids.end(), 0);
            std::shuffle(ids.begin(), ids.end(), rng);
            std::vector<int64_t> ch(ids.begin(), ids.begin() + K);
            std::sort(ch.begin(), ch.end());
            pl.channels.push_back(std::move(ch));
        }
        p.layers.push_back(std::move(pl));
    }
    return p;
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc < 3 || (strcmp(argv[1], "write") != 0 && strcmp(argv[1], "read") != 0 && strcmp(argv[1], "mask") != 0)) {
        fprintf(stderr, "usage: %s (write|read|mask) PATH [--layers N] [--keep N] [--n-ff N] [--width K]\n", argv[0]);
        return 2;
    }
    const bool write = strcmp(argv[1], "write") == 0;
    const std::string path = argv[2];
    int layers = 92;
    int64_t keep = 720, n_ff = 3072, K = 1536;
    for (int i = 3; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        const long long v = atoll(argv[i + 1]);
        if (a == "--layers") layers = int(v);
        else if (a == "--keep") keep = v;
        else if (a == "--n-ff") n_ff = v;
        else if (a == "--width") K = v;
        else { fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
    }
    std::string err;
    const auto t0 = std::chrono::steady_clock::now();
    reap::plan p;
    double t_make = 0, cpu_make = 0;
    if (write) {
        p = make_plan(layers, keep, n_ff, K);
        t_make = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        cpu_make = cpu_seconds();
        if (!reap::write_plan(p, path, true, err)) { fprintf(stderr, "%s\n", err.c_str()); return 1; }
    } else if (!reap::read_plan(path, p, err)) {
        fprintf(stderr, "%s\n", err.c_str());
        return 1;
    }
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - t_make;
    struct stat st{};
    stat(path.c_str(), &st);
    size_t ids = 0;
    for (const auto & l : p.layers) for (const auto & c : l.channels) ids += c.size();
    printf("%s: %zu layers, %zu channel ids, file %.1f MB, %.2f s wall, %.2f s CPU, peak RSS %.0f MiB\n",
           write ? "write" : "read", p.layers.size(), ids, double(st.st_size) / 1e6, t, cpu_seconds() - cpu_make,
           double(peak_rss_kib()) / 1024.0);
    if (strcmp(argv[1], "mask") != 0) return 0;
#ifdef REAP_BENCH_MASK
    reap::moe::layout lay;   // the blocks of the plan, none of them MTP
    lay.n_layer = p.n_layer;
    const double c0 = cpu_seconds();
    reap::expert_mask m;
    if (!reap::mask_of_plan(p, path, lay, m, err)) {
        fprintf(stderr, "%s\n", err.c_str());
        return 1;
    }
    size_t removed_bytes = 0;
    for (size_t b = 0; b < m.removed.size(); ++b) removed_bytes += m.removed[b].size() + (b < m.removed_channels.size() ? m.removed_channels[b].size() * sizeof(m.removed_channels[b][0]) : 0);
    printf("mask: %.2f s CPU, %.1f MB held, peak RSS %.0f MiB\n", cpu_seconds() - c0, double(removed_bytes) / 1e6,
           double(peak_rss_kib()) / 1024.0);
    return 0;
#else
    fprintf(stderr, "mask: built without llama.cpp\n");
    return 2;
#endif
}
