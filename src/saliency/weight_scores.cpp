// reap::saliency weight scores: AIMER of every routed expert from the GGUF's
// slabs, read once in file order and dequantised by ggml (see weight_scores.h).
#include "saliency/weight_scores.h"

#include "moe/layout.h"
#include "moe/layout_gguf.h"
#include "util/file.h"
#include "util/parallel.h"

#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <map>
#include <vector>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace reap::saliency {

namespace {

// One slab tensor to read: its layer and how an expert's slab splits into rows.
struct slab_tensor {
    const gguf::tensor_info * t = nullptr;
    int      layer = 0;
    uint64_t expert_bytes = 0;   // nbytes / n_expert
    uint64_t row_bytes = 0;      // ggml_row_size(type, ne[0])
    int64_t  rows = 0;           // rows per expert: ne[1]
};

// Per expert of the whole model: Σ|w|, Σw² and the element count.
struct sums {
    std::vector<double>   abs, sq;
    std::vector<uint64_t> n;
};

bool dequantisable(const gguf::tensor_info & t) {
    const ggml_type type = (ggml_type) t.type;
    if (type == GGML_TYPE_F32) return true;
    const ggml_type_traits * tr = (int) t.type < GGML_TYPE_COUNT ? ggml_get_type_traits(type) : nullptr;
    return tr && tr->to_float && ggml_blck_size(type) > 0;
}

// The slab tensors of every MoE layer, checked, in file order.
bool find_slabs(const gguf::model & m, const moe::layout & lay, std::vector<slab_tensor> & out, std::string & err) {
    std::map<int, std::vector<std::string>> bases;   // per layer: the slab base names seen
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const gguf::tensor_info & t = m.tensors[i];
        const moe::tensor_role & role = lay.roles[i];
        if (role.kind == moe::tensor_kind::expert_scale && role.layer >= 0) {
            err = "tensor '" + t.name + "': per-expert scales are kept beside the slabs; AIMER of such a model is not scored";
            return false;
        }
        int layer = -1;
        std::string base;
        if (role.kind != moe::tensor_kind::expert_weight || !moe::parse_expert_weight(t.name, layer, base)) continue;
        if (!dequantisable(t)) {
            err = "tensor '" + t.name + "' has type " + gguf::type_name(t.type) + ", which ggml cannot dequantise";
            return false;
        }
        const ggml_type type = (ggml_type) t.type;
        if (t.ne[0] % ggml_blck_size(type) != 0) {
            err = "tensor '" + t.name + "': rows of " + std::to_string(t.ne[0]) + " values are not whole " + gguf::type_name(t.type) +
                  " blocks of " + std::to_string(ggml_blck_size(type));
            return false;
        }
        slab_tensor s;
        s.t = &t;
        s.layer = layer;
        s.expert_bytes = role.expert_bytes;
        s.row_bytes = ggml_row_size(type, t.ne[0]);
        s.rows = t.ne[1];
        if (s.row_bytes * (uint64_t) s.rows != s.expert_bytes) {
            err = "tensor '" + t.name + "': an expert's slab is " + std::to_string(s.expert_bytes) + " bytes, not " +
                  std::to_string(s.rows) + " rows of " + std::to_string(s.row_bytes);
            return false;
        }
        out.push_back(s);
        bases[layer].push_back(base);
    }
    for (int l : lay.moe_layers) {
        const auto & b = bases[l];
        auto has = [&](const char * n) { return std::find(b.begin(), b.end(), n) != b.end(); };
        const bool gate_up = has("ffn_gate_up_exps") || (has("ffn_gate_exps") && has("ffn_up_exps"));
        if (!has("ffn_down_exps") || !gate_up) {
            err = "MoE layer " + std::to_string(l) + " lacks " + (has("ffn_down_exps") ? "its gate and up" : "its down") +
                  " expert weights (AIMER scores gate, up and down together)";
            return false;
        }
    }
    std::sort(out.begin(), out.end(), [](const slab_tensor & a, const slab_tensor & b) {
        return a.t->shard != b.t->shard ? a.t->shard < b.t->shard : a.t->file_offset < b.t->file_offset;
    });
    return true;
}

// Every F16 value as ggml converts it, once: ggml-base converts a row one
// value at a time (61% of a score of F16 weights), a table lookup is cheap.
const std::vector<float> & fp16_values() {
    static const std::vector<float> t = [] {
        std::vector<float> v(1u << 16);
        for (uint32_t h = 0; h < v.size(); ++h) v[h] = ggml_fp16_to_fp32((ggml_fp16_t) h);
        return v;
    }();
    return t;
}

// Σ|x| of a row (returned) and Σx² (added to `sq`), in double, x = at(i):
// four accumulators of each, so that the adds of one do not wait on the last.
template <class At>
double row_sums(At at, int64_t n, double & sq) {
    double a[4] = {0, 0, 0, 0}, q[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        for (int k = 0; k < 4; ++k) {
            const double x = at(i + k);
            a[k] += std::fabs(x);
            q[k] += x * x;
        }
    }
    for (; i < n; ++i) {
        const double x = at(i);
        a[0] += std::fabs(x);
        q[0] += x * x;
    }
    sq += (q[0] + q[1]) + (q[2] + q[3]);
    return (a[0] + a[1]) + (a[2] + a[3]);
}

// Adds experts [first, first + n) of slab tensor `s`, whose bytes are `data`,
// into the sums of layer s.layer; rows dequantised on n_threads threads.
bool add_chunk(const slab_tensor & s, int64_t n_expert, int64_t first, int64_t n, const uint8_t * data, int n_threads,
               sums & into, std::string & err) {
    const ggml_type type = (ggml_type) s.t->type;
    const ggml_type_traits * tr = ggml_get_type_traits(type);
    const int64_t width = s.t->ne[0];
    const std::vector<float> & fp16 = fp16_values();
    std::vector<double> abs_sum(n, 0.0), sq_sum(n, 0.0);
    std::vector<char> bad(n, 0);
    util::parallel_for((int) n, n_threads, [&](int k) {
        std::vector<float> row(width);
        const uint8_t * slab = data + (uint64_t) k * s.expert_bytes;
        double a = 0, q = 0;
        for (int64_t r = 0; r < s.rows; ++r) {
            const uint8_t * src = slab + (uint64_t) r * s.row_bytes;
            if (type == GGML_TYPE_F16) {
                const uint16_t * h = (const uint16_t *) src;
                const float * t = fp16.data();
                a += row_sums([&](int64_t i) { return t[h[i]]; }, width, q);
                continue;
            }
            const float * v = (const float *) src;
            if (type != GGML_TYPE_F32) {
                tr->to_float(src, row.data(), width);
                v = row.data();
            }
            a += row_sums([&](int64_t i) { return v[i]; }, width, q);
        }
        if (!std::isfinite(a) || !std::isfinite(q)) bad[k] = 1;
        abs_sum[k] = a;
        sq_sum[k] = q;
    });
    for (int64_t k = 0; k < n; ++k) {
        if (bad[k]) {
            err = "tensor '" + s.t->name + "' expert " + std::to_string(first + k) + ": a weight that is not finite";
            return false;
        }
        const size_t cell = (size_t) s.layer * (size_t) n_expert + (size_t) (first + k);
        into.abs[cell] += abs_sum[k];
        into.sq[cell] += sq_sum[k];
        into.n[cell] += (uint64_t) s.rows * (uint64_t) width;
    }
    return true;
}

// Reads every slab tensor once, chunk by chunk, the next chunk in flight while
// the current one is summed.
bool read_and_sum(const gguf::model & m, const std::vector<slab_tensor> & slabs, int64_t n_expert,
                  const weight_score_options & o, sums & into, uint64_t total, std::string & err) {
    struct chunk {
        size_t  tensor = 0;
        int64_t first = 0, n = 0;
    };
    std::vector<chunk> plan;
    for (size_t i = 0; i < slabs.size(); ++i) {
        const int64_t per = std::max<int64_t>(1, (int64_t) (o.chunk_bytes / std::max<uint64_t>(1, slabs[i].expert_bytes)));
        for (int64_t e = 0; e < n_expert; e += per) plan.push_back({i, e, std::min(per, n_expert - e)});
    }
    // each shard opened once and read front to back: the kernel's readahead
    // follows one descriptor (a fresh one per read starts it over)
    std::vector<int> fds(m.shards.size(), -1);
    struct closer {
        std::vector<int> & fds;
        ~closer() {
            for (int fd : fds) {
                if (fd >= 0) ::close(fd);
            }
        }
    } close_all{fds};
    for (size_t i = 0; i < fds.size(); ++i) {
        fds[i] = util::open_input(m.shards[i].path, err);
        if (fds[i] < 0) return false;
        ::posix_fadvise(fds[i], 0, 0, POSIX_FADV_SEQUENTIAL);
    }
    auto read = [&](const chunk & c, std::vector<uint8_t> & buf, std::string & e) {
        const slab_tensor & s = slabs[c.tensor];
        buf.resize((size_t) (s.expert_bytes * (uint64_t) c.n));
        // in range: the reader checked that every tensor's data lie inside its shard
        if (!util::pread_full(fds[s.t->shard], buf.data(), buf.size(), s.t->file_offset + s.expert_bytes * (uint64_t) c.first)) {
            e = m.path_of(*s.t) + ": cannot read tensor '" + s.t->name + "': " + (errno ? strerror(errno) : "short read");
            return false;
        }
        return true;
    };
    std::vector<uint8_t> cur, next;
    std::string read_err;
    if (!plan.empty() && !read(plan[0], cur, read_err)) { err = read_err; return false; }
    uint64_t done = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
        std::future<bool> ahead;
        if (i + 1 < plan.size()) ahead = std::async(std::launch::async, [&, i] { return read(plan[i + 1], next, read_err); });
        const chunk & c = plan[i];
        const bool ok = add_chunk(slabs[c.tensor], n_expert, c.first, c.n, cur.data(), o.n_threads, into, err);
        const bool read_ok = !ahead.valid() || ahead.get();
        if (!ok) return false;
        if (!read_ok) { err = read_err; return false; }
        done += cur.size();
        if (o.on_progress) o.on_progress(done, total);
        std::swap(cur, next);
    }
    return true;
}

}  // namespace

bool score_weights(const gguf::model & m, const weight_score_options & o, archive & out, weight_score_report & rep,
                   std::string & err) {
    moe::layout lay;
    fingerprint fp;
    if (!moe::layout_of(m, lay, err, moe::describe_options()) || !model_fingerprint(m, fp, err)) {
        err = "no routed experts to score: " + err;
        return false;
    }
    if (lay.moe_layers.empty() || lay.n_expert < 1) {
        err = "no routed experts to score: the model has no MoE layer";
        return false;
    }
    std::vector<slab_tensor> slabs;
    if (!find_slabs(m, lay, slabs, err)) return false;
    const size_t n_cells = (size_t) fp.n_layer * (size_t) fp.n_expert;
    sums s{std::vector<double>(n_cells, 0.0), std::vector<double>(n_cells, 0.0), std::vector<uint64_t>(n_cells, 0)};
    uint64_t total = 0;
    std::map<std::string, int> types;
    for (const auto & t : slabs) {
        total += t.t->nbytes;
        ++types[gguf::type_name(t.t->type)];
    }
    if (!read_and_sum(m, slabs, lay.n_expert, o, s, total, err)) return false;

    archive a = make_archive(fp, metric_set::weights);
    domain_stats & d = a.add_domain(k_weights_domain);
    for (int l : fp.moe_layers) {
        for (uint32_t e = 0; e < fp.n_expert; ++e) {
            const size_t i = a.index(l, (int) e);
            const double n = (double) s.n[i];
            // all zero: adds nothing, scores the highest (removed first)
            d.aimer[i] = s.sq[i] > 0 ? std::min(1.0, (s.abs[i] / n) / std::sqrt(s.sq[i] / n)) : 1.0;
        }
    }
    a.provenance.set_string(k_key_tool, "reap score");
    a.provenance.set_string(k_key_score_source, "weights (no calibration): AIMER, mean|w| / rms(w) of gate, up and down");
    std::string type_text;
    for (const auto & [name, count] : types) type_text += (type_text.empty() ? "" : ", ") + name + " x" + std::to_string(count);
    rep.slab_bytes = total;
    rep.n_tensors = slabs.size();
    rep.types = type_text;
    out = std::move(a);
    return true;
}

}  // namespace reap::saliency
